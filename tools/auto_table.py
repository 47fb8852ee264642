#!/usr/bin/env python3
"""The -mla auto table of docs/PERFORMANCE.md from latte-bench JSONL (one or more rounds appended).

    python3 tools/auto_table.py auto.jsonl [more.jsonl ...]

Per test (prompt, depth): the median t/s of every sample over all rounds for -mla 1, 2, 3 and auto,
the paths auto took (mla_paths, per round), and two ratios of auto against the best forced path:
  auto/best   auto's own median against the faster of forced 1 and 2 (includes run-to-run noise)
  chosen/best the forced median of the path auto chose, averaged over the rounds (a round whose
              ubatches took both paths scores the slower), against the best: what the choice
              itself costs, free of auto's own run-to-run noise (auto runs the forced paths' code)
Then auto/m3. Exits 1 when a test lacks one of the modes.
"""
import collections
import statistics
import sys

import bench_jsonl


def main(paths):
    samples = collections.defaultdict(list)   # (prompt, depth, mla) -> t/s samples
    chosen = collections.defaultdict(list)    # (prompt, depth) -> auto's path per round
    for p in paths:
        for r in bench_jsonl.rows(p):
            key = (r["n_prompt"], r["n_gen"], r["n_depth"])
            mla = str(r["mla"])
            samples[key + (mla,)] += r["samples_ts"]
            if mla == "auto":
                chosen[key].append(str(r.get("mla_paths", "?")))
    tests = sorted({k[:3] for k in samples})
    print("| test | -mla 1 | -mla 2 | -mla 3 | auto | auto took | auto/best | chosen/best | auto/m3 |")
    print("| ---- | -----: | -----: | -----: | ---: | --------- | --------: | ----------: | ------: |")
    rc = 0
    for t in tests:
        med = {}
        for m in ("1", "2", "3", "auto"):
            s = samples.get(t + (m,))
            if not s:
                print(f"auto_table: {t} has no -mla {m} rows", file=sys.stderr)
                rc = 1
                break
            med[m] = statistics.median(s)
        else:
            best = max(med["1"], med["2"])
            picks = chosen[t]
            # a round's pick "1,2" (mixed ubatches) is scored by the slower of the two
            ch = [min(med[c] for c in pk.split(",") if c in med) if any(c in med for c in pk.split(",")) else float("nan")
                  for pk in picks]
            chosen_rate = statistics.fmean(ch) if ch else float("nan")
            name = (f"pp{t[0]}" if t[0] else "") + (f"tg{t[1]}" if t[1] else "") + (f" @ d{t[2]}" if t[2] else "")
            print(f"| {name} | {med['1']:.0f} | {med['2']:.0f} | {med['3']:.0f} | {med['auto']:.0f} | {' '.join(picks)} | "
                  f"{med['auto'] / best:.3f} | {chosen_rate / best:.3f} | {med['auto'] / med['3']:.3f} |")
    return rc


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
