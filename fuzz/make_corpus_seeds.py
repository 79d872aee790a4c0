#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_corpus_documents: byte 0 picks format and compression (see
fuzz_corpus_documents.cpp), the rest is a small text or JSONL file, gzip- or zstd-compressed
(zstd through pyarrow's codec, which writes standard frames)."""
import gzip
import json
import os

import pyarrow as pa

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "corpus_documents")

jsonl = "".join(json.dumps({"text": t, "id": i}) + "\n" for i, t in enumerate(
    ["first document", "caf\u00e9 \U0001F642 and a\nnewline", "", "  ", "last one"])).encode()
jsonl_bad = b'{"text": "ok"}\n{"text": 5}\n{"text" "x"}\n[1]\n{"text": null}\n'
text = "one\n%\ntwo lines\nof text\n%\n%\r\n\u00e9t\u00e9\n".encode()


def zstd(b):
    return pa.compress(b, codec="zstd", asbytes=True)


seeds = {
    "text_plain": (0, text), "text_sep": (8, text), "jsonl_plain": (1, jsonl),
    "jsonl_bad": (1, jsonl_bad), "jsonl_tiny": (1 | 16, jsonl), "text_gz": (2 | 8, gzip.compress(text)),
    "jsonl_gz": (1 | 2, gzip.compress(jsonl)), "jsonl_gz_two_members": (1 | 2, gzip.compress(jsonl) + gzip.compress(jsonl_bad)),
    "text_zst": (4 | 8, zstd(text)), "jsonl_zst": (1 | 4, zstd(jsonl)),
    "jsonl_zst_tiny": (1 | 4 | 16, zstd(jsonl) + zstd(jsonl)),
    "jsonl_zst_cut": (1 | 4, zstd(jsonl)[:-5]), "text_gz_cut": (2, gzip.compress(text)[:-9]),
}
os.makedirs(OUT, exist_ok=True)
for name, (mode, body) in seeds.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([mode]) + body)
print(f"wrote {len(seeds)} seeds into {OUT}")

# fuzz_parquet_column: small parquet files as Hugging Face publishes them (a text column among
# others, several row groups, nulls), in the codecs and string types pyarrow writes.
import io

import pyarrow.parquet as pq

OUT_PQ = os.path.join(HERE, "corpus", "parquet_column")
os.makedirs(OUT_PQ, exist_ok=True)
docs = ["first", None, "caf\u00e9 \U0001F642", "", "a longer document " * 5, "last"]
variants = {
    "zstd_groups": (pa.table({"id": list(range(6)), "text": docs}), dict(row_group_size=2, compression="zstd")),
    "snappy": (pa.table({"text": docs}), dict(compression="snappy")),
    "plain": (pa.table({"text": docs}), dict(compression="none", use_dictionary=False)),
    "large_string": (pa.table({"text": pa.array(docs, type=pa.large_string())}), dict(row_group_size=3)),
    "int_column": (pa.table({"text": list(range(6))}), dict()),
    "no_text": (pa.table({"body": docs}), dict()),
    # conversations: a nested messages column (list<struct>), a null row, a null field
    "messages": (pa.table({"messages": pa.array(
        [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "reasoning_content": "hm"}],
         None, [{"role": "user", "content": "caf\u00e9"}]],
        pa.list_(pa.struct([("role", pa.string()), ("content", pa.string()),
                            ("reasoning_content", pa.string())])))}), dict(row_group_size=2)),
    "messages_ints": (pa.table({"messages": [[1, 2], [3]]}), dict()),
}
for name, (table, kw) in variants.items():
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    with open(os.path.join(OUT_PQ, name), "wb") as f:
        f.write(buf.getvalue())
print(f"wrote {len(variants)} seeds into {OUT_PQ}")
