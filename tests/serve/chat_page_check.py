#!/usr/bin/env python3
"""Talks to `lmtrain serve`'s chat page in a real browser.

    chat_page_check.py CHROMIUM URL OUT.png MESSAGE [MESSAGE ...]

Opens URL in headless Chromium (DevTools protocol on a pipe, as tests/report/browser_check.py
does), and for each MESSAGE types it into the page's box, sends it with Enter and waits until
the streamed answer is complete (the answer bubble's data-state turns "done" or "error"). Takes a
screenshot of the conversation into OUT.png. Prints, after "@@JSON@@":
  {"answers": [{"text", "state", "updates"}], "errors": [...], "title": ...}
where updates counts the distinct texts the answer bubble showed while streaming (more than one:
the page drew the answer piece by piece, as the events arrived).
"""
import base64
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "report"))
from browser_check import Browser, page_errors  # noqa: E402


def evaluate(b, s, expression):
    r = b.call("Runtime.evaluate", {"returnByValue": True, "expression": expression}, session=s)
    if "exceptionDetails" in r:
        raise RuntimeError(json.dumps(r["exceptionDetails"])[:500])
    return r["result"].get("value")


def main():
    binary, url, out_png, messages = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    b = Browser(binary)
    answers = []
    try:
        target = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            b.call(domain + ".enable", session=s)
        b.call("Emulation.setDeviceMetricsOverride",
               {"width": 1000, "height": 700, "deviceScaleFactor": 1, "mobile": False}, session=s)
        b.call("Page.navigate", {"url": url}, session=s)
        b.wait_event("Page.loadEventFired")
        title = evaluate(b, s, "document.title")
        # Greedy, so the answers can be compared with `lmtrain chat --temperature 0`.
        evaluate(b, s, "document.getElementById('temperature').value = '0'")
        for i, text in enumerate(messages):
            # Typed as a user would: the text into the box, then Enter.
            b.call("Runtime.evaluate", {"expression": "document.getElementById('input').focus()"},
                   session=s)
            b.call("Input.insertText", {"text": text}, session=s)
            for kind in ("keyDown", "keyUp"):
                b.call("Input.dispatchKeyEvent", {"type": kind, "key": "Enter", "code": "Enter",
                                                  "windowsVirtualKeyCode": 13,
                                                  "text": "\r" if kind == "keyDown" else ""},
                       session=s)
            seen, state, deadline = set(), "", time.time() + 120
            while time.time() < deadline:
                got = evaluate(b, s, f"""(() => {{
                    const a = document.querySelectorAll('#log .msg')[{2 * i + 1}];
                    return a ? JSON.stringify({{text: a.textContent, state: a.dataset.state}}) : null;
                }})()""")
                if got:
                    got = json.loads(got)
                    seen.add(got["text"])
                    state = got["state"]
                    if state in ("done", "error"):
                        answers.append({"text": got["text"], "state": state, "updates": len(seen)})
                        break
                time.sleep(0.005)
            else:
                answers.append({"text": "", "state": "timeout", "updates": len(seen)})
        shot = b.call("Page.captureScreenshot", {"format": "png"}, session=s)
        with open(out_png, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        errors = page_errors(b.events)
    finally:
        b.close()
    print("@@JSON@@" + json.dumps({"answers": answers, "errors": errors, "title": title}))


if __name__ == "__main__":
    main()
