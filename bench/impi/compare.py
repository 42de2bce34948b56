"""The table of scripts/compare-impi.sh: tpcomm's in-place all-reduce against Intel MPI's, each
size's best and median over the alternating rounds, from the rounds' JSON files (tpcomm bench --json and
bench/impi/impi_allreduce.c --json). Standard library only: it runs under /usr/bin/python3.

Usage: compare.py DIR  (DIR holds tpcomm-<dtype>-<round>.json and impi-<dtype>-<round>.json)
"""

import json
import sys
from collections import defaultdict
from pathlib import Path


def best_times(files, key_size, key_time):
    """{size: [time per round]} over the files (one per round)."""
    times = defaultdict(list)
    for f in files:
        rows = json.loads(f.read_text())
        rows = rows["rows"] if isinstance(rows, dict) else rows
        for row in rows:
            if row.get("wrong", 0):
                sys.exit(f"{f}: {row.get('wrong')} wrong elements at {row[key_size]} bytes")
            times[int(row[key_size])].append(float(row[key_time]))
    return times


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main():
    out = Path(sys.argv[1])
    print(
        "| dtype | size | tpcomm best | Intel MPI best | tpcomm / Intel MPI | tpcomm median "
        "| Intel MPI median | tpcomm worst/best | Intel MPI worst/best |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for dtype in ("float32", "bfloat16"):
        ours = best_times(sorted(out.glob(f"tpcomm-{dtype}-*.json")), "bytes", "time_in_place_us")
        theirs = best_times(sorted(out.glob(f"impi-{dtype}-*.json")), "size", "time_us")
        for size in sorted(set(ours) & set(theirs)):
            a, b = ours[size], theirs[size]
            print(
                f"| {dtype} | {size} | {min(a):.2f} | {min(b):.2f} | {min(a) / min(b):.2f}x "
                f"| {median(a):.2f} | {median(b):.2f} "
                f"| {max(a) / min(a):.2f} | {max(b) / min(b):.2f} |"
            )


if __name__ == "__main__":
    main()
