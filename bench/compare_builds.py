#!/usr/bin/env python3
"""Two builds of tpcomm side by side: `tpcomm bench` of each, in alternating rounds on the same
ranks, and the median and spread (lowest-highest) of each size's time per build, out of place and
in place. For a change that must not make any size slower (docs/bench.md, "Comparing figures").

Usage: bench/compare_builds.py BEFORE_TPCOMM AFTER_TPCOMM [--rounds 5] [--dtype float32]
                               [-- extra tpcomm bench arguments, default -n 2 -b 4K -e 16M]
"""

import argparse
import statistics
import subprocess
import sys


def bench_times(binary, dtype, extra):
    """{size: (out-of-place us, in-place us)} of one `tpcomm bench` run."""
    cmd = [binary, "bench", "--dtype", dtype, *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
    times = {}
    for line in out.splitlines():
        fields = line.split()
        if line.startswith("#") or len(fields) < 10:
            continue
        times[int(fields[0])] = (float(fields[5]), float(fields[9]))
    if not times:
        sys.exit(f"no result rows from {' '.join(cmd)}:\n{out}")
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dtype", default="float32")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    extra = argv[cut + 1 :] or ["-n", "2", "-b", "4K", "-e", "16M"]
    runs = {"before": [], "after": []}
    for _ in range(args.rounds):
        for name in ("before", "after"):
            runs[name].append(bench_times(getattr(args, name), args.dtype, extra))
    print(f"# {args.dtype}, {args.rounds} alternating rounds of: tpcomm bench {' '.join(extra)}")
    print("# time in us: median (lowest-highest) of the rounds; ratio = after / before median")
    print("| size | before, out of place | after | ratio | before, in place | after | ratio |")
    print("|---|---|---|---|---|---|---|")
    for size in sorted(runs["before"][0]):
        cells = [str(size)]
        for column in (0, 1):
            stats = []
            for name in ("before", "after"):
                values = [run[size][column] for run in runs[name]]
                stats.append((statistics.median(values), min(values), max(values)))
                cells.append(f"{stats[-1][0]:.2f} ({stats[-1][1]:.2f}-{stats[-1][2]:.2f})")
            cells.append(f"{stats[1][0] / stats[0][0]:.2f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
