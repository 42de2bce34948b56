"""The table of scripts/compare-impi.sh: tpcomm's in-place all-reduce against Intel MPI's, per size
each engine's best batch over the alternating rounds, the median over the rounds of its best batch
and of its median batch (what a busy machine leaves of the calls), and the worst/best of the
rounds' best batches, from the rounds' JSON files (tpcomm bench --json and
bench/impi/impi_allreduce.c --json; a row's `spread` is its median batch over its best). Standard
library only: it runs under /usr/bin/python3.

Usage: compare.py DIR  (DIR holds tpcomm-<dtype>-<round>.json and impi-<dtype>-<round>.json)
"""

import json
import sys
from collections import defaultdict
from pathlib import Path


def round_times(files, key_size, key_time):
    """{size: [(best batch, median batch) per round]} over the files (one per round)."""
    times = defaultdict(list)
    for f in files:
        rows = json.loads(f.read_text())
        rows = rows["rows"] if isinstance(rows, dict) else rows
        for row in rows:
            if row.get("wrong", 0):
                sys.exit(f"{f}: {row.get('wrong')} wrong elements at {row[key_size]} bytes")
            best = float(row[key_time])
            times[int(row[key_size])].append((best, best * float(row.get("spread", 1.0))))
    return times


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main():
    out = Path(sys.argv[1])
    print(
        "| dtype | size | tpcomm best | Intel MPI best | tpcomm / Intel MPI | tpcomm median "
        "| Intel MPI median | tpcomm median batch | Intel MPI median batch "
        "| tpcomm worst/best | Intel MPI worst/best |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for dtype in ("float32", "bfloat16"):
        ours = round_times(sorted(out.glob(f"tpcomm-{dtype}-*.json")), "bytes", "time_in_place_us")
        theirs = round_times(sorted(out.glob(f"impi-{dtype}-*.json")), "size", "time_us")
        for size in sorted(set(ours) & set(theirs)):
            a = [best for best, _ in ours[size]]
            b = [best for best, _ in theirs[size]]
            a_batch = median([batch for _, batch in ours[size]])
            b_batch = median([batch for _, batch in theirs[size]])
            print(
                f"| {dtype} | {size} | {min(a):.2f} | {min(b):.2f} | {min(a) / min(b):.2f}x "
                f"| {median(a):.2f} | {median(b):.2f} | {a_batch:.2f} | {b_batch:.2f} "
                f"| {max(a) / min(a):.2f} | {max(b) / min(b):.2f} |"
            )


if __name__ == "__main__":
    main()
