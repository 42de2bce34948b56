#!/usr/bin/env bash
# Python call overhead, one run: the 4 KiB all_reduce from C++ (tpcomm bench), then from Python
# and through torch.distributed gloo (bench/python_overhead.py), on the same 2 ranks.
# Usage: bench/python_overhead.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
lscpu | grep -E "^Model name|^Flags" | sed 's/^Flags:.*\(avx512f\).*/Flags: has avx512f/; s/^Flags:.*avx2.*/Flags: avx2, no avx512f/'
echo "== C++: tpcomm bench -n 2 -b 4096 -e 4096 --iters 6000"
"$build/bin/tpcomm" bench -n 2 -b 4096 -e 4096 --iters 6000 --bind-to none | grep -v '^# Avg\|^# Out'
echo "== Python"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PYTHONPATH="$build/python" "$build/bin/tpcomm" run -n 2 -- /usr/bin/python3 bench/python_overhead.py "$port" | sed -n 's/^\[0\] //p'
