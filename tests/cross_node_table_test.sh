#!/bin/bash
# scripts/cross_node_table.py on rows whose answers are known: every engine's time and bus
# bandwidth per row, in order, "link" where the bytes each node sends per second reach 70% of the
# link's rate and "cpu" elsewhere, and the plot drawn.
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# 1 MiB on 2 nodes over 1 Gbit/s (125 MB/s): each node sends 1 MiB per call, so 10000 us is
# 105 MB/s (84%: link) and 20000 us 52 MB/s (42%: cpu). Gloo has no time in the second row.
cat > "$dir/a.json" <<'JSON'
[{"ranks": 4, "nodes": 2, "bytes": 1048576, "link_rate_bits": 1000000000,
  "backend_algorithm": "hier/hierarchical", "time_us": 20000.0, "mpi_time_us": 10000.0,
  "gloo_time_us": 40000.0},
 {"ranks": 4, "nodes": 2, "bytes": 4, "link_rate_bits": 1000000000,
  "backend_algorithm": "hier/hierarchical", "time_us": 250.0, "mpi_time_us": 50.0}]
JSON
out=$(python3 "$(dirname "$0")/../scripts/cross_node_table.py" "$dir")
expect() {
  grep -qF -- "$1" <<<"$out" || { echo "FAIL: missing: $1"; echo "$out"; exit 1; }
}
expect "| 4 | 2 | 1 Gbit/s | 4 | hier/hierarchical | 250.0 | 0.000 | cpu | 50.0 | 0.000 | cpu | - | - | - |"
expect "| 4 | 2 | 1 Gbit/s | 1048576 | hier/hierarchical | 20000.0 | 0.079 | cpu | 10000.0 | 0.157 | link | 40000.0 | 0.039 | cpu |"
[ "$(grep -c '^| 4 ' <<<"$out")" = 2 ] || { echo "FAIL: expected 2 rows"; echo "$out"; exit 1; }
# The 4-byte row comes first: rows are sorted by ranks, link rate and size.
[ "$(grep '^| 4 ' <<<"$out" | head -1 | cut -d'|' -f5)" = " 4 " ] || { echo "FAIL: order"; exit 1; }
[ -s "$dir/busbw.png" ] || { echo "FAIL: no plot"; exit 1; }
echo "cross_node_table: 2 rows, limits and plot as expected"
