#!/usr/bin/env python3
"""The table and plot of scripts/cross_node_sweep.sh from its --json rows.

For every sweep (ranks, nodes, link rate) and size: each engine's time (us, best batch) and bus
bandwidth, and whether the link was the limit. A link limits a cell when the bytes each node
sends per second reach 70% of its rate: a ring all-reduce sends 2 (N - 1) / N of the buffer out
of each node (N nodes), however the ranks inside it share the work.
"""
import glob
import json
import os
import subprocess
import sys

ENGINES = (("tpcomm", "time_us"), ("mpi", "mpi_time_us"), ("gloo", "gloo_time_us"))


def limit(row, us):
    nodes = row["nodes"]
    sent = 2 * (nodes - 1) / nodes * row["bytes"]  # bytes out of each node per call
    rate = row.get("link_rate_bits", 0) / 8  # bytes per second
    return "link" if rate and sent / (us * 1e-6) >= 0.7 * rate else "cpu"


def main(out):
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        with open(path) as f:
            rows.extend(json.load(f))
    rows.sort(key=lambda r: (r["ranks"], r.get("link_rate_bits", 0), r["bytes"]))
    lines = ["| ranks | nodes | link | size (B) | path | tpcomm us | busbw | limit "
             "| mpi us | busbw | limit | gloo us | busbw | limit |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    series = {}
    for r in rows:
        rate = "%g Gbit/s" % (r.get("link_rate_bits", 0) / 1e9)
        cells = []
        for engine, key in ENGINES:
            us = r.get(key)
            if us is None:
                cells.append("- | - | -")
                continue
            busbw = r["bytes"] / us / 1e3 * 2 * (r["ranks"] - 1) / r["ranks"]
            cells.append("%.1f | %.3f | %s" % (us, busbw, limit(r, us)))
            # tpcomm's series per path: hier_mpi and hier (Gloo lanes) apart.
            name = r["backend_algorithm"].split("/")[0] if engine == "tpcomm" else engine
            label = "%s W=%d %s" % (name, r["ranks"], rate)
            series.setdefault(label, []).append((r["bytes"], busbw))
        lines.append("| %d | %d | %s | %d | %s | %s |" % (
            r["ranks"], r["nodes"], rate, r["bytes"], r["backend_algorithm"], " | ".join(cells)))
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    data = os.path.join(out, "busbw.dat")
    with open(data, "w") as f:
        for label, points in series.items():
            f.write('"%s"\n' % label)
            for size, busbw in sorted(points):
                f.write("%d %.6f\n" % (size, busbw))
            f.write("\n\n")
    plot = ["set terminal pngcairo size 1200,800", "set output '%s'" % os.path.join(out, "busbw.png"),
            "set logscale x 2", "set logscale y", "set key outside right",
            "set xlabel 'size (bytes)'", "set ylabel 'bus bandwidth (GB/s)'",
            "set title 'all-reduce across simulated nodes: busbw per engine and link rate'",
            "plot for [i=0:%d] '%s' index i using 1:2 with linespoints title columnheader(1)"
            % (len(series) - 1, data)]
    subprocess.run(["gnuplot"], input="\n".join(plot), text=True, check=True)
    print("plot written to %s" % os.path.join(out, "busbw.png"))


if __name__ == "__main__":
    main(sys.argv[1])
