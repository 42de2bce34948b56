#!/usr/bin/env bash
# tpcomm against Intel MPI, the strongest CPU MPI on one node (issue 47; docs/bench.md): the
# in-place all-reduce on ordinary buffers, float32 and bfloat16, tpcomm bench and
# scripts/bench-impi.sh alternating for ROUNDS rounds (the VM's speed drifts between runs, so
# neither engine gets the better minutes), then each size's best per engine and the worst/best
# ratio of each over the rounds (bench/impi/compare.py).
# --load: one busy process per core beside the ranks throughout (an outside load: how much each
# engine slows down when another process takes its core).
# --iters N: N timed calls per size for both engines (default: as many as fit in 25 ms, sized by
# each engine's warm-up; under load a warm-up that lost the core sizes short batches, which then
# fit between preemptions: Intel MPI's 4 KiB read 0.94 us so and 1.75 us with 25000 calls).
# Usage: scripts/compare-impi.sh [-n RANKS] [--rounds R] [-b MIN -e MAX -f FACTOR] [--iters N]
#                                [--load] [--out DIR]
# (default: 2 ranks, 3 rounds, 4K..16M by 4, no load, a new directory under /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=2
rounds=3
sweep=(-b 4K -e 16M -f 4)
iters=()
out=""
load=0
while [ $# -gt 0 ]; do
  case "$1" in
    -n) ranks="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -b) sweep[1]="$2"; shift 2 ;;
    -e) sweep[3]="$2"; shift 2 ;;
    -f) sweep[5]="$2"; shift 2 ;;
    --iters) iters=(--iters "$2"); shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --load) load=1; shift ;;
    *) echo "compare-impi: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out="$(mktemp -d /tmp/tpcomm-impi-XXXXXX)"
mkdir -p "$out"
busy=()
stop_load() { [ ${#busy[@]} -eq 0 ] || kill "${busy[@]}" 2>/dev/null || true; }
trap stop_load EXIT
if [ "$load" = 1 ]; then
  for _ in $(seq 1 "$(nproc)"); do
    sh -c 'while :; do :; done' &
    busy+=("$!")
  done
fi
for round in $(seq 1 "$rounds"); do
  for dtype in float32 bfloat16; do
    build/bin/tpcomm bench -n "$ranks" --dtype "$dtype" "${sweep[@]}" "${iters[@]}" --check \
      --json "$out/tpcomm-$dtype-$round.json" > "$out/tpcomm-$dtype-$round.txt"
    scripts/bench-impi.sh -n "$ranks" --dtype "$dtype" "${sweep[@]}" "${iters[@]}" \
      --json "$out/impi-$dtype-$round.json" > "$out/impi-$dtype-$round.txt"
  done
done
lscpu > "$out/lscpu.txt"
head -n 12 "$out/impi-float32-1.txt" | grep -i "library" || true
/usr/bin/python3 bench/impi/compare.py "$out"
echo "(rounds: $rounds$([ "$load" = 1 ] && echo ", under load: $(nproc) busy processes"); every run's output and JSON in $out)"
