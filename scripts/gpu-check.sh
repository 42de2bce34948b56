#!/usr/bin/env bash
# The GPU check (docs/gpu-check.md, "The GPU check"): one call on a machine with one GPU (a lent
# H200), at most 5 minutes, prints one table (part, result, seconds) at the end. Its parts, in
# order:
#   the custom kernels: a latency breakdown of the one-shot (tpcomm_gpu_latency) and the review's
#   one-GPU timing experiments E7, E8, E9, E11; correctness of every custom algorithm x op x dtype
#   x size with 2-16 ranks as threads on GPU 0 (tpcomm_gpu_check), stress, a stalled rank, two
#   processes exchanging workspaces, graph registration over VMM (E3, E6), multicast set-up,
#   a communicator as a user creates it, a failure reaching every rank (E4); then, on the build
#   made on the GPU machine: the Python package with CUDA tensors, the Python SIGSEGV triage
#   (E1, E12; docs/gpu-check.md), and what the driver says about torch's expandable segments (E2).
#
#   scripts/gpu-check.sh --prepare     here, on the development machine: builds the programs for
#                                      sm_90 into build-gpu/, gathers them and the shared
#                                      libraries they need into .gpu-prebuilt/, and downloads the
#                                      Debian packages a build on the GPU machine needs into
#                                      .gpu-deps/ (carry both folders to the GPU machine)
#   scripts/gpu-check.sh               on the GPU machine; needs no network. Runs the programs of
#                                      .gpu-prebuilt/ when they start there, else builds first;
#                                      either way it builds from source in the background (sm_90
#                                      only), which the Python parts use.
#   scripts/gpu-check.sh --list        the parts: id, time limit, estimate on an H200, title
#
# TPCOMM_GPU_CHECK_ONLY=ID,ID,...: run only these parts (an ID may be a shell pattern such as
# 'correctness-*' or 'e*'); the build from source only when a part needs it (python*, e2-*).
# TPCOMM_GPU_CHECK_BUDGET (seconds, default 300): the whole run's limit; a part gets its own limit
# or what is left of the budget, whichever is less; parts no time is left for are NOT RUN.
# Exit status: 0 when no part failed (a SKIP is not a failure); 1 otherwise; 2 for a bad
# TPCOMM_GPU_CHECK_ONLY.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

deps=(libgloo0 libgloo-dev libhiredis0.14 libhiredis-dev libibverbs1 libibverbs-dev libnl-3-200
      libnl-route-3-200 libfmt9 libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev
      libgmock-dev libssl3 libssl-dev)
# A build for the GPU machine: sm_90 (H100/H200), no MPI, no Python module (the GPU machine's
# interpreters are not the ones this project builds for), tests on (the check is one).
configure_args=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DTPCOMM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
                -DTPCOMM_BUILD_BENCH=OFF -DTPCOMM_BUILD_EXAMPLES=OFF -DTPCOMM_PYTHON=OFF
                -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)
programs=(tpcomm tpcomm_gpu_check tpcomm_gpu_latency)
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)

if [ "${1:-}" = "--prepare" ]; then
  if ! { cmake -S . -B build-gpu "${generator[@]}" "${configure_args[@]}" > build-gpu.log 2>&1 &&
          cmake --build build-gpu -j "$(nproc)" --target "${programs[@]}" >> build-gpu.log 2>&1; }; then
    tail -30 build-gpu.log
    exit 1
  fi
  rm -rf .gpu-prebuilt && mkdir -p .gpu-prebuilt/lib
  cp build-gpu/bin/tpcomm build-gpu/tests/tpcomm_gpu_check build-gpu/tests/tpcomm_gpu_latency \
     .gpu-prebuilt/
  # Every shared library outside the C runtime: the GPU machine has none of Debian's packages.
  # These copies are for the prebuilt C++ programs only, never on a Python process's path.
  for prog in "${programs[@]}"; do
    ldd ".gpu-prebuilt/$prog" | awk '$3 ~ /^\// {print $3}' |
      grep -Ev '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
      xargs -r cp -L -t .gpu-prebuilt/lib
  done
  mkdir -p .gpu-deps
  (cd .gpu-deps && apt-get download "${deps[@]}" > /dev/null) || exit 1
  echo "gpu-check: .gpu-prebuilt/ ($(du -sh .gpu-prebuilt | cut -f1)) and .gpu-deps/" \
       "($(du -sh .gpu-deps | cut -f1)) ready; carry both"
  exit 0
