#!/usr/bin/env python3
"""Reads an `lmtrain report` page back as XML and checks its charts against the metrics.

    check_report.py REPORT.html [RUN_NAME=RUN_DIR/metrics.jsonl ...]

Parses the page with xml.etree (so it must be well-formed XML: every element closed, every
text escaped) and prints, after "@@JSON@@", one JSON object:
  charts:   {chart id: {title, yscale, legend: [texts], series: [{run, metric, kind, color,
             points, source_points, drawn_min, drawn_max}]}}
  heatmaps: {id: {rows, columns, cells}}
  tables:   {"summary-table": [[cells]], "config-diff-table": [[cells]]} (header row first)
  notes:    the page's notes
  checks:   one per drawn series of a run given on the command line (its EMA aside): the point
            count the downsampling rule (report/downsample.h) gives for the metric's values in
            metrics.jsonl (expected_points) against the points drawn, the metric's min and max
            against the drawn ones read back through the chart's axes (within `tolerance`).
  errors:   anything malformed (a chart without its axes, a series whose point count differs
            from its data-points attribute, ...).
"""
import json
import math
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
XHTML = "{http://www.w3.org/1999/xhtml}"
MAX_BUCKETS = 2000  # report/downsample.h kMaxBuckets


def downsample_count(values, max_buckets=MAX_BUCKETS):
    """report/downsample.h's rule, counted: first, argmin, argmax, last of each bucket."""
    n = len(values)
    if n <= 4 * max_buckets:
        return n
    keep = []
    for b in range(max_buckets):
        begin, end = b * n // max_buckets, (b + 1) * n // max_buckets
        if begin >= end:
            continue
        lo = hi = begin
        for i in range(begin + 1, end):
            if values[i] < values[lo]:
                lo = i
            if values[i] > values[hi]:
                hi = i
        for p in (begin, min(lo, hi), max(lo, hi), end - 1):
            if not keep or keep[-1] < p:
                keep.append(p)
    return len(keep)


def read_metrics(path):
    """metric name -> values in file order (flat numeric keys and nested objects as a/b)."""
    out = {}

    def add(prefix, obj):
        for k, v in obj.items():
            name = prefix + k
            if isinstance(v, bool):
                continue
            if isinstance(v, (int, float)):
                out.setdefault(name, []).append(float(v))
            elif isinstance(v, dict):
                add(name + "/", v)

    with open(path) as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            if i >= len(lines) - 2:  # the cut-off last line the report skips
                continue
            raise
        rec = dict(rec)
        rec.pop("step", None)
        add("", rec)
    return out


def text_of(el):
    return "".join(el.itertext()).strip()


def main():
    page = sys.argv[1]
    metrics = {}
    for arg in sys.argv[2:]:
        name, path = arg.split("=", 1)
        metrics[name] = read_metrics(path)
    result = {"charts": {}, "heatmaps": {}, "tables": {}, "notes": [], "checks": [], "errors": []}
    root = ET.parse(page).getroot()
    for table in root.iter(XHTML + "table"):
        rows = [[text_of(c) for c in tr if c.tag in (XHTML + "td", XHTML + "th")]
                for tr in table.iter(XHTML + "tr")]
        result["tables"][table.get("id", "")] = rows
    for ul in root.iter(XHTML + "ul"):
        if ul.get("class") == "notes":
            result["notes"] += [text_of(li) for li in ul.iter(XHTML + "li")]

    for svg in root.iter(SVG + "svg"):
        cid = svg.get("id", "")
        if "heatmap" in (svg.get("class") or ""):
            cells = sum(1 for r in svg.iter(SVG + "rect") if r.get("fill", "").startswith("#"))
            result["heatmaps"][cid] = {"rows": int(svg.get("data-rows")),
                                       "columns": int(svg.get("data-columns")),
                                       "rects": cells}
            continue
        try:
            left, top, width, height = map(float, svg.get("data-plot").split())
            desc = svg.find(SVG + "desc").text.split()
            x0, x1, y0, y1 = float(desc[1]), float(desc[2]), float(desc[4]), float(desc[5])
        except (AttributeError, ValueError, IndexError, TypeError) as e:
            result["errors"].append(f"chart {cid}: no axes ({e})")
            continue
        log = svg.get("data-yscale") == "log"
        f = (lambda v: math.log10(v)) if log else (lambda v: v)
        g = (lambda a: 10 ** a) if log else (lambda a: a)
        b0, b1 = f(y0), f(y1)

        def value_at(py):
            return g(b0 + (top + height - py) / height * (b1 - b0))

        title = svg.find(SVG + "text")
        legend = [text_of(t) for g_ in svg.iter(SVG + "g") if g_.get("class") == "legend"
                  for t in g_.iter(SVG + "text")]
        chart = {"title": text_of(title) if title is not None else "", "yscale":
                 "log" if log else "linear", "legend": legend, "series": []}
        for pl in svg.iter(SVG + "polyline"):
            pts = [tuple(map(float, p.split(","))) for p in pl.get("points").split()]
            s = {"run": pl.get("data-run"), "metric": pl.get("data-metric"),
                 "kind": pl.get("data-kind"), "color": pl.get("stroke"), "points": len(pts),
                 "source_points": int(pl.get("data-source-points"))}
            if int(pl.get("data-points")) != len(pts):
                result["errors"].append(f"{cid}: {s['run']} {s['metric']}: data-points "
                                        f"{pl.get('data-points')} but {len(pts)} points")
            ys = [p[1] for p in pts]
            s["drawn_min"] = value_at(max(ys)) if ys else None
            s["drawn_max"] = value_at(min(ys)) if ys else None
            chart["series"].append(s)
            values = metrics.get(s["run"], {}).get(s["metric"])
            if values is not None and s["kind"] != "ema":
                # 0.05 px of coordinate rounding, in value units.
                tol = (abs(b1 - b0) / height) * 0.06
                true_min, true_max = min(values), max(values)
                check = {"chart": cid, "run": s["run"], "metric": s["metric"],
                         "expected_points": downsample_count(values), "points": len(pts),
                         "source_points": s["source_points"], "logged_points": len(values),
                         "true_min": true_min, "true_max": true_max,
                         "drawn_min": s["drawn_min"], "drawn_max": s["drawn_max"],
                         "extremes_kept": abs(f(true_min) - f(s["drawn_min"])) <= tol and
                         abs(f(true_max) - f(s["drawn_max"])) <= tol}
                result["checks"].append(check)
        result["charts"][cid] = chart
    print("@@JSON@@" + json.dumps(result))


if __name__ == "__main__":
    main()
