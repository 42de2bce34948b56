#!/usr/bin/env bash
# Python call overhead, one run: the 4 KiB all_reduce from C++ (tpcomm bench), then from Python
# and through torch.distributed gloo (bench/python_overhead.py), on the same 2 ranks, under
# Debian's torch 1.13 and the .venv's torch 2.x (with the tpcomm backend there too); then one
# tensor-parallel block step on backend tpcomm and gloo (bench/tp_block_step.py, torch 2.x).
# Usage: bench/python_overhead.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
lscpu | grep -E "^Model name|^Flags" | sed 's/^Flags:.*\(avx512f\).*/Flags: has avx512f/; s/^Flags:.*avx2.*/Flags: avx2, no avx512f/'
echo "== C++: tpcomm bench -n 2 -b 4096 -e 4096 --iters 6000"
"$build/bin/tpcomm" bench -n 2 -b 4096 -e 4096 --iters 6000 --bind-to none | grep -v '^# Avg\|^# Out'
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for python in /usr/bin/python3 .venv/bin/python; do
  echo "== Python: $python"
  PYTHONPATH="$build/python" "$build/bin/tpcomm" run -n 2 -- "$python" bench/python_overhead.py "$(free_port)" | sed -n 's/^\[0\] //p'
done
echo "== TP block step, W = 2: torch.distributed backend tpcomm against gloo (.venv)"
for backend in tpcomm gloo; do
  PYTHONPATH="$build/python" OMP_NUM_THREADS=1 .venv/bin/python -m torch.distributed.run --nproc_per_node 2 \
    --master_port "$(free_port)" bench/tp_block_step.py "$backend" 2>&1 | grep "^TP block step"
done
