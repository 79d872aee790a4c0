#!/usr/bin/env python3
"""Load on `lmtrain serve` from N concurrent OpenAI clients (the `openai` package, streaming).

    serve_load.py BASE_URL REQUESTS_PER_CLIENT MAX_TOKENS CONCURRENCY [CONCURRENCY ...]

For each concurrency C: C threads each send REQUESTS_PER_CLIENT streamed requests one after
another (temperature 0.8 with a seed per request, so the answers differ and run to MAX_TOKENS
unless the model ends them). Prints one line per C:
  clients C: R requests in S s = X req/s; time to first token median M ms, p90 P ms;
  generated T tokens = G tokens/s
(tokens counted from the usage chunk of each answer).
"""
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import openai


def one(client, model, max_tokens, seed):
    start = time.perf_counter()
    first = None
    tokens = 0
    stream = client.chat.completions.create(
        model=model, max_tokens=max_tokens, temperature=0.8, seed=seed, stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "Tell me a fortune about the sea."}])
    for c in stream:
        if first is None and c.choices and c.choices[0].delta.content:
            first = time.perf_counter() - start
        if c.usage:
            tokens = c.usage.completion_tokens
    return (first if first is not None else time.perf_counter() - start), tokens


def main():
    base, per_client, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    client = openai.OpenAI(base_url=base, api_key="none", max_retries=0, timeout=600)
    model = client.models.list().data[0].id
    one(client, model, 4, 0)  # warm-up
    for concurrency in map(int, sys.argv[4:]):
        seeds = list(range(concurrency * per_client))
        start = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(lambda s: one(client, model, max_tokens, s), seeds))
        seconds = time.perf_counter() - start
        ttft = sorted(r[0] * 1000 for r in results)
        tokens = sum(r[1] for r in results)
        print(f"clients {concurrency}: {len(results)} requests in {seconds:.1f} s = "
              f"{len(results) / seconds:.2f} req/s; time to first token median "
              f"{statistics.median(ttft):.0f} ms, p90 {ttft[int(0.9 * (len(ttft) - 1))]:.0f} ms; "
              f"generated {tokens} tokens = {tokens / seconds:.1f} tokens/s", flush=True)


if __name__ == "__main__":
    main()
