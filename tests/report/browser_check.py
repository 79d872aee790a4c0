#!/usr/bin/env python3
"""Renders an `lmtrain report` page in a real browser and says what it drew.

    browser_check.py CHROMIUM REPORT.html OUT.png

Starts headless Chromium (Debian's chromium-headless-shell or chromium) with the DevTools
protocol on a pipe (--remote-debugging-pipe: no port, no extra Python package), opens the page
from disk, takes a full-page screenshot into OUT.png and asks the page where each chart
(svg.chart) lies. For every chart it counts the coloured pixels inside its box in the
screenshot (a pixel whose channels differ by more than 40: the series and heat map colours; the
white background, the grey grid and black text do not count). Console messages of level error,
uncaught exceptions and failed loads are collected. Prints, after "@@JSON@@" on one line:
  {"charts": [{"id", "x", "y", "width", "height", "coloured_pixels"}], "errors": [...],
   "page_height": H, "screenshot": OUT.png}
Needs Pillow (a dependency of tensorboard in scripts/requirements.txt) to read the PNG.
"""
import base64
import json
import os
import subprocess
import sys
import time

from PIL import Image


class Browser:
    """One Chromium process spoken to over the DevTools pipe (fd 3 in, fd 4 out)."""

    def __init__(self, binary):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        def child_fds():
            # Copies first: a pipe end may itself be fd 3 or 4, and dup2 onto itself would
            # keep its close-on-exec flag.
            r, w = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--disable-extensions", "--remote-debugging-pipe",
             "--window-size=1200,900", "about:blank"],
            preexec_fn=child_fds, close_fds=False, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self.next_id = 0
        self.buffer = b""
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.time() > deadline:
                raise TimeoutError("no answer from the browser")
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None, timeout=60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, timeout=60):
        deadline = time.time() + timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method:
                return m
            self.events.append(m)

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001 - closing is best effort; kill below
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def page_errors(events):
    """Uncaught exceptions, console errors and failed loads among the DevTools events."""
    errors = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            errors.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:300])
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append("console: " + json.dumps(p.get("args", []))[:300])
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            errors.append("log: " + p["entry"].get("text", "")[:300])
    return errors


def main():
    binary, page, out_png = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    b = Browser(binary)
    try:
        target = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            b.call(domain + ".enable", session=s)
        b.call("Emulation.setDeviceMetricsOverride",
               {"width": 1200, "height": 900, "deviceScaleFactor": 1, "mobile": False},
               session=s)
        b.call("Page.navigate", {"url": "file://" + page}, session=s)
        b.wait_event("Page.loadEventFired")
        layout = b.call("Runtime.evaluate", {"returnByValue": True, "expression": """
            JSON.stringify({height: document.documentElement.scrollHeight,
              charts: Array.from(document.querySelectorAll('svg.chart')).map(e => {
                const r = e.getBoundingClientRect();
                return {id: e.id, x: r.x + window.scrollX, y: r.y + window.scrollY,
                        width: r.width, height: r.height};
              })})"""}, session=s)["result"]["value"]
        layout = json.loads(layout)
        height = int(layout["height"])
        shot = b.call("Page.captureScreenshot",
                      {"format": "png", "captureBeyondViewport": True,
                       "clip": {"x": 0, "y": 0, "width": 1200, "height": height, "scale": 1}},
                      session=s)
        with open(out_png, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        errors = page_errors(b.events)
    finally:
        b.close()

    img = Image.open(out_png).convert("RGB")
    px = img.load()
    charts = []
    for c in layout["charts"]:
        x0, y0 = max(0, int(c["x"]) + 2), max(0, int(c["y"]) + 2)
        x1 = min(img.width, int(c["x"] + c["width"]) - 2)
        y1 = min(img.height, int(c["y"] + c["height"]) - 2)
        coloured = 0
        for y in range(y0, y1):
            for x in range(x0, x1):
                r, g, bl = px[x, y]
                if max(r, g, bl) - min(r, g, bl) > 40:
                    coloured += 1
        charts.append(dict(c, coloured_pixels=coloured))
    print("@@JSON@@" + json.dumps({"charts": charts, "errors": errors, "page_height": height,
                      "screenshot": out_png}))


if __name__ == "__main__":
    main()