fi

# The parts: id, limit (s), estimate on one H200 (s), title. The command of each is in run_part.
parts=(
  "probe|30|1|the probe's facts (tpcomm topo)"
  "latency|60|6|latency breakdown of the one-shot: d2d copy, empty kernel, entry, copy, barrier, full; eager and graph"
  "e7-barrier-cost|30|1|E7: local cost of membar.sys and acquire spins, 36 blocks x 10k rounds"
  "e8-unaligned|60|3|E8: one-shot at +2 bytes, reduce-scatter count % 8 != 0, against aligned"
  "e9-registered|60|5|E9: graph calls copying against registered, W = 4, 8, 256-512 KiB"
  "e11-capture-query|30|1|E11: tpcomm's capture query on the default stream during another thread's capture"
  "timing-2|60|1|timing, 2 ranks, 36 blocks"
  "timing-8|60|2|timing, 8 ranks, 8 blocks"
  "correctness-2-36|90|13|correctness, 2 ranks, 36 blocks"
  "correctness-2-48|90|11|correctness, 2 ranks, 48 blocks"
  "correctness-3-36|90|14|correctness, 3 ranks, 36 blocks"
  "correctness-4|90|18|correctness, 4 ranks, 8 blocks"
  "correctness-8|90|11|correctness, 8 ranks, 8 blocks"
  "correctness-16|90|23|correctness, 16 ranks, 8 blocks"
  "stress-2|45|1|stress, 2 ranks: 300 calls back to back"
  "stress-8|45|2|stress, 8 ranks: 300 calls back to back"
  "stall|30|3|stalled rank becomes the watchdog's error"
  "process|60|2|two processes: workspace fds exported and imported"
  "registration|60|5|E3, E6: two processes, 850 captured calls on 253 VMM allocations, a remapped one"
  "multimem|30|1|multimem: entry points and multicast set-up"
  "rmsnorm-2|60|4|all_reduce_rmsnorm: custom one- and two-shot against a float64 reference, fused against all-reduce + norm kernel, 2 ranks"
  "rmsnorm-4|60|5|all_reduce_rmsnorm, 4 ranks, 8 blocks"
  "deterministic-2|60|3|deterministic mode: custom kernels and the rank-order kernel against host rank-order sums over random slices, 2 ranks"
  "deterministic-4|60|4|deterministic mode, 4 ranks, 8 blocks"
  "communicator|60|2|communicator as a user creates it, one rank, NCCL carrying the calls (all_to_all(v), gatherv, rooted ones too)"
  "communicator-deterministic|60|2|the same in deterministic mode: every floating reduction through NCCL's ordered form (all-gather + rank-order kernel)"
  "failure|60|3|E4: a failure reaches every rank's next launch, an abort the peer's kernel, a replay traps"
  "python|60|6|python package, CUDA tensors, one rank, NCCL carrying the calls"
  "python-triage|180|100|E1, E12: the Python SIGSEGV triage, each stage its own process"
  "e2-torch-vmm|60|10|E2: torch tensors on expandable segments as the driver sees them"
)
# The one-GPU experiments this script does not run, and why (listed in every run;
# docs/design-notes.md, "The GPU path review").
not_here=(
  "e5: E5, registration racing a queued replay|runnable on one GPU, not written yet (a spin kernel must hold rank 0's stream while both ranks register); the fix's order is tested on the host by registration_fence_test"
  "e10: E10 (VMM teardown under a peer's read)|runnable on one GPU with two processes, not written yet"
)
ids=()
for p in "${parts[@]}"; do ids+=("${p%%|*}"); done

if [ "${1:-}" = "--list" ]; then
  for p in "${parts[@]}"; do IFS='|' read -r id limit est title <<< "$p"; printf '%-18s %4s s  ~%3s s  %s\n' "$id" "$limit" "$est" "$title"; done
  exit 0
fi

