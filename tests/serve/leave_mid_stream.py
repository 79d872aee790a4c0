#!/usr/bin/env python3
"""Starts a long streamed answer, reads its first event, hangs up, then asks GET /health until
no request is decoding any more.

    leave_mid_stream.py HOST PORT API_KEY MAX_TOKENS END_ID

END_ID is the token that ends the assistant's turn: the request bans it (logit_bias -100), so the
answer cannot end before the hang-up.

Prints, after "@@JSON@@": {"first_event": the first event's JSON, "health": /health's answer
once nothing runs, "polls": how many /health calls that took}.
"""
import http.client
import json
import sys
import time

HOST, PORT, KEY = sys.argv[1], int(sys.argv[2]), sys.argv[3]
MAX_TOKENS, END_ID = int(sys.argv[4]), int(sys.argv[5])


def health():
    c = http.client.HTTPConnection(HOST, PORT, timeout=30)
    c.request("GET", "/health")
    return json.loads(c.getresponse().read())


conn = http.client.HTTPConnection(HOST, PORT, timeout=60)
body = {"messages": [{"role": "user", "content": "tell me everything"}], "stream": True,
        "max_tokens": MAX_TOKENS, "temperature": 1.0, "seed": 7,
        "logit_bias": {str(END_ID): -100}}
conn.request("POST", "/v1/chat/completions", json.dumps(body),
             {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
response = conn.getresponse()
first = None
while first is None:
    line = response.fp.readline()
    if not line:
        break
    if line.startswith(b"data: "):
        first = json.loads(line[6:])
running_when_closed = health()["running"]
conn.sock.close()  # hang up mid-stream
conn.close()
polls = 0
state = health()
while state["running"] > 0 and polls < 600:  # the row leaves at the next decode step
    time.sleep(0.05)
    polls += 1
    state = health()
print("@@JSON@@" + json.dumps({"first_event": first, "running_when_closed": running_when_closed,
                               "health": state, "polls": polls}))
