#!/usr/bin/env python3
"""Regenerates the config table in README.md from `lmtrain train --help-config`.

Usage: python3 scripts/gen_config_table.py [build/lmtrain]
The table sits between the <!-- config-table:begin --> and <!-- config-table:end --> markers.
"""
import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
binary = sys.argv[1] if len(sys.argv) > 1 else str(root / "build" / "lmtrain")
text = subprocess.run([binary, "train", "--help-config"], check=True, capture_output=True,
                      text=True).stdout
lines = text.splitlines()
rows = ["| key | default | meaning |", "|---|---|---|"]
for i, line in enumerate(lines):
    m = re.match(r"  (\S+) \((.*)\)$", line)
    if not m:
        continue
    path, meta, help_ = m.group(1), m.group(2), lines[i + 1].strip()
    # A default may hold commas ("q,v"): it ends where the range or choices start.
    default = re.search(r"default (.*?)(?:, range \[|, one of |$)", meta).group(1)
    extra = ""
    if r := re.search(r"range \[([^\]]*)\]", meta):
        extra += f" Range [{r.group(1)}]."
    if c := re.search(r"one of (.*)$", meta):
        extra += f" One of: {c.group(1)}."
    rows.append(f"| `{path}` | `{default}` | {help_}.{extra} |")
readme = root / "README.md"
content = readme.read_text()
begin, end = "<!-- config-table:begin -->", "<!-- config-table:end -->"
start, stop = content.index(begin) + len(begin), content.index(end)
readme.write_text(content[:start] + "\n" + "\n".join(rows) + "\n" + content[stop:])
print(f"updated {readme} ({len(rows) - 2} keys)")
