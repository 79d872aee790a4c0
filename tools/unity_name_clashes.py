#!/usr/bin/env python3
"""Names defined in anonymous namespaces of two .cpp files in the same enclosing namespace.

The unity build (CMakeLists.txt, LMTRAIN_UNITY_BUILD) compiles sources in batches that share one
translation unit, so two such helpers with one signature collide once their files land in the
same batch, which adding any file can cause. This lists every candidate up front (a regex scan;
overloads with different parameters are harmless but listed too).

Usage: tools/unity_name_clashes.py [DIR ...]   (default: src tests)
"""
import re,sys,collections,glob,os
def names(path):
    out=set(); inside=False; ns=''
    for line in open(path,errors='ignore'):
        m0=re.match(r'^namespace ([\w:]+) \{', line)
        if m0: ns=m0.group(1)
        if re.match(r'^namespace \{', line): inside=True; continue
        if inside and re.match(r'^\}\s*// namespace', line): inside=False; continue
        if not inside or line.startswith((' ','\t','}','#','//')): continue
        m=re.match(r'^(?:template\s*<[^>]*>\s*)?(?:class|struct|enum(?: class)?)\s+(\w+)', line)
        if m: out.add(ns+'::'+m.group(1)); continue
        if re.match(r'^(using\s+\w+\s*=|namespace\s+\w+\s*=)', line): continue  # same alias twice is fine
        m=re.match(r'^(?:static\s+|inline\s+|constexpr\s+|const\s+)*[\w:<>,\*&\s]+?[\s\*&](\w+)\s*(\(|=|\[|\{)', line)
        if m and m.group(1) not in ('if','for','while','return','operator'): out.add(ns+'::'+m.group(1))
    return out
found = False
for root in sys.argv[1:] or ['src', 'tests']:
    files=[f for f in glob.glob(root+'/**/*.cpp',recursive=True)]
    where=collections.defaultdict(list)
    for f in files:
        for n in names(f): where[n].append(os.path.relpath(f))
    for n,fs in sorted(where.items()):
        if len(fs)>1:
            found = True
            print(f"unity build: {n} is defined in an anonymous namespace of {' and '.join(fs)}: "
                  "rename one or share it in a header")
sys.exit(1 if found else 0)
