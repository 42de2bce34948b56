#!/usr/bin/env bash
# The GPU check (docs/gpu.md): runs tests/gpu/gpu_check.cpp on a machine with a GPU: correctness
# of every custom algorithm x op (sum, max, min, avg) x dtype x size with 2, 3, 4, 8 and 16 ranks
# as threads on GPU 0 (eager and CUDA graph, in and out of place, bitwise against a host
# reference), hundreds of back-to-back calls, a stalled rank that must become the watchdog's
# error, two processes exchanging workspaces as POSIX fds, multicast set-up, and a timing table
# against a device-to-device copy. Prints one table (part, result, seconds) at the end.
#
#   scripts/gpu-check.sh --prepare     here, on the development machine: builds the check for
#                                      sm_90 into build-gpu/, gathers the programs and the shared
#                                      libraries they need into .gpu-prebuilt/, and downloads the
#                                      Debian packages a build on the GPU machine needs into
#                                      .gpu-deps/ (carry both folders to the GPU machine)
#   scripts/gpu-check.sh               on the GPU machine; needs no network. Runs the programs of
#                                      .gpu-prebuilt/ when they start there, else builds first;
#                                      either way it also builds from source in the background
#                                      (sm_90 only) and reports whether and how fast that built.
#
# TPCOMM_GPU_CHECK_BUDGET (seconds, default 480): the whole run's limit; a part gets what is left
# of it at most, and parts that no time is left for are reported NOT RUN.
# TPCOMM_GPU_CHECK_ONLY (an extended regular expression): run only the parts whose names match
# it (for a rerun of what failed); no build from source unless it matches "python package" or
# "build".
# Exit status: 0 when every part passed; 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."

deps=(libgloo0 libgloo-dev libhiredis0.14 libhiredis-dev libibverbs1 libibverbs-dev libnl-3-200
      libnl-route-3-200 libfmt9 libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev
      libgmock-dev libssl3 libssl-dev)
# A build for the GPU machine: sm_90 (H100/H200), no MPI, no Python module (the GPU machine's
# interpreters are not the ones this project builds for), tests on (the check is one).
configure_args=(-DCMAKE_BUILD_TYPE=Release -DTPCOMM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
                -DTPCOMM_BUILD_BENCH=OFF -DTPCOMM_BUILD_EXAMPLES=OFF -DTPCOMM_PYTHON=OFF
                -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)

if [ "${1:-}" = "--prepare" ]; then
  cmake -S . -B build-gpu "${generator[@]}" "${configure_args[@]}" > build-gpu.log 2>&1 &&
    cmake --build build-gpu -j "$(nproc)" --target tpcomm tpcomm_gpu_check >> build-gpu.log 2>&1 ||
    { tail -30 build-gpu.log; exit 1; }
  rm -rf .gpu-prebuilt && mkdir -p .gpu-prebuilt/lib
  cp build-gpu/bin/tpcomm build-gpu/tests/tpcomm_gpu_check .gpu-prebuilt/
  # Every shared library outside the C runtime: the GPU machine has none of Debian's packages.
  for prog in .gpu-prebuilt/tpcomm .gpu-prebuilt/tpcomm_gpu_check; do
    ldd "$prog" | awk '$3 ~ /^\// {print $3}' |
      grep -Ev '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
      xargs -r cp -L -t .gpu-prebuilt/lib
  done
  mkdir -p .gpu-deps
  (cd .gpu-deps && apt-get download "${deps[@]}" > /dev/null) || exit 1
  echo "gpu-check: .gpu-prebuilt/ ($(du -sh .gpu-prebuilt | cut -f1)) and .gpu-deps/" \
       "($(du -sh .gpu-deps | cut -f1)) ready; carry both"
  exit 0
fi

