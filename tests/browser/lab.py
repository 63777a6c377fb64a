"""A throw-away JupyterLab server and a notebook tab driven through Playwright.

Every wait here is bounded: when time runs out, `LabTimeout` says what was awaited and what the
page showed, so a stuck kernel or a missing widget fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

POLL_S = 0.5

# What the open notebook shows: cells, the active one, kernel activity, cells still queued, a dialog.
PAGE_STATE_JS = """() => {
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-Cell .jp-InputPrompt')]
    .map(prompt => prompt.textContent.trim());
  const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
  const dialog = document.querySelector('.jp-Dialog');
  const kernel = [...document.querySelectorAll('.jp-StatusBar-TextItem')]
    .map(item => item.textContent).find(text => text.includes('|')) || '';
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  return {
    cells: cells.length,
    active: cells.findIndex(cell => cell.classList.contains('jp-mod-active')),
    queued: prompts.filter(text => text.includes('*')).length,
    status: indicator ? indicator.dataset.status : null,
    kernel: kernel.trim(),
    dirty: document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty').length > 0,
    dialog: dialog ? dialog.innerText.slice(0, 500) : null,
    sawRun: window.__layersSawRun === true,
  };
}"""

# Sets sawRun once any cell is queued or the kernel turns busy, however briefly.
WATCH_RUN_JS = """() => {
  if (window.__layersRunWatcher) window.__layersRunWatcher.disconnect();
  window.__layersSawRun = false;
  const started = () => {
    const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
    return (indicator && indicator.dataset.status === 'busy') ||
      [...document.querySelectorAll('.jp-Notebook .jp-Cell .jp-InputPrompt')]
        .some(prompt => prompt.textContent.includes('*'));
  };
  window.__layersRunWatcher = new MutationObserver(() => {
    if (!window.__layersSawRun && started()) window.__layersSawRun = true;
  });
  window.__layersRunWatcher.observe(document.body, {subtree: true, childList: true, characterData: true,
                                                    attributes: true, attributeFilter: ['data-status']});
}"""


class LabTimeout(AssertionError):
    """JupyterLab or the page did not reach the awaited state in time."""


def find_chromium() -> str | None:
    """Path of Debian's Chromium (/usr/bin/chromium or `chromium` on PATH), or None."""
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LabServer:
    """JupyterLab on 127.0.0.1 serving `root`, with its own config, settings and workspaces.

    Inputs:
    - root: the folder served (the course copy the notebooks are opened from)
    - state_dir: an empty folder for the server's config, runtime files, settings and log
    - jupyter: the `jupyter` executable of the environment whose kernel and extensions to use
    """

    def __init__(self, root: Path, state_dir: Path, jupyter: Path):
        self.root, self.state_dir, self.jupyter = Path(root), Path(state_dir), Path(jupyter)
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.state_dir / "jupyterlab.log"
        self.process: subprocess.Popen | None = None
        self._log_file = None

    def start(self, timeout_s: float) -> None:
        """Start the server and wait until its REST API answers; raise LabTimeout otherwise."""
        settings = self.state_dir / "settings"
        notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        notification.parent.mkdir(parents=True, exist_ok=True)
        notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        env = dict(os.environ)
        env.update(
            {
                "JUPYTER_CONFIG_DIR": str(self.state_dir / "config"),
                "JUPYTER_RUNTIME_DIR": str(self.state_dir / "runtime"),
                "JUPYTERLAB_SETTINGS_DIR": str(settings),
                "JUPYTERLAB_WORKSPACES_DIR": str(self.state_dir / "workspaces"),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(self.root), env.get("PYTHONPATH")])),
            }
        )
        command = [
            str(self.jupyter),
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
        ]
        if os.geteuid() == 0:
            command.append("--allow-root")
        self._log_file = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            command,
            cwd=self.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LabTimeout(
                    f"JupyterLab exited with code {self.process.returncode} while starting:\n"
                    f"{self.log_tail()}"
                )
            try:
                self.api("GET", "/api/status", timeout_s=5)
                return
            except (OSError, urllib.error.URLError):
                time.sleep(POLL_S)
        raise LabTimeout(
            f"JupyterLab did not answer on {self.url} within {timeout_s:.0f} s:\n{self.log_tail()}"
        )

    def api(self, method: str, path: str, timeout_s: float = 10) -> object:
        """Call the server's REST API; returns the decoded JSON body (None when empty)."""
        request = urllib.request.Request(
            self.url + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read()
        return json.loads(body) if body else None

    def notebook_url(self, relative_path: str, workspace: str) -> str:
        """URL that opens `relative_path` (under root) in a fresh JupyterLab workspace."""
        return f"{self.url}/lab/workspaces/{workspace}/tree/{relative_path}?token={self.token}"

    def shutdown_kernels(self) -> None:
        """Shut down every running kernel (best effort, bounded)."""
        try:
            for kernel in self.api("GET", "/api/kernels") or []:
                self.api("DELETE", f"/api/kernels/{kernel['id']}", timeout_s=20)
        except (OSError, urllib.error.URLError, ValueError):
            pass

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop the server, its kernels and anything else it started; safe to call twice."""
        if self.process is None:
            return
        descendants = _descendants(self.process.pid)
        if self.process.poll() is None:
            try:
                self.api("POST", "/api/shutdown", timeout_s=10)
            except (OSError, urllib.error.URLError, ValueError):
                pass
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.terminate()
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=10)
        for process in descendants:
            try:
                if process.is_running():
                    process.kill()
            except Exception:
                pass
        self.process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


def _descendants(pid: int) -> list:
    try:
        import psutil

        return psutil.Process(pid).children(recursive=True)
    except Exception:
        return []


class NotebookTab:
    """One notebook open in its own JupyterLab page.

    Inputs:
    - page: a Playwright page
    - path: the notebook's file on disk (what the server saves to)
    - run_timeout_s: bound for one run command (kernel start plus all cells it runs)
    - ui_timeout_s: bound for loading, saving and each element awaited
    - deadline: time.monotonic() after which every wait on this tab gives up at once
    """

    def __init__(self, page, path: Path, run_timeout_s: float, ui_timeout_s: float, deadline: float):
        self.page, self.path = page, Path(path)
        self.run_timeout_s, self.ui_timeout_s, self.deadline = run_timeout_s, ui_timeout_s, deadline
        page.set_default_timeout(ui_timeout_s * 1000)
        self.cells = page.locator(".jp-Notebook .jp-Cell")

    def state(self) -> dict:
        """What the page shows now (see PAGE_STATE_JS)."""
        return self.page.evaluate(PAGE_STATE_JS)

    def wait_for(self, condition, what: str, timeout_s: float, stable_polls: int = 1) -> dict:
        """Poll the page state until `condition(state)` holds `stable_polls` times in a row.

        Raises LabTimeout naming `what` and the last state, or at once when a dialog opens.
        """
        limit = max(0.0, min(timeout_s, self.deadline - time.monotonic()))
        deadline = time.monotonic() + limit
        streak, state = 0, None
        while state is None or time.monotonic() < deadline:
            state = self.state()
            if state["dialog"]:
                raise LabTimeout(f"a JupyterLab dialog opened while waiting for {what}: {state['dialog']!r}")
            streak = streak + 1 if condition(state) else 0
            if streak >= stable_polls:
                return state
            time.sleep(POLL_S)
        budget = "" if limit >= timeout_s else "; the time allowed for this notebook ran out"
        raise LabTimeout(
            f"timed out after {limit:.0f} s waiting for {what} ({self.path.name}{budget}); "
            f"page state: {state}"
        )

    def open(self, url: str) -> None:
        """Load the notebook and wait until all its cells are shown and its kernel is idle."""
        expected_cells = len(json.loads(self.path.read_text())["cells"])
        self.page.goto(url, timeout=self.ui_timeout_s * 1000)
        self.wait_for(
            lambda s: s["cells"] == expected_cells, f"all {expected_cells} cells to render", self.ui_timeout_s
        )
        self.wait_for(
            lambda s: s["kernel"].endswith("Idle") and s["status"] == "idle",
            "the kernel to start",
            self.run_timeout_s,
        )

    def run_all(self) -> dict:
        """Run > Run All Cells; wait until the kernel is done; save; return the saved notebook."""
        return self._run("runmenu:run-all", "Run All Cells")

    def run_from(self, cell_index: int) -> dict:
        """Click cell `cell_index`, then Run > Run Selected Cell and All Below; like run_all.

        JupyterLab disables "All Below" on the last cell, so there it runs the selected cell alone.
        """
        if cell_index == self.cells.count() - 1:
            return self._run("notebook:run-cell", f"Run Selected Cell (the last, {cell_index})", cell_index)
        return self._run(
            "notebook:run-all-below", f"Run Selected Cell and All Below (from cell {cell_index})", cell_index
        )

    def select(self, cell_index: int) -> None:
        """Click the prompt area of cell `cell_index` and wait until it is the active cell."""
        cell = self.cells.nth(cell_index)
        cell.scroll_into_view_if_needed()
        cell.locator(".jp-InputPrompt").first.click()
        self.wait_for(
            lambda s: s["active"] == cell_index,
            f"cell {cell_index} to be selected",
            self.ui_timeout_s,
            stable_polls=2,
        )

    def _run(self, command: str, label: str, from_cell: int | None = None) -> dict:
        for _ in range(3):
            if from_cell is not None:
                self.select(from_cell)
            self.page.evaluate(WATCH_RUN_JS)
            self.open_menu("Run")
            if from_cell is None or self.state()["active"] == from_cell:
                break
            self.page.keyboard.press("Escape")
        else:
            raise LabTimeout(
                f"cell {from_cell} did not stay selected long enough to run it ({self.path.name})"
            )
        self.page.locator(f'.lm-Menu-item[data-command="{command}"]').click()
        self.wait_for(
            lambda s: s["sawRun"] and s["queued"] == 0 and s["status"] == "idle",
            f"'{label}' to finish",
            self.run_timeout_s,
            stable_polls=3,
        )
        return self.save()

    def open_menu(self, menu: str) -> None:
        """Click `menu` in the menu bar and wait for it to open."""
        self.page.locator(".lm-MenuBar").get_by_role("menuitem", name=menu, exact=True).click()
        self.page.locator(".lm-Menu").first.wait_for(state="visible")

    def save(self) -> dict:
        """Save with the toolbar button; wait for the file on disk; return it as a dict."""
        before = self.path.stat().st_mtime_ns
        self.page.locator('.jp-NotebookPanel-toolbar [data-command="docmanager:save"]').click()
        self.wait_for(
            lambda s: not s["dirty"] and self.path.stat().st_mtime_ns != before,
            "the notebook to be saved",
            self.ui_timeout_s,
        )
        deadline = time.monotonic() + self.ui_timeout_s
        while True:
            try:
                return json.loads(self.path.read_text())
            except ValueError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(POLL_S)

    def output_of(self, cell_index: int):
        """Locator of the rendered outputs of cell `cell_index`."""
        return self.cells.nth(cell_index).locator(".jp-OutputArea-output")