# TPCOMM_GPU_CHECK_ONLY: checked before anything else, so that a typo is said at once.
only=${TPCOMM_GPU_CHECK_ONLY:-}
selected() {  # selected ID: whether the ONLY list names it (or there is none)
  [ -z "$only" ] && return 0
  local pattern
  IFS=',' read -ra patterns <<< "$only"
  for pattern in "${patterns[@]}"; do
    # shellcheck disable=SC2053  # a pattern on purpose
    [[ $1 == ${pattern// /} ]] && return 0
  done
  return 1
}
if [ -n "$only" ]; then
  IFS=',' read -ra wanted <<< "$only"
  for pattern in "${wanted[@]}"; do
    matched=false
    for id in "${ids[@]}"; do
      # shellcheck disable=SC2053
      [[ $id == ${pattern// /} ]] && matched=true
    done
    if ! $matched; then
      echo "gpu-check: TPCOMM_GPU_CHECK_ONLY names '$pattern', which is no part; the parts:" >&2
      printf '  %s\n' "${ids[@]}" >&2
      exit 2
    fi
  done
fi

started=$(date +%s)
budget=${TPCOMM_GPU_CHECK_BUDGET:-300}
elapsed() { echo $(($(date +%s) - started)); }
section() { echo; echo "== $* (at $(elapsed) s)"; }
rows=()
failures=()
add_row() { rows+=("| $1 | $2 | $3 |"); }

section "machine"
# A machine without a GPU (or a driver that hangs) must say so within seconds, not wait.
if ! command -v nvidia-smi > /dev/null; then
  echo "gpu-check: no GPU here: nvidia-smi is not installed; this script needs an NVIDIA GPU" >&2
  exit 1
fi
if ! timeout 20 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv; then
  echo "gpu-check: no GPU visible (nvidia-smi failed or took over 20 s); this script needs one" >&2
  exit 1
fi
export PATH="/usr/local/cuda/bin:$PATH"
nvcc --version | tail -1
nproc

# The library path every process started here would inherit. Python processes get exactly this,
# with NCCL's wheel appended (last: torch loads its own copy first, and dlopen of libnccl.so.2 then
# finds that one); the prebuilt C++ programs get .gpu-prebuilt/lib first, in their own
# environment only. Debian's copies of system libraries (OpenSSL, fmt, gloo, ...) ahead of the
# system's in a Python process was the first suspect for the SIGSEGV
# (docs/gpu-check.md, "The GPU check").
system_ld=${LD_LIBRARY_PATH:-}
unset LD_LIBRARY_PATH
nccl_dir=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2> /dev/null)
nccl_lib=
if [ -n "$nccl_dir" ] && [ -d "$nccl_dir/lib" ]; then
  nccl_lib=$nccl_dir/lib
  echo "gpu-check: NCCL from $nccl_dir"
fi
path_of() { local IFS=:; echo "$*" | sed 's/::*/:/g; s/^://; s/:$//'; }
python_ld=$(path_of "$system_ld" "$nccl_lib")
prebuilt_ld=$(path_of "$PWD/.gpu-prebuilt/lib" "$nccl_lib" "$system_ld")
here_ld=$python_ld  # programs built here find their libraries by RUNPATH

# The build from source, in a subshell of its own: its dependencies from .gpu-deps/ unpacked
# privately and put on the path of the compiler and of CMake only, never of the parts.
build_from_source() (
  local prefix=/tmp/tpcomm-gpu-deps extra=()
  [ -f /usr/local/cuda/include/nccl.h ] || [ -z "$nccl_dir" ] ||
    export CPATH="$nccl_dir/include:${CPATH:-}"
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
    export LD_LIBRARY_PATH="$prefix/usr/lib:$prefix/usr/lib/x86_64-linux-gnu"
    export CPATH="$prefix/usr/include:${CPATH:-}"
    # DT_RPATH, not RUNPATH: the prefix must also serve the libraries' own needs (libgloo's
    # libhiredis), which a RUNPATH of the program or module does not reach.
    extra=(-DCMAKE_PREFIX_PATH="$prefix/usr;$prefix/usr/share/cmake;$prefix/usr/lib/x86_64-linux-gnu/cmake"
           -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags
           -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags
           -DCMAKE_MODULE_LINKER_FLAGS=-Wl,--disable-new-dtags)
  fi
  local t0
  t0=$(date +%s)
  # The Python module too, for the machine's own interpreter (the python parts need it).
  cmake -S . -B build-gpu-here "${generator[@]}" "${configure_args[@]}" "${extra[@]}" \
        -DTPCOMM_PYTHON=AUTO -DTPCOMM_PYTHON_EXECUTABLE="$(command -v python3)" &&
    cmake --build build-gpu-here -j "$(nproc)" --target "${programs[@]}" || return 1
  cmake --build build-gpu-here -j "$(nproc)" --target tpcomm_python_package ||
    echo "gpu-check: the Python module was not built (see 'Python module' above)"
  echo "built in $(($(date +%s) - t0)) s"
)

prebuilt_runs=false
if [ -x .gpu-prebuilt/tpcomm_gpu_check ] && [ -x .gpu-prebuilt/tpcomm_gpu_latency ]; then
  # an unknown mode exits 2 once the program has started and seen a GPU
  LD_LIBRARY_PATH=$prebuilt_ld .gpu-prebuilt/tpcomm_gpu_check usage > /dev/null 2>&1
  [ $? -eq 2 ] && prebuilt_runs=true
fi
needs_build=false
for id in python python-triage; do selected "$id" && needs_build=true; done
build_pid=
build_started=$(date +%s)
# wait_for_build SECONDS: 0 when the build from source has finished and succeeded.
wait_for_build() {
  [ -z "$build_pid" ] && return "${build_status:-1}"
  if timeout "$1" tail --pid="$build_pid" -f /dev/null; then
    wait "$build_pid"
    build_status=$?
  else
    kill "$build_pid" 2> /dev/null
    echo "gpu-check: the build from source did not finish within $1 s" >> build-gpu-here.log
    build_status=1
  fi
  build_pid=
  return "$build_status"
}
if ! $prebuilt_runs; then
  section "build for sm_90 (no usable .gpu-prebuilt/)"
  build_from_source > build-gpu-here.log 2>&1 &
  build_pid=$!
  if ! wait_for_build 240; then
    tail -40 build-gpu-here.log
    echo "gpu-check: the build on this machine failed or took over 240 s (build-gpu-here.log)" >&2
    exit 1
  fi
  add_row "build: from source, sm_90, before the parts" "PASS ($(tail -1 build-gpu-here.log))" \
    "$(($(date +%s) - build_started))"
  check=build-gpu-here/tests/tpcomm_gpu_check latency=build-gpu-here/tests/tpcomm_gpu_latency
  tpcomm=build-gpu-here/bin/tpcomm cxx_ld=$here_ld
else
  echo "gpu-check: running the programs built on the development machine (.gpu-prebuilt/)"
  check=.gpu-prebuilt/tpcomm_gpu_check latency=.gpu-prebuilt/tpcomm_gpu_latency
  tpcomm=.gpu-prebuilt/tpcomm cxx_ld=$prebuilt_ld
  if $needs_build; then  # for the Python parts, at low priority beside the C++ parts
    (renice -n 19 -p "$BASHPID" > /dev/null; build_from_source) > build-gpu-here.log 2>&1 &
    build_pid=$!
  fi
fi

# The command of part ID (in the array `cmd`), or a reason it cannot run (in `cannot`).
command_of() {
  cmd=() cannot=
  local cxx=(env LD_LIBRARY_PATH="$cxx_ld") here=build-gpu-here/bin/tpcomm
  local py=(env LD_LIBRARY_PATH="$python_ld" TPCOMM_DISABLE=local PYTHONPATH=build-gpu-here/python)
  case $1 in
    probe) cmd=("${cxx[@]}" "$tpcomm" topo) ;;
    latency) cmd=("${cxx[@]}" "$latency" breakdown) ;;
    e7-barrier-cost) cmd=("${cxx[@]}" "$latency" barrier-cost) ;;
    e8-unaligned) cmd=("${cxx[@]}" "$latency" unaligned) ;;
    e9-registered) cmd=("${cxx[@]}" "$latency" registered) ;;
    e11-capture-query) cmd=("${cxx[@]}" "$latency" capture-query) ;;
    timing-2) cmd=("${cxx[@]}" "$check" timing 2 36) ;;
    timing-8) cmd=("${cxx[@]}" "$check" timing 8 8) ;;
    correctness-*)
      local w=${1#correctness-}
      cmd=("${cxx[@]}" "$check" correctness "${w%-*}" "$([[ $w == *-* ]] && echo "${w#*-}" || echo 8)") ;;
    stress-*) cmd=("${cxx[@]}" "$check" stress "${1#stress-}" 8) ;;
    rmsnorm-*) cmd=("${cxx[@]}" "$check" rmsnorm "${1#rmsnorm-}" 8) ;;
    deterministic-*) cmd=("${cxx[@]}" "$check" deterministic "${1#deterministic-}" 8) ;;
    stall | multimem | failure) cmd=("${cxx[@]}" "$check" "$1") ;;
    process | registration) cmd=("${cxx[@]}" "$tpcomm" run -n 2 -- "$check" "$1") ;;
    communicator) cmd=("${cxx[@]}" TPCOMM_DISABLE=local "$tpcomm" run -n 1 -- "$check" communicator) ;;
    communicator-deterministic)
      cmd=("${cxx[@]}" TPCOMM_DISABLE=local TPCOMM_DETERMINISTIC=1 "$tpcomm" run -n 1 -- "$check" communicator) ;;
    python | python-triage)
      if ! wait_for_build $((budget - $(elapsed))); then
        cannot="the build from source failed (build-gpu-here.log)"
      elif ! ls build-gpu-here/python/tpcomm/_tpcomm*.so > /dev/null 2>&1 || ! [ -x "$here" ]; then
        cannot="no Python module built here: $(grep -h "Python module" build-gpu-here.log | head -1)"
      elif [ "$1" = python ]; then
        cmd=("${py[@]}" "$here" run -n 1 -- python3 -X faulthandler tests/gpu/python_cuda_check.py)
      else
        cmd=(env LD_LIBRARY_PATH="$python_ld" bash tests/gpu/python_triage.sh)
      fi ;;
    e2-torch-vmm)
      cmd=(env LD_LIBRARY_PATH="$python_ld" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
           python3 -X faulthandler tests/gpu/torch_vmm_probe.py) ;;
  esac
}

