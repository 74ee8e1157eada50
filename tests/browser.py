"""A headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-
pipe``: JSON messages ending in NUL on file descriptors 3 and 4), with no client library.

    with Browser() as b:
        b.open("file:///tmp/report.html#tile=0")
        b.wait_for("window.tilemem && window.tilemem.ready")
        b.eval("document.title"), b.screenshot(), b.errors
"""
from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, exe: str | None = None, width: int = 1400, height: int = 1000,
                 timeout: float = 60.0):
        self.exe = exe or find_chromium()
        if self.exe is None:
            raise FileNotFoundError("no chromium on PATH")
        self.width, self.height, self.timeout = width, height, timeout
        self.errors: list[str] = []     # console errors and uncaught exceptions
        self.events: "queue.Queue[dict]" = queue.Queue()
        self._replies: dict[int, dict] = {}
        self._cond = threading.Condition()
        self._next = 0
        self.session = None

    # ---- process and pipe ------------------------------------------------------------------
    def __enter__(self):
        self._profile = tempfile.mkdtemp(prefix="tilemem-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds():      # chromium reads commands on fd 3 and writes replies on fd 4
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [self.exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--remote-debugging-pipe", f"--user-data-dir={self._profile}",
             f"--window-size={self.width},{self.height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=fds)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        for method in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(method)
        self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)
        return self

    def __exit__(self, *exc):
        try:
            self.call("Browser.close", session=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        shutil.rmtree(self._profile, ignore_errors=True)

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._cond.notify_all()
                return
            buf += chunk
            *messages, buf = buf.split(b"\0")
            for raw in messages:
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._replies[msg["id"]] = msg
                        self._cond.notify_all()
                else:
                    self._event(msg)

    def _event(self, msg: dict) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console." + p["type"] + ": " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append("exception: " + str(d.get("exception", {}).get(
                "description", d.get("text"))))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            self.errors.append("log: " + p["entry"].get("text", ""))
        self.events.put(msg)

    def call(self, method: str, session: bool = True, timeout: float | None = None, **params):
        with self._cond:
            self._next += 1
            mid = self._next
        msg = {"id": mid, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while mid not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive():
                    raise TimeoutError(f"{method}: no reply from chromium")
                self._cond.wait(left)
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    # ---- page ------------------------------------------------------------------------------
    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def eval(self, expression: str):
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                        awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails'].get('text')} "
                               f"{res['exceptionDetails'].get('exception', {}).get('description', '')}")
        return res["result"].get("value")

    def wait_for(self, expression: str, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.timeout)
        while not self.eval(f"!!({expression})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout or self.timeout} s for {expression}")
            time.sleep(0.05)

    def screenshot(self, full_page: bool = False) -> bytes:
        params = {"format": "png"}
        if full_page:
            h = self.eval("document.documentElement.scrollHeight")
            params["clip"] = {"x": 0, "y": 0, "width": self.width, "height": h, "scale": 1}
            params["captureBeyondViewport"] = True
        return base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])


def main(argv=None) -> int:
    """``python tests/browser.py PAGE.html[#tile=N] OUT.png [--width W] [--height H]
    [--section ID]``: a screenshot of a page once ``window.tilemem.ready`` (for docs)."""
    import argparse
    from pathlib import Path

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("page")
    ap.add_argument("out")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=1000)
    ap.add_argument("--section", help="scroll this element to the top first")
    a = ap.parse_args(argv)
    path, _, frag = a.page.partition("#")
    url = Path(path).resolve().as_uri() + (f"#{frag}" if frag else "")
    t0 = time.monotonic()
    with Browser(width=a.width, height=a.height) as b:
        b.open(url)
        b.wait_for("window.tilemem && window.tilemem.ready")
        ready = time.monotonic() - t0
        since_open = b.eval("performance.now()") / 1000   # from the start of navigation
        if a.section:
            b.eval(f"document.getElementById({json.dumps(a.section)}).scrollIntoView()")
        b.eval("new Promise(r => setTimeout(r, 500))")
        Path(a.out).write_bytes(b.screenshot())
        if b.errors:
            print("\n".join(b.errors))
            return 1
    print(f"{a.out}: page ready {since_open:.1f} s after it was opened "
          f"({ready:.1f} s after chromium started)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
