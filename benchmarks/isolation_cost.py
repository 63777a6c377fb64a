"""What the sandbox's isolation adds per submission, as root and as an ordinary user.

    python benchmarks/isolation_cost.py [--sessions 30] [--against 4e5756c] [--user layerstest]

Each measurement starts the sandbox's warm interpreter once, then times `--sessions` submissions
the way grading drives them: start a student process, run a cell, call a function on an array,
end the process and everything it made. The same driver runs against this checkout and against
the sandbox of an earlier commit (`--against`, extracted with `git archive`), as root and, when
the machine has the user, as that ordinary user (through runuser). Prints milliseconds per
submission and the ratio to the earlier sandbox in each setting. Compare the whole grader with
vanilla nbgrader with benchmarks/autograde_vs_nbgrader.py.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BEFORE = "4e5756c"  # the sandbox before user, PID namespaces, cgroups and seccomp

DRIVER = """
import json, sys, time
import numpy as np
from grader.sandbox import RemoteFunction, Sandbox
sessions = int(sys.argv[1])
with Sandbox() as box:
    def one():
        live = box.session()
        live.start()
        assert live.run_cell("cell", "def double(x):\\n    return 2 * x\\n").ok
        assert RemoteFunction(live, "double")(np.ones(7)).sum() == 14
        live.close()
    one()
    start = time.perf_counter()
    for _ in range(sessions):
        one()
    seconds = (time.perf_counter() - start) / sessions
    print(json.dumps({"ms": 1000 * seconds, "walls": getattr(box, "describe", lambda: box.warnings)()}))
"""


def extract(commit: str, into: Path) -> Path:
    """The grader package of `commit`, extracted under `into` (the repository is not touched)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "grader"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def measure(tree: Path, sessions: int, user: str | None, workdir: Path) -> dict:
    script = workdir / "driver.py"
    script.write_text(DRIVER)
    command = [sys.executable, "-P", str(script), str(sessions)]
    if user:
        command = [
            shutil.which("runuser") or "/usr/sbin/runuser",
            "-u",
            user,
            "--",
            "env",
            f"MPLCONFIGDIR={workdir}",
            "HOME=/tmp",
            *command,
        ]
    environment = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "LANG": "C.UTF-8"}
    done = subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=environment, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the driver failed ({tree}, user {user or 'root'}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30, help="submissions timed per measurement")
    parser.add_argument("--against", default=BEFORE, help="the commit whose sandbox is the baseline")
    parser.add_argument("--user", default="layerstest", help="the ordinary user to measure as")
    args = parser.parse_args()
    users = [None]
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(args.user)
            users.append(args.user)
        except KeyError:
            print(f"no user {args.user!r}: measuring as root only")
    workdir = Path(tempfile.mkdtemp(prefix="isolation-cost-"))
    workdir.chmod(0o755)
    try:
        before = extract(args.against, workdir / "before")
        for user in users:
            if user:
                shutil.chown(workdir, user)
            now = measure(REPO, args.sessions, user, workdir)
            then = measure(before, args.sessions, user, workdir)
            who = user or ("root" if os.geteuid() == 0 else "this user")
            print(
                f"{who}: {now['ms']:.1f} ms per submission now, {then['ms']:.1f} ms with the sandbox of "
                f"{args.against}: ratio {now['ms'] / then['ms']:.2f}"
            )
            for line in now["walls"]:
                print(f"  {line}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
