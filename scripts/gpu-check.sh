#!/usr/bin/env bash
# The GPU check (docs/gpu.md): builds tpcomm for this machine's GPU, then runs
# tests/gpu/gpu_check.cpp: correctness of every custom algorithm x dtype x size with 2, 4 and 8
# ranks as threads on GPU 0 (eager and CUDA graph, in and out of place, bitwise), a stalled rank
# that must become the watchdog's error, two processes exchanging workspaces as POSIX fds, and a
# timing table against a device-to-device copy. Aims to finish within 10 minutes.
#
#   scripts/gpu-check.sh               on the GPU machine; needs no network
#   scripts/gpu-check.sh --fetch-deps  on a Debian 12 machine with network: downloads the
#                                      Debian packages the build needs into .gpu-deps/, for a
#                                      GPU machine that lacks them (copy that folder along)
#
# Exit status: 0 when every part passed; 1 otherwise (each part says PASS or FAIL).
set -uo pipefail
cd "$(dirname "$0")/.."

deps=(libgloo0 libgloo-dev libhiredis0.14 libhiredis-dev libibverbs1 libibverbs-dev libnl-3-200
      libnl-route-3-200 libfmt9 libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev
      libgmock-dev libssl3 libssl-dev)

if [ "${1:-}" = "--fetch-deps" ]; then
  mkdir -p .gpu-deps
  (cd .gpu-deps && apt-get download "${deps[@]}") || exit 1
  echo "gpu-check: $(ls .gpu-deps/*.deb | wc -l) packages in .gpu-deps/ ($(du -sh .gpu-deps | cut -f1))"
  exit 0
fi

started=$(date +%s)
section() { echo; echo "== $* (at $(($(date +%s) - started)) s)"; }
failures=()
part() {  # part NAME SECONDS COMMAND...: runs one part under a time limit
  local name=$1 limit=$2
  shift 2
  section "$name"
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  case $rc in
    0) echo "PASS: $name" ;;
    124 | 137) echo "FAIL: $name (did not finish within $limit s)"; failures+=("$name") ;;
    *) echo "FAIL: $name (exit status $rc)"; failures+=("$name") ;;
  esac
}

section "machine"
if ! nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv; then
  echo "gpu-check: no GPU visible (nvidia-smi failed); this script needs one"
  exit 1
fi
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
export PATH="/usr/local/cuda/bin:$PATH"
nvcc --version | tail -1

# Build dependencies: the machine's own, or the Debian packages of .gpu-deps/ unpacked privately.
cmake_extra=()
if ! [ -f /usr/share/cmake/Gloo/GlooConfig.cmake ] && ls .gpu-deps/*.deb > /dev/null 2>&1; then
  prefix=/tmp/tpcomm-gpu-deps
  rm -rf "$prefix" && mkdir -p "$prefix"
  for f in .gpu-deps/*.deb; do
    if command -v dpkg-deb > /dev/null; then
      dpkg-deb -x "$f" "$prefix"
    else  # a .deb is an ar archive holding data.tar.*; tar finds the compression itself
      rm -rf /tmp/tpcomm-deb && mkdir /tmp/tpcomm-deb && (cd /tmp/tpcomm-deb && ar x "$OLDPWD/$f")
      tar -x -f /tmp/tpcomm-deb/data.tar.* -C "$prefix"
    fi
  done
  # Gloo's CMake file names its library by absolute path: point it into the prefix.
  sed -i "s#\"/usr/lib/#\"$prefix/usr/lib/#g" "$prefix"/usr/share/cmake/Gloo/GlooTargets-*.cmake
  export LD_LIBRARY_PATH="$prefix/usr/lib:$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export CPATH="$prefix/usr/include:${CPATH:-}"
  cmake_extra=(-DCMAKE_PREFIX_PATH="$prefix/usr;$prefix/usr/share/cmake;$prefix/usr/lib/x86_64-linux-gnu/cmake")
  echo "gpu-check: build dependencies from .gpu-deps/ (unpacked into $prefix)"
fi

section "build for sm_$arch"
build=build-gpu
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
if ! cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DTPCOMM_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES="$arch" -DTPCOMM_BUILD_BENCH=OFF "${cmake_extra[@]}" > "$build.log" 2>&1 ||
   ! cmake --build "$build" -j "$(nproc)" --target tpcomm tpcomm_gpu_check >> "$build.log" 2>&1; then
  tail -40 "$build.log"
  echo "gpu-check: the build failed (log: $build.log). Missing Debian packages? Run"
  echo "  scripts/gpu-check.sh --fetch-deps   on a machine with network, and bring .gpu-deps/ along."
  exit 1
fi
echo "built in $(($(date +%s) - started)) s"
check="$build/tests/tpcomm_gpu_check"
tpcomm="$build/bin/tpcomm"

# Ranks as threads each have their own stream; their kernels wait for one another, so each needs
# its own hardware queue (8 by default).
export CUDA_DEVICE_MAX_CONNECTIONS=32
part "probe (tpcomm topo)" 60 "$tpcomm" topo
# The W ranks' kernels share one GPU and must all be resident at once: the production block
# counts (36, 48) fit at W=2 and 3; larger W run with 8 blocks per rank.
part "correctness, 2 ranks, 36 blocks" 120 "$check" correctness 2 36
part "correctness, 2 ranks, 48 blocks" 120 "$check" correctness 2 48
part "correctness, 3 ranks, 36 blocks" 120 "$check" correctness 3 36
for w in 4 8 16; do
  part "correctness, $w ranks as threads on one GPU" 150 "$check" correctness "$w" 8
done
for w in 2 8; do
  part "stress, $w ranks: 300 calls back to back" 90 "$check" stress "$w" 8
done
part "stalled rank becomes the watchdog's error" 60 "$check" stall
part "two processes: workspace fds exported and imported" 90 "$tpcomm" run -n 2 -- "$check" process
for w in 2 8; do
  part "timing, $w ranks" 90 "$check" timing "$w"
done
part "multimem: entry points and device support" 30 "$check" multimem

section "summary"
echo "took $(($(date +%s) - started)) s"
if [ ${#failures[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failures[@]}"
  exit 1
fi
echo "every part passed"
