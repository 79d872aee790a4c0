#!/usr/bin/env python3
"""Sends `lmtrain serve` bad and hostile requests over raw sockets and checks every answer.

    hostile_requests.py HOST PORT API_KEY MAX_BODY_BYTES TIMEOUT_S

Each case is (name, raw request bytes or an action, the statuses accepted). After every case the
server must still answer GET /health with 200: a bad request never takes it down. Prints, after
"@@JSON@@": {"cases": [{"name", "status", "ok", "alive", "detail"}]}.
"""
import json
import socket
import sys
import time

HOST, PORT, KEY, MAX_BODY, TIMEOUT = (sys.argv[1], int(sys.argv[2]), sys.argv[3],
                                      int(sys.argv[4]), float(sys.argv[5]))


def request(method, path, body=b"", headers=None, key=KEY):
    h = {"Host": f"{HOST}:{PORT}", "Content-Type": "application/json",
         "Content-Length": str(len(body)), "Connection": "close"}
    if key is not None:
        h["Authorization"] = "Bearer " + key
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
    return head.encode() + b"\r\n" + body


def exchange(raw, read_timeout=30, close_after_send=False):
    s = socket.create_connection((HOST, PORT), timeout=read_timeout)
    try:
        try:
            s.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered (413) and closed before reading it all
        if close_after_send:
            return 0, b""
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    try:
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    except (IndexError, ValueError):
        status = 0
    return status, data


def chat(body_obj=None, raw_body=None, **kw):
    body = raw_body if raw_body is not None else json.dumps(body_obj).encode()
    return request("POST", "/v1/chat/completions", body, **kw)


USER = [{"role": "user", "content": "hi"}]


def slow_client():
    """Sends half a request line and stalls: the server must drop it after its timeout."""
    s = socket.create_connection((HOST, PORT), timeout=TIMEOUT + 10)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    start = time.time()
    alive_meanwhile = exchange(request("GET", "/health"))[0] == 200
    try:
        closed = s.recv(65536) is not None  # EOF (b"") or an error answer once it gives up
    except socket.timeout:
        closed = False
    s.close()
    waited = time.time() - start
    return (408 if closed and alive_meanwhile else 0), f"dropped after {waited:.1f} s"


def closed_mid_stream():
    """Starts a long streamed answer, reads its first event and hangs up."""
    s = socket.create_connection((HOST, PORT), timeout=60)
    s.sendall(chat({"messages": USER, "stream": True, "max_tokens": 64}))
    got = b""
    while b"data: " not in got:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    s.close()
    # The cancelled job frees the decoder: a plain request is answered soon after.
    status, _ = exchange(chat({"messages": USER, "max_tokens": 2}))
    return status, "first event seen" if b"data: " in got else "no event"


def truncated_body():
    """Promises 1000 bytes, sends 10 and hangs up."""
    raw = request("POST", "/v1/chat/completions", b"{\"messages\"", {"Content-Length": "1000"})
    exchange(raw, close_after_send=True)
    return 400, "sent and closed"


CASES = [
    ("unknown route", lambda: exchange(request("GET", "/nope")), {404}),
    ("not JSON", lambda: exchange(chat(raw_body=b"not json")), {400}),
    ("JSON array", lambda: exchange(chat(raw_body=b"[]")), {400}),
    ("empty body", lambda: exchange(chat(raw_body=b"")), {400}),
    ("no messages", lambda: exchange(chat({"model": "m"})), {400}),
    ("empty messages", lambda: exchange(chat({"messages": []})), {400}),
    ("tool role", lambda: exchange(chat({"messages": [{"role": "tool", "content": "x"}]})), {400}),
    ("max_tokens over the cap", lambda: exchange(chat({"messages": USER, "max_tokens": 10**9})),
     {400}),
    ("negative temperature", lambda: exchange(chat({"messages": USER, "temperature": -1})), {400}),
    ("n = 3", lambda: exchange(chat({"messages": USER, "n": 3})), {400}),
    ("stop strings", lambda: exchange(chat({"messages": USER, "stop": ["x"]})), {400}),
    ("logit_bias key not an id", lambda: exchange(chat({"messages": USER,
                                                         "logit_bias": {"abc": 1}})), {400}),
    ("logit_bias id past the vocabulary", lambda: exchange(chat(
        {"messages": USER, "logit_bias": {"99999999": -100}})), {400}),
    ("logit_bias over 100", lambda: exchange(chat({"messages": USER,
                                                    "logit_bias": {"5": 101}})), {400}),
    ("a key twice", lambda: exchange(chat(raw_body=b'{"messages": [], "messages": []}')), {400}),
    ("invalid UTF-8", lambda: exchange(chat(
        raw_body=b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}')), {400}),
    ("deeply nested JSON", lambda: exchange(chat(raw_body=b"[" * 100000)), {400, 413}),
    ("prompt longer than the context", lambda: exchange(chat(
        {"messages": [{"role": "user", "content": "word " * 2000}]})), {400}),
    ("body over the limit", lambda: exchange(chat(raw_body=b" " * (MAX_BODY + 1))), {413}),
    ("no API key", lambda: exchange(chat({"messages": USER}, key=None)), {401}),
    ("wrong API key", lambda: exchange(chat({"messages": USER}, key=KEY + "x")), {401}),
    ("models without a key", lambda: exchange(request("GET", "/v1/models", key=None)), {401}),
    ("wrong method", lambda: exchange(request("PUT", "/v1/chat/completions", b"{}")),
     {400, 404, 405}),
    ("garbage request line", lambda: exchange(b"GARBAGE\r\n\r\n"), {0, 400}),
    ("header over 8 KiB", lambda: exchange(request("GET", "/health", headers={"X-Big": "a" * 20000})),
     {0, 400, 431}),
    ("bad chunked body", lambda: exchange(
        request("POST", "/v1/chat/completions", b"zz\r\nabc\r\n0\r\n\r\n",
                {"Transfer-Encoding": "chunked", "Content-Length": "0"})), {0, 400}),
    ("truncated body", truncated_body, {400}),
    ("stalled client", slow_client, {408}),
    ("closed mid-stream", closed_mid_stream, {200}),
]


def main():
    results = []
    for name, action, accepted in CASES:
        try:
            out = action()
            status, detail = out[0], out[1]
            if isinstance(detail, bytes):
                body = detail.split(b"\r\n\r\n", 1)[-1]
                detail = body[:200].decode("utf-8", "replace")
        except Exception as e:  # noqa: BLE001 - a failure of the case, reported
            status, detail = -1, f"{type(e).__name__}: {e}"
        alive = exchange(request("GET", "/health"))[0] == 200
        results.append({"name": name, "status": status, "ok": status in accepted,
                        "alive": alive, "detail": detail})
    print("@@JSON@@" + json.dumps({"cases": results}))


if __name__ == "__main__":
    main()
