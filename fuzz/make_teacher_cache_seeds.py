#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_teacher_cache: small valid offline teacher caches, byte for
byte in the layout distill/teacher_cache_format.cpp writes (magic, header length, JSON header,
zero padding to 64, int32 ids [W][T][k], float32 [W][T][k + 1])."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def cache(windows, seq_len, top_k, vocab):
    header = json.dumps({"windows": windows, "seq_len": seq_len, "top_k": top_k,
                         "vocab_size": vocab, "temperature": 4.0, "train_tokens": windows * seq_len + 1,
                         "tokenizer_hash": "0" * 64, "teacher": "/runs/teacher/checkpoints/step_00000010",
                         "teacher_sha256": "f" * 64}, separators=(",", ":")).encode()
    prefix = b"LMTKDC01" + struct.pack("<Q", len(header)) + header
    prefix += b"\0" * (-len(prefix) % 64)
    rows = windows * seq_len
    ids = struct.pack(f"<{rows * top_k}i", *[(r + i) % vocab for r in range(rows) for i in range(top_k)])
    logits = struct.pack(f"<{rows * (top_k + 1)}f", *[float(i) for i in range(rows * (top_k + 1))])
    return prefix + ids + logits


out = os.path.join(HERE, "corpus", "teacher_cache")
os.makedirs(out, exist_ok=True)
for name, args in {"one_window.bin": (1, 2, 1, 4), "two_windows.bin": (2, 3, 2, 5)}.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(cache(*args))
