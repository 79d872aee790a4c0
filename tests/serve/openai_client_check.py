#!/usr/bin/env python3
"""Asks `lmtrain serve` questions through the real `openai` Python package.

    openai_client_check.py BASE_URL API_KEY CONCURRENCY QUESTION [QUESTION ...]

For every QUESTION: one plain answer (temperature 0) and one streamed answer, whose pieces are
joined. Then all the questions again from CONCURRENCY threads at once, streamed. Also lists the
models. Prints, after "@@JSON@@":
  {"models": [...], "plain": [...], "streamed": [...], "chunks": [...], "concurrent": [...],
   "usage": {...}, "finish": [...]}
"""
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import openai


def main():
    base, key, concurrency, questions = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    client = openai.OpenAI(base_url=base, api_key=key or "none", max_retries=0, timeout=300)
    models = [m.id for m in client.models.list().data]

    def plain(q):
        r = client.chat.completions.create(model=models[0], temperature=0, max_tokens=24,
                                           messages=[{"role": "user", "content": q}])
        return r

    def streamed(q):
        text, chunks = "", 0
        for c in client.chat.completions.create(model=models[0], temperature=0, max_tokens=24,
                                                stream=True,
                                                messages=[{"role": "user", "content": q}]):
            if c.choices and c.choices[0].delta.content:
                text += c.choices[0].delta.content
                chunks += 1
        return text, chunks

    first = [plain(q) for q in questions]
    streams = [streamed(q) for q in questions]
    with ThreadPoolExecutor(concurrency) as pool:
        concurrent = list(pool.map(lambda q: streamed(q)[0],
                                   [questions[i % len(questions)] for i in range(concurrency)]))
    out = {
        "models": models,
        "plain": [r.choices[0].message.content for r in first],
        "finish": [r.choices[0].finish_reason for r in first],
        "usage": first[0].usage.model_dump(),
        "streamed": [t for t, _ in streams],
        "chunks": [c for _, c in streams],
        "concurrent": concurrent,
    }
    print("@@JSON@@" + json.dumps(out))


if __name__ == "__main__":
    main()
