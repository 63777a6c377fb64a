"""Submit this notebook to the course's grading service, or check one task, from inside the notebook.

    from layerlab import submit; submit()      # the whole notebook: one attempt
    from layerlab import check; check("linear_forward")    # the same, showing one task

Both send the notebook as last saved (save with Ctrl+S first) and show a table: part, score,
feedback and the misconception behind a mistake. The service address and your token come from
the environment (LAYERLAB_SERVICE_URL and LAYERLAB_SERVICE_TOKEN) or from a file
`layerlab-service.toml` in the notebook's folder or one above it, or `~/.config/layerlab/service.toml`:

    url = "https://grading.example.edu/layers"
    token = "ada.0123456789abcdef0123456789abcdef"

On a JupyterHub whose grading service confirms identities with the Hub, the url alone is enough:
the request carries this server's Hub API token (JUPYTERHUB_API_TOKEN). Without a service, one line
says so; in the self-study edition the grader then checks the notebook here, on the public inputs.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

ENV_URL = "LAYERLAB_SERVICE_URL"
ENV_TOKEN = "LAYERLAB_SERVICE_TOKEN"
HUB_TOKEN = "JUPYTERHUB_API_TOKEN"
CONFIG_NAME = "layerlab-service.toml"
USER_CONFIG = Path("~/.config/layerlab/service.toml")
WAIT_PER_REQUEST_S = 20
DEFAULT_TIMEOUT_S = 900
ASSIGNMENT_ID = re.compile(r"\d{1,4}_[A-Za-z0-9_]+")
last_feedback = None  # the Feedback shown last, for scripts


class Feedback:
    """A graded attempt as the student sees it; renders as an HTML table in JupyterLab, text elsewhere.

    data: {"assignment", "receipt" {"attempt", "received", "sha256"} or None, "result" {"score",
    "max_score", "manual_points", "parts" [{"part", "task", "score", "max_score", "status",
    "feedback", "misconceptions" [{"code", "meaning"}]}], "error", "public_inputs", "late"}}
    only: the part ids to show (all when empty); note: a line shown above the table.
    """

    def __init__(self, data: dict, only: tuple[str, ...] = (), note: str = ""):
        self.data, self.only, self.note = data, tuple(only), note
        self.result = data.get("result") or {}
        self.parts = [p for p in self.result.get("parts", []) if not only or p["part"] in only]

    @property
    def full_marks(self) -> bool:
        graded = [p for p in self.parts if p["status"] != "manual"]
        return (
            bool(graded)
            and all(p["score"] >= p["max_score"] for p in graded)
            and not self.result.get("error")
        )

    def _lines(self) -> list[str]:
        lines = [self.note] if self.note else []
        receipt = self.data.get("receipt")
        if receipt:
            lines.append(
                f"Attempt {receipt['attempt']} received {receipt['received']} "
                f"(sha256 {receipt['sha256'][:16]}…)"
            )
        result = self.result
        if result.get("error"):
            lines.append(f"This notebook could not be graded: {result['error']}")
        if result.get("public_inputs"):
            lines.append("Graded on the public inputs only; the hidden checks grade it after the deadline.")
        if result.get("late"):
            lines.append("Received after the deadline: graded for feedback, not counted as your submission.")
        return lines

    def _summary(self) -> str:
        score = sum(p["score"] for p in self.parts)
        total = sum(p["max_score"] for p in self.parts if p["status"] != "manual")
        manual = sum(p["max_score"] for p in self.parts if p["status"] == "manual")
        text = f"Automatic score: {score:g}/{total:g}"
        if manual:
            text += f" (+{manual:g} graded by your instructor)"
        if self.full_marks:
            text += " — full marks on every automatically graded part."
        return text

    def __str__(self) -> str:
        rows = [("part", "score", "feedback", "misconception")]
        for part in self.parts:
            score = "manual" if part["status"] == "manual" else f"{part['score']:g}/{part['max_score']:g}"
            codes = ", ".join(m["code"] for m in part["misconceptions"])
            feedback = " ".join(part["feedback"].split())
            rows.append((f"{part['task']} {part['part']}".strip(), score, feedback, codes))
        widths = [min(max(len(row[i]) for row in rows), 60) for i in range(4)]
        table = [
            " | ".join(cell[:60].ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
        ]
        return "\n".join([*self._lines(), *table, self._summary()])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        left = 'style="text-align: left; vertical-align: top"'
        cells = []
        for part in self.parts:
            score = (
                "graded by your instructor"
                if part["status"] == "manual"
                else f"{part['score']:g} / {part['max_score']:g}"
            )
            meanings = "<br>".join(
                f"<code>{html.escape(m['code'])}</code> {html.escape(m.get('meaning', ''))}"
                for m in part["misconceptions"]
            )
            cells.append(
                f'<tr class="layerlab-{html.escape(part["status"])}">'
                f"<td {left}>{html.escape(part['task'])} <code>{html.escape(part['part'])}</code></td>"
                f"<td {left}>{score}</td><td {left}>{html.escape(part['feedback'])}</td>"
                f"<td {left}>{meanings}</td></tr>"
            )
        lines = "".join(f"<p>{html.escape(line)}</p>" for line in self._lines())
        return (
            f'<div class="layerlab-feedback">{lines}<table><thead><tr>'
            + "".join(f"<th {left}>{name}</th>" for name in ("part", "score", "feedback", "misconception"))
            + f"</tr></thead><tbody>{''.join(cells)}</tbody></table>"
            f"<p><strong>{html.escape(self._summary())}</strong></p></div>"
        )


def service_config(start: Path | None = None) -> dict | None:
    """{"url", "token", "scheme", "from"} from the environment or the nearest config file; None when
    none is set. On a JupyterHub, a configured url without a token uses the Hub's API token of this
    server (JUPYTERHUB_API_TOKEN), which the service confirms with the Hub.

    A config file that exists but lacks a field or is not TOML raises ValueError naming the file.
    """
    url, token = os.environ.get(ENV_URL, "").strip(), os.environ.get(ENV_TOKEN, "").strip()
    found = None
    if url or token:
        if not url:
            raise ValueError(f"{ENV_TOKEN} is set but {ENV_URL} is not")
        found = {"url": url, "token": token, "from": "the environment"}
    else:
        start = Path(start or Path.cwd()).resolve()
        files = [folder / CONFIG_NAME for folder in (start, *start.parents)] + [USER_CONFIG.expanduser()]
        path = next((path for path in files if path.is_file()), None)
        found = _read_config(path) if path is not None else None
    if found is None:
        return None
    found["scheme"] = "Bearer"
    if not found["token"]:
        hub_token = os.environ.get(HUB_TOKEN, "").strip()
        if not hub_token:
            raise ValueError(f"no token for the grading service in {found['from']} (and not on a JupyterHub)")
        found.update(token=hub_token, scheme="token")
    return found


def _read_config(path: Path) -> dict:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path} is not a readable TOML file: {error}") from None
    if type(data.get("url")) is not str or not data["url"].strip():
        raise ValueError(f'{path} needs url = "..."')
    token = data.get("token", "")
    if type(token) is not str:
        raise ValueError(f'{path}: token should be text, token = "..."')
    return {"url": data["url"].strip(), "token": token.strip(), "from": str(path)}


def current_notebook() -> Path | None:
    """The notebook this kernel belongs to (JupyterLab tells its kernels), else the only one in the folder."""
    session = os.environ.get("JPY_SESSION_NAME", "")
    if session.endswith(".ipynb") and Path(session).is_file():
        return Path(session)
    found = sorted(Path.cwd().glob("*.ipynb"))
    return found[0] if len(found) == 1 else None


def assignment_of(notebook: Path) -> str:
    """The assignment id: the notebook's name ("01_shapes.ipynb"), else its folder's."""
    for name in (notebook.stem, notebook.parent.name):
        if ASSIGNMENT_ID.fullmatch(name):
            return name
    return notebook.stem


def _edition_root(start: Path) -> Path | None:
    """The self-study edition folder holding `start`, if it is one."""
    for folder in (start, *start.parents):
        marker = folder / "edition.json"
        if marker.is_file():
            try:
                edition = json.loads(marker.read_text(encoding="utf-8")).get("edition")
            except (OSError, ValueError, AttributeError):
                return None
            return folder if edition == "self-study" and (folder / "course.yml").is_file() else None
    return None


def _show(item) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            display(item)
            return
    except ImportError:
        pass
    print(item)


def _request(
    config: dict, method: str, path: str, body: bytes | None = None, wait: float = 0
) -> tuple[int, dict]:
    url = config["url"].rstrip("/")
    if not url.endswith("/api/v1"):
        url += "/api/v1"
    query = f"?wait={wait:g}" if wait else ""
    headers = {
        "Authorization": f"{config.get('scheme', 'Bearer')} {config['token']}",
        "Accept": "application/json",
    }
    if body is not None:
        headers.update(
            {
                "Content-Type": "application/x-ipynb+json",
                "X-Request-Id": uuid.uuid4().hex,
                "X-Request-Time": f"{time.time():.3f}",
            }
        )
    request = urllib.request.Request(url + path + query, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=wait + 60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        try:
            return error.code, json.loads(error.read() or b"{}")
        except ValueError:
            return error.code, {"message": f"HTTP {error.code} {error.reason}"}


def _status_line(answer: dict) -> str:
    queue = answer.get("queue") or {}
    receipt = answer.get("receipt") or {}
    where = (
        f"place {queue['position']} of {queue['waiting']} in the queue"
        if answer.get("status") == "queued"
        else "being graded"
    )
    return f"Attempt {receipt.get('attempt', '?')} received {receipt.get('received', '')}: {where}…"


def grade(
    notebook: str | Path | None = None, only: tuple[str, ...] = (), timeout_s: float = DEFAULT_TIMEOUT_S
):
    """Send the saved notebook to the service and wait for its table; returns Feedback, or None with a
    one-line message shown when nothing was graded."""
    global last_feedback
    path = Path(notebook) if notebook else current_notebook()
    try:
        config = service_config(path.parent if path is not None else None)
    except ValueError as error:
        print(f"The grading-service configuration is unusable: {error}.")
        return None
    if config is None:
        return _local_check(path, only)
    if path is None or not path.is_file():
        print("Cannot tell which notebook to submit: pass its path, e.g. submit('01_shapes.ipynb').")
        return None
    data = path.read_bytes()
    saved = time.strftime("%H:%M:%S", time.localtime(path.stat().st_mtime))
    assignment = assignment_of(path)
    try:
        status, answer = _request(
            config,
            "POST",
            f"/assignments/{urllib.parse.quote(assignment)}/attempts",
            data,
            WAIT_PER_REQUEST_S,
        )
        handle = None
        deadline = time.monotonic() + timeout_s
        while status in (200, 202) and answer.get("status") != "graded" and time.monotonic() < deadline:
            line = _status_line(answer)
            if handle is None:
                handle = _progress(line)
            else:
                handle(line)
            status, answer = _request(
                config, "GET", f"/attempts/{answer['attempt']}", wait=WAIT_PER_REQUEST_S
            )
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        print(f"Cannot reach the grading service at {config['url']}: {reason}.")
        return None
    if status not in (200, 202):
        print(f"Not submitted: {answer.get('message', f'the service answered HTTP {status}')}")
        return None
    if answer.get("status") != "graded":
        print(f"{_status_line(answer)} Still waiting after {timeout_s:g} s; your attempt is kept and graded.")
        return None
    note = f"Graded {path.name} as saved at {saved}."
    last_feedback = Feedback(answer, only, note)
    _show(last_feedback)
    return last_feedback


def _progress(line: str):
    """Show `line`; returns a function that replaces it in place."""
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            handle = display({"text/plain": line}, raw=True, display_id=True)
            return lambda text: handle.update({"text/plain": text}, raw=True)
    except ImportError:
        pass
    print(line)
    return print


def _local_check(path: Path | None, only: tuple[str, ...]):
    global last_feedback
    root = _edition_root(path.resolve().parent) if path is not None and path.is_file() else None
    if root is None:
        print(
            f"No grading service is configured (set {ENV_URL} and {ENV_TOKEN}, or write {CONFIG_NAME}; "
            "see the course README), so nothing was submitted."
        )
        return None
    print("No grading service is configured: checking here on the public inputs (self-study edition).")
    command = [sys.executable, "-m", "grader", "check", str(path), "--json", "--course", str(root)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=root)
    if done.returncode == 2 and "sandbox for student code could not start" in done.stderr:
        print("This machine does not allow the grader's isolation; checking your own notebook without it.")
        done = subprocess.run([*command, "--unsafe-no-isolation"], capture_output=True, text=True, cwd=root)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        print(f"The local check failed: {done.stderr.strip().splitlines()[-1:] or ['no output']}")
        return None
    for part in result.get("parts", []):
        part.setdefault("part", part.get("id", ""))
        part.setdefault("task", "")
        part["misconceptions"] = [{"code": code, "meaning": ""} for code in part.get("misconceptions", [])]
    result["public_inputs"] = True
    last_feedback = Feedback({"assignment": result.get("assignment"), "result": result}, only)
    _show(last_feedback)
    return last_feedback


def submit(notebook: str | Path | None = None) -> None:
    """Submit the saved notebook as one attempt and show the table of every part."""
    grade(notebook)


def check(part: str, notebook: str | Path | None = None) -> None:
    """Grade the saved notebook (one attempt) and show the row of one part, e.g. check("linear_forward")."""
    if type(part) is not str or not part:
        print('Name the task\'s part, e.g. check("linear_forward").')
        return
    feedback = grade(notebook, only=(part,))
    if feedback is not None and not feedback.parts:
        known = ", ".join(p["part"] for p in feedback.result.get("parts", []))
        print(f"This assignment has no part {part!r}; its parts are: {known}.")