started=$(date +%s)
budget=${TPCOMM_GPU_CHECK_BUDGET:-480}
elapsed() { echo $(($(date +%s) - started)); }
section() { echo; echo "== $* (at $(elapsed) s)"; }
rows=()
failures=()
part() {  # part NAME SECONDS COMMAND...: one part, within its limit and what is left of the budget
  local name=$1 limit=$2
  shift 2
  if [ -n "${TPCOMM_GPU_CHECK_ONLY:-}" ] && ! grep -Eq -- "$TPCOMM_GPU_CHECK_ONLY" <<< "$name"; then
    return
  fi
  local left=$((budget - $(elapsed)))
  if [ "$left" -lt 10 ]; then
    rows+=("| $name | NOT RUN (budget of $budget s spent) | 0 |"); failures+=("$name"); return
  fi
  [ "$left" -lt "$limit" ] && limit=$left
  section "$name"
  local t0 rc result
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  case $rc in
    0) result=PASS ;;
    77) result="SKIPPED (see its output)" ;;
    124 | 137) result="FAIL (did not finish within $limit s)" ;;
    *) result="FAIL (exit status $rc)" ;;
  esac
  echo "$result: $name"
  rows+=("| $name | $result | $(($(date +%s) - t0)) |")
  [ "${result%% *}" = FAIL ] && failures+=("$name")
}

section "machine"
if ! nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv; then
  echo "gpu-check: no GPU visible (nvidia-smi failed); this script needs one"
  exit 1
fi
export PATH="/usr/local/cuda/bin:$PATH"
nvcc --version | tail -1
nproc

# NCCL of the Python wheel when the system has none (header for the build, library for dlopen).
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null ||
           python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
if [ -n "$nccl_dir" ] && [ -d "$nccl_dir/lib" ]; then
  export LD_LIBRARY_PATH="$nccl_dir/lib:${LD_LIBRARY_PATH:-}"
  [ -f /usr/local/cuda/include/nccl.h ] || export CPATH="$nccl_dir/include:${CPATH:-}"
  echo "gpu-check: NCCL from $nccl_dir"
fi

