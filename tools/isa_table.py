#!/usr/bin/env python3
"""Two levels' latte-bench JSONL side by side (docs/PERFORMANCE.md, issue 7's device table).

    python3 tools/isa_table.py A.jsonl B.jsonl

For each cache type, a markdown table: one row per thread count, one column per test (pp/tg at
each depth), cells "A's t/s (A / B)". A test seen more than once in a file (runs appended) is
its median. Tests only one file has are shown without a ratio.
"""
import os
import statistics
import sys

import bench_jsonl


def load(path):
    runs = {}
    for r in bench_jsonl.rows(path):
        kind = "pp" if r["n_prompt"] else "tg"
        n = r["n_prompt"] or r["n_gen"]
        key = (r["type_k"], r["n_threads"], kind, n, r["n_depth"])
        runs.setdefault(key, []).append(r["avg_ts"])
    return {k: statistics.median(v) for k, v in runs.items()}, os.path.basename(path)


def depth_name(d):
    return f"{d // 1024}K" if d and d % 1024 == 0 else str(d)


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: isa_table.py A.jsonl B.jsonl")
    a, an = load(argv[1])
    b, bn = load(argv[2])
    print(f"cells: {an} t/s ({an} / {bn})")
    for cache in sorted({k[0] for k in a}):
        cols = sorted({(k[2], k[3], k[4]) for k in a if k[0] == cache}, key=lambda c: (c[0] != "pp", c[1], c[2]))
        threads = sorted({k[1] for k in a if k[0] == cache})
        print(f"\n{cache} cache\n")
        print("| threads | " + " | ".join(f"{c[0]}{c[1]} @ {depth_name(c[2])}" for c in cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for t in threads:
            cells = []
            for c in cols:
                key = (cache, t) + c
                if key not in a:
                    cells.append("—")
                    continue
                v = a[key]
                s = f"{v:.0f}" if c[0] == "pp" else f"{v:.1f}"
                if key in b and b[key] > 0:
                    s += f" ({v / b[key]:.2f})"
                cells.append(s)
            print(f"| {t} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv)
