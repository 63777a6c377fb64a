"""`python -m grader serve`: the grading service students submit to from their notebooks.

Grades with the same sandbox and checks as `autograde`, on the local pool or a Dask cluster
(--dask). Attempts, receipts and results are kept under DATA/service/attempts/, and the latest
attempt before each deadline in DATA/submitted/ (nbgrader's layout). Stop it with Ctrl+C or
SIGTERM; attempts still queued are graded when it starts again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

DEFAULT_PORT = 8750


def add_arguments(parser):
    from grader.course import add_course_option, add_workers_option

    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
    parser.add_argument(
        "--data",
        default=None,
        metavar="DIR",
        help="where attempts and submitted/ are written (default: the course directory)",
    )
    add_workers_option(parser, "parallel gradings")
    parser.add_argument("--dask", default=None, metavar="ADDRESS", help="grade on this Dask scheduler")
    parser.add_argument(
        "--hub-api",
        default=os.environ.get("JUPYTERHUB_API_URL"),
        metavar="URL",
        help="also accept students' JupyterHub API tokens, confirmed by this Hub API "
        "(default: $JUPYTERHUB_API_URL, set by the Hub for its services)",
    )
    parser.add_argument(
        "--prefix",
        default=os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/"),
        help="URL path the API lives under (default: $JUPYTERHUB_SERVICE_PREFIX or /)",
    )
    add_course_option(parser)


def run(args) -> int:
    from grader.course import CourseError, load_course_dir
    from grader.seeding import PUBLIC_SECRET, grading_secret

    logging.basicConfig(level=logging.INFO, format="serve: %(message)s", stream=sys.stdout)
    try:
        course, course_dir = load_course_dir(args.course)
    except CourseError as error:
        print(f"serve: {error}", file=sys.stderr)
        return 2
    secret = grading_secret(course.secret_env)
    if secret == PUBLIC_SECRET:
        print(
            f"serve: {course.secret_env} is not set; the service needs the course secret "
            "(students' tokens and inputs derive from it)",
            file=sys.stderr,
        )
        return 2
    data_dir = Path(args.data).resolve() if args.data else course_dir
    try:
        return asyncio.run(
            serve(
                course,
                data_dir,
                secret,
                args.host,
                args.port,
                args.workers,
                args.dask,
                args.hub_api,
                args.prefix,
            )
        )
    except KeyboardInterrupt:
        return 0


async def serve(
    course, data_dir, secret, host, port, workers=None, dask=None, hub_api=None, prefix="/"
) -> int:
    import tornado.httpserver

    from grader.service.app import Service, make_app
    from grader.service.grading import Grading

    loop = asyncio.get_running_loop()
    grading = Grading(course, secret, workers or course.limits.workers, dask=dask)
    try:
        await loop.run_in_executor(None, grading.start)
    except Exception as error:
        print(f"serve: cannot start grading: {error}", file=sys.stderr)
        grading.close()
        return 2
    hub = None
    if hub_api:
        from grader.service.hub import HubIdentity

        hub = HubIdentity(hub_api)
    service = Service(course, data_dir, secret, grading, hub=hub)
    pending = service.start()
    app = make_app(service, prefix)
    server = tornado.httpserver.HTTPServer(app, max_body_size=service.max_upload() * 4 + 2**20)
    try:
        server.listen(port, address=host)
    except OSError as error:
        print(f"serve: cannot listen on {host}:{port}: {error}", file=sys.stderr)
        grading.close()
        return 2
    try:  # attempts are accepted and queued while the sandbox warms up
        await loop.run_in_executor(None, grading.ready)
    except Exception as error:
        print(f"serve: cannot start grading: {error}", file=sys.stderr)
        server.stop()
        grading.close()
        return 2
    print(
        f"serve: {course.course_id} on http://{host}:{port}{('/' + prefix.strip('/')).rstrip('/')}/api/v1"
        f" ({grading.workers} workers{', Dask ' + dask if dask else ''}"
        f"{', JupyterHub identities from ' + hub_api if hub_api else ''}); "
        f"{pending} attempt(s) queued from before; data in {data_dir}",
        flush=True,
    )
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.stop()
    await server.close_all_connections()
    print("serve: stopping; attempts still queued are graded at the next start", flush=True)
    await loop.run_in_executor(None, grading.close)
    return 0