# The build from source, in the background: dependencies from .gpu-deps/ unpacked privately.
build_from_source() {
  local prefix=/tmp/tpcomm-gpu-deps extra=()
  if ! [ -f /usr/share/cmake/Gloo/GlooConfig.cmake ] && ls .gpu-deps/*.deb > /dev/null 2>&1; then
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
    extra=(-DCMAKE_PREFIX_PATH="$prefix/usr;$prefix/usr/share/cmake;$prefix/usr/lib/x86_64-linux-gnu/cmake")
  fi
  local t0
  t0=$(date +%s)
  # The Python module too, for the machine's own interpreter (the `python` part needs it).
  cmake -S . -B build-gpu-here "${generator[@]}" "${configure_args[@]}" "${extra[@]}" \
        -DTPCOMM_PYTHON=AUTO -DTPCOMM_PYTHON_EXECUTABLE="$(command -v python3)" &&
    cmake --build build-gpu-here -j "$(nproc)" --target tpcomm tpcomm_gpu_check || return 1
  cmake --build build-gpu-here -j "$(nproc)" --target tpcomm_python_package ||
    echo "gpu-check: the Python module was not built (see 'Python module' above)"
  echo "built in $(($(date +%s) - t0)) s"
}

check=.gpu-prebuilt/tpcomm_gpu_check
tpcomm=.gpu-prebuilt/tpcomm
prebuilt_runs=false
if [ -x "$check" ]; then  # an unknown mode exits 2 once the program has started and seen a GPU
  LD_LIBRARY_PATH="$PWD/.gpu-prebuilt/lib:${LD_LIBRARY_PATH:-}" "$check" usage > /dev/null 2>&1
  [ $? -eq 2 ] && prebuilt_runs=true
fi
build_pid=
only=${TPCOMM_GPU_CHECK_ONLY:-}
if $prebuilt_runs && [ -n "$only" ] && ! grep -Eq -- "$only" <<< "python package, build"; then
  echo "gpu-check: running the programs of .gpu-prebuilt/, only the parts matching '$only'"
elif $prebuilt_runs; then
  echo "gpu-check: running the programs built on the development machine (.gpu-prebuilt/)"
  (renice -n 19 -p "$BASHPID" > /dev/null; build_from_source) > build-gpu-here.log 2>&1 &
  build_pid=$!
else
  section "build for sm_90 (no usable .gpu-prebuilt/)"
  build_from_source > build-gpu-here.log 2>&1 || { tail -40 build-gpu-here.log; exit 1; }
  check=build-gpu-here/tests/tpcomm_gpu_check
  tpcomm=build-gpu-here/bin/tpcomm
fi
export LD_LIBRARY_PATH="$PWD/.gpu-prebuilt/lib:${LD_LIBRARY_PATH:-}"

# Ranks as threads each have their own stream; their kernels wait for one another, so each needs
# its own hardware queue (8 by default).
export CUDA_DEVICE_MAX_CONNECTIONS=32
part "probe (tpcomm topo)" 30 "$tpcomm" topo
# Timing first, while the machine is otherwise quiet. The W ranks' kernels share one GPU and must
# all be resident at once: production block counts (36, 48) fit at W = 2 and 3; larger W run with
# 8 blocks per rank.
part "timing, 2 ranks, 36 blocks" 60 "$check" timing 2 36
part "timing, 8 ranks, 8 blocks" 60 "$check" timing 8 8
part "correctness, 2 ranks, 36 blocks" 90 "$check" correctness 2 36
part "correctness, 2 ranks, 48 blocks" 90 "$check" correctness 2 48
part "correctness, 3 ranks, 36 blocks" 90 "$check" correctness 3 36
for w in 4 8 16; do
  part "correctness, $w ranks, 8 blocks" 90 "$check" correctness "$w" 8
done
for w in 2 8; do
  part "stress, $w ranks: 300 calls back to back" 45 "$check" stress "$w" 8
done
part "stalled rank becomes the watchdog's error" 30 "$check" stall
part "two processes: workspace fds exported and imported" 60 "$tpcomm" run -n 2 -- "$check" process
part "two processes: 850 captured calls on 253 VMM allocations, and a remapped one (N1, N3)" 60 \
  "$tpcomm" run -n 2 -- "$check" registration
part "multimem: entry points and multicast set-up" 30 "$check" multimem
part "communicator as a user creates it, one rank, NCCL carrying the calls" 60 \
  env TPCOMM_DISABLE=local "$tpcomm" run -n 1 -- "$check" communicator
# In a process of its own: its last step leaves that process's CUDA context unusable (a trap).
part "a failure reaches every rank's next launch, an abort the peer's kernel, a replay traps (N2, N7)" 60 \
  "$check" failure

if [ -n "$build_pid" ]; then
  section "the build from source on this machine"
  left=$((budget - $(elapsed)))
  if [ "$left" -gt 5 ] && timeout "$left" tail --pid="$build_pid" -f /dev/null; then
    wait "$build_pid" && result="PASS ($(tail -1 build-gpu-here.log))" || result="FAIL (see build-gpu-here.log)"
  else
    result="NOT FINISHED within the budget"; kill "$build_pid" 2> /dev/null
  fi
  tail -5 build-gpu-here.log
  rows+=("| build from source, sm_90, in the background | $result | - |")
  [ "${result%% *}" = PASS ] || failures+=("build from source")
fi

# The Python package with CUDA tensors: needs the module the build from source made for this
# machine's interpreter.
module=$(ls build-gpu-here/python/tpcomm/_tpcomm*.so 2> /dev/null | head -1)
if [ -n "$module" ] && [ -x build-gpu-here/bin/tpcomm ]; then
  part "python package, CUDA tensors, one rank, NCCL carrying the calls" 60 \
    env TPCOMM_DISABLE=local PYTHONPATH=build-gpu-here/python build-gpu-here/bin/tpcomm run -n 1 -- \
    python3 tests/gpu/python_cuda_check.py
elif [ -z "$only" ] || grep -Eq -- "$only" <<< "python package"; then
  echo "gpu-check: python part NOT RUN: no Python module from the build on this machine"
  grep -h "Python module" build-gpu-here.log 2> /dev/null
  rows+=("| python package, CUDA tensors | NOT RUN (no module built here) | 0 |")
  failures+=("python package")
fi

section "summary"
echo "| part | result | seconds |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "took $(elapsed) s"
if [ ${#failures[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failures[@]}"
  exit 1
fi
echo "every part passed"
