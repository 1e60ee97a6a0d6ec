"""Open a page in headless Chromium over the DevTools protocol on a pipe; no websocket client needed.

`--remote-debugging-pipe` makes Chromium read commands from fd 3 and write replies and events
to fd 4, each a JSON message ended by a NUL byte. We record console messages, uncaught
exceptions, log entries (failed loads land there), every network request, and take a
full-page screenshot.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@dataclass
class PageRun:
    screenshot_png: bytes = b""
    console: list[str] = field(default_factory=list)      # console.* calls: "level: text"
    exceptions: list[str] = field(default_factory=list)
    log_errors: list[str] = field(default_factory=list)   # Log domain entries at level error
    requests: list[str] = field(default_factory=list)     # every URL the page asked for


class _Pipe:
    def __init__(self, proc: subprocess.Popen, write_fd: int, read_fd: int):
        self.proc, self.write_fd, self.read_fd = proc, write_fd, read_fd
        self.buffer, self.next_id, self.events = b"", 0, []

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout_s: float = 30) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        want = self.next_id
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read(deadline)
            if reply.get("id") == want:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout_s: float = 30) -> dict:
        deadline = time.monotonic() + timeout_s
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._read(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                raise TimeoutError("no reply from chromium")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)


def open_page(url: str, width: int = 1100, height: int = 900) -> PageRun:
    """Load `url`, wait for the load event, and return what the page did plus a full-page screenshot."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def fds() -> None:
        """In the child: our pipe ends become (inheritable) fds 3 and 4, via copies above both."""
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        os.dup2(high_r, 3)
        os.dup2(high_w, 4)

    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
                                 "about:blank"], preexec_fn=fds, close_fds=False,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        pipe = _Pipe(proc, to_child_w, from_child_r)
        try:
            return _run(pipe, url, width, height)
        finally:
            try:
                pipe.send("Browser.close", timeout_s=5)
            except (RuntimeError, TimeoutError, OSError):
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            os.close(to_child_w)
            os.close(from_child_r)


def _run(pipe: _Pipe, url: str, width: int, height: int) -> PageRun:
    target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        pipe.send(f"{domain}.enable", session=session)
    pipe.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                     "mobile": False}, session=session)
    pipe.send("Page.navigate", {"url": url}, session=session)
    pipe.wait_for("Page.loadEventFired")
    metrics = pipe.send("Page.getLayoutMetrics", session=session)
    full_height = int(metrics.get("cssContentSize", metrics.get("contentSize", {})).get("height", height))
    clip = {"x": 0, "y": 0, "width": width, "height": full_height, "scale": 1}
    shot = pipe.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip},
                     session=session)
    run = PageRun(base64.b64decode(shot["data"]))
    for event in pipe.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            run.console.append(f"{params.get('type')}: {text}")
        elif method == "Runtime.exceptionThrown":
            run.exceptions.append(params["exceptionDetails"].get("exception", {}).get("description", "exception"))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            run.log_errors.append(params["entry"]["text"] + " " + params["entry"].get("url", ""))
        elif method == "Network.requestWillBeSent":
            run.requests.append(params["request"]["url"])
    return run
