#!/usr/bin/env python3
"""Counts the places in src/ that compare an option's VALUE against a string literal.

Issue 27: option values should be parsed once into enums, not compared as text at every use
(some of those compares ran on every forward or every step). This script measures how many such
compares are left.

What counts: `== "lit"`, `!= "lit"`, `"lit" ==`, `"lit" !=` where lit is
  - one of the allowed values of a string key in the schema (core/config_schema.cpp, the
    `S("key", default, {choices...}, ...)` entries), or
  - one of the keywords of the free-text keys listed in FREE_TEXT_KEYWORDS below,
plus every `get_string("...") ==` / `!=` (a config value compared where it is read).
Some hits are not option values (an HF `model_type` of "gpt2", a preset named "gpt2"): it is a
measure, not a verdict. Each hit is listed with -v.

Usage: tools/option_string_compares.py [-v] [DIR ...]   (default: src)
"""
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "src/core/config_schema.cpp")

# Keywords of string keys whose schema entry has no choice list (any text is allowed, but a few
# words mean something).
FREE_TEXT_KEYWORDS = {
    "train.activation_checkpointing": ["none", "block"],
    "checkpoint.resume": ["auto", "none", "latest", "best"],
    "distill.feature_layers": ["all"],
}


def schema_choices():
    text = open(SCHEMA).read()
    words = set()
    for m in re.finditer(r'\bS\(\s*"[^"]+"\s*,\s*"[^"]*"\s*,\s*\{([^}]*)\}', text, re.S):
        words.update(re.findall(r'"([^"]+)"', m.group(1)))
    for kws in FREE_TEXT_KEYWORDS.values():
        words.update(kws)
    return words


def main(argv):
    verbose = "-v" in argv
    dirs = [a for a in argv if a != "-v"] or [os.path.join(ROOT, "src")]
    words = schema_choices()
    lit = r'"(%s)"' % "|".join(re.escape(w) for w in sorted(words))
    pattern = re.compile(r'(?:[!=]=\s*%s)|(?:%s\s*[!=]=)|(?:get_string\([^)]*\)\s*[!=]=)' % (lit, lit))
    per_file = collections.Counter()
    total = 0
    for d in dirs:
        for dirpath, _, files in os.walk(d):
            for f in sorted(files):
                if not f.endswith((".cpp", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                for n, line in enumerate(open(path, errors="ignore"), 1):
                    if line.lstrip().startswith("//"):
                        continue
                    hits = len(pattern.findall(line))
                    if hits:
                        rel = os.path.relpath(path, ROOT)
                        per_file[rel] += hits
                        total += hits
                        if verbose:
                            print(f"{rel}:{n}: {line.strip()}")
    for path, n in sorted(per_file.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{n:4d}  {path}")
    print(f"{total:4d}  in all ({len(per_file)} files)")


if __name__ == "__main__":
    main(sys.argv[1:])