# run_part "ID|LIMIT|ESTIMATE|TITLE": one part in its own process within its limit and what is
# left of the budget; a row of the table.
run_part() {
  local id limit est title
  IFS='|' read -r id limit est title <<< "$1"
  selected "$id" || return 0
  local name="$id: $title" left=$((budget - $(elapsed)))
  if [ "$left" -lt 10 ]; then
    add_row "$name" "NOT RUN (budget of $budget s spent)" 0; failures+=("$id"); return
  fi
  [ "$left" -lt "$limit" ] && limit=$left
  section "$name (limit $limit s, ~$est s on an H200)"
  local t0 rc result
  t0=$(date +%s)
  command_of "$id"
  if [ -n "$cannot" ]; then
    echo "FAIL: $cannot"
    add_row "$name" "FAIL ($cannot)" "$(($(date +%s) - t0))"; failures+=("$id"); return
  fi
  timeout --kill-after=10 "$limit" "${cmd[@]}"
  rc=$?
  case $rc in
    0) result=PASS ;;
    77) result="SKIP (the program found nothing to check here; see its output)" ;;
    124 | 137) result="FAIL (did not finish within $limit s)" ;;
    134 | 139) result="FAIL (crashed: signal $((rc - 128)))" ;;
    *) result="FAIL (exit status $rc)" ;;
  esac
  echo "$result: $id"
  add_row "$name" "$result" "$(($(date +%s) - t0))"
  [ "${result%% *}" = FAIL ] && failures+=("$id")
}

# Ranks as threads each have their own stream; their kernels wait for one another, so each needs
# its own hardware queue (8 by default).
export CUDA_DEVICE_MAX_CONNECTIONS=32
# Timing first, while the GPU is otherwise quiet (the background build uses the CPUs only).
for p in "${parts[@]}"; do run_part "$p"; done
if [ -n "$build_pid" ]; then  # no part needed it after all: it is not waited for
  kill "$build_pid" 2> /dev/null
fi
if [ -z "$only" ]; then
  for entry in "${not_here[@]}"; do add_row "${entry%%|*}" "SKIP (${entry#*|})" 0; done
fi

section "summary"
echo "| part | result | seconds |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "took $(elapsed) s"
if [ ${#failures[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failures[@]}"
  echo "rerun only these: TPCOMM_GPU_CHECK_ONLY=$(IFS=,; echo "${failures[*]}") scripts/gpu-check.sh"
  exit 1
fi
echo "no part failed"
