#!/bin/bash
# The cross-node table and plot (docs/bench.md, "Across nodes"): tpcomm bench against Open MPI's
# and Gloo's all-reduce over simulated nodes (tpcomm under mpirun: hier_mpi; and again under
# tpcomm's own launcher: hier with Gloo lanes) with their own links, W = 4 on 2 nodes and W = 6 on
# 3, for each link rate, in one run; every sweep's rows in OUT/*.json, the table in OUT/table.md
# and bus bandwidth against size per engine and link rate in OUT/busbw.png. Needs root (the
# nodes' network namespaces) and a build (make build).
#   scripts/cross_node_sweep.sh OUT [RATE...]      (rates default: 1gbit 10gbit 25gbit)
# Sizes: MIN_BYTES (256) to MAX_BYTES (4M), times FACTOR (4).
set -euo pipefail
out=${1:?usage: scripts/cross_node_sweep.sh OUT [RATE...]}
shift
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(1gbit 10gbit 25gbit)
here=$(cd "$(dirname "$0")/.." && pwd)
tpcomm=${TPCOMM_BIN:-$here/build/bin/tpcomm}
mkdir -p "$out"
lscpu > "$out/lscpu.txt"
for nodes in 2 3; do
  for rate in "${rates[@]}"; do
    name="w$((2 * nodes))_${nodes}nodes_${rate}"
    echo "== $name" >&2
    "$tpcomm" bench -n $((2 * nodes)) --nodes "$nodes" --link-rate "$rate" \
      --compare mpi,gloo -b "${MIN_BYTES:-256}" -e "${MAX_BYTES:-4M}" -f "${FACTOR:-4}" --check \
      --json "$out/$name.json" > "$out/$name.txt"
    # The same sizes with tpcomm's own launcher: no MPI world, so hier's lanes are Gloo's.
    "$tpcomm" bench -n $((2 * nodes)) --nodes "$nodes" --link-rate "$rate" \
      -b "${MIN_BYTES:-256}" -e "${MAX_BYTES:-4M}" -f "${FACTOR:-4}" --check \
      --json "$out/${name}_gloo_lanes.json" > "$out/${name}_gloo_lanes.txt"
  done
done
python3 "$here/scripts/cross_node_table.py" "$out"
