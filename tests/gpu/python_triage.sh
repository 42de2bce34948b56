#!/usr/bin/env bash
# The Python CUDA SIGSEGV triage (docs/gpu-check.md, "The GPU check"; experiments E1 and E12), run
# by scripts/gpu-check.sh as its `python-triage` part after the build on the GPU machine. Each stage
# runs in a process of its own under `python3 -X faulthandler` (a Python backtrace of every thread
# on a crash); a stage that crashes is run again under `gdb -batch` (else catchsegv) for the native
# backtrace. The stages separate the ranked causes (docs/gpu-check.md):
#   1 library shadowing (.gpu-prebuilt/lib's Debian copies ahead of the system's): the torch-only
#     and the handshake stages crash with those copies first on the path and not without them;
#   2 the build on the GPU machine: the C++ communicator program built there crashes too;
#   3 pybind11 / the Python ABI: `import tpcomm` crashes;
#   4 NCCL on the legacy default stream: only the default-stream call crashes;
#   5 two CUDA runtimes: the module exports more than PyInit__tpcomm, or binds cuda* elsewhere.
# Every stage runs twice: with "prebuilt-first" (.gpu-prebuilt/lib, then NCCL's wheel: the path
# of the failed run) and "clean" (the caller's path, NCCL's wheel last: what gpu-check.sh gives
# Python now). Exit 0 when every stage passed on the clean path; 1 otherwise; 77 when there is no
# module built on this machine.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
base_ld=${LD_LIBRARY_PATH:-}
nccl_lib=$(python3 -c 'import nvidia.nccl;print(list(nvidia.nccl.__path__)[0])' 2> /dev/null)/lib
[ -d "$nccl_lib" ] || nccl_lib=
prebuilt_lib=$PWD/.gpu-prebuilt/lib
module=$(find build-gpu-here/python/tpcomm -maxdepth 1 -name "_tpcomm*.so" 2> /dev/null | head -1)
launcher=build-gpu-here/bin/tpcomm
if [ -z "$module" ] || ! [ -x "$launcher" ]; then
  echo "python-triage: no Python module or launcher built on this machine (build-gpu-here/); skipped"
  exit 77
fi
join() { local IFS=:; echo "$*" | sed 's/::*/:/g; s/^://; s/:$//'; }
declare -A paths=([prebuilt-first]=$(join "$prebuilt_lib" "$nccl_lib" "$base_ld")
                  [clean]=$(join "$base_ld" "$nccl_lib"))

echo "== facts (causes 1, 3, 5; E12)"
python3 -c 'import sys,ssl,sysconfig as s;print(sys.version,sys.executable,ssl.OPENSSL_VERSION,s.get_config_var("LIBDIR"),s.get_config_var("LDLIBRARY"))'
python3 -c 'import pybind11;print("pybind11",pybind11.__version__)' 2>&1
grep -h "Python module" build-gpu-here.log 2> /dev/null
readelf -d "$module" | grep -E 'NEEDED|RUNPATH'
echo "symbols the module exports (expected: 1, PyInit__tpcomm): $(nm -D --defined-only "$module" | wc -l)"
libpython=$(python3 -c 'import sysconfig as s,os;print(os.path.join(s.get_config_var("LIBDIR") or "",s.get_config_var("LDLIBRARY") or "x"))')
[ -f "$libpython" ] &&
  echo "OpenSSL functions libpython exports: $(nm -D --defined-only "$libpython" | grep -cE ' T (HMAC|EVP_sha256|RAND_bytes)$')"
for env_name in prebuilt-first clean; do
  echo "libraries of the module on the $env_name path:"
  LD_LIBRARY_PATH=${paths[$env_name]} ldd "$module" | grep -E 'crypto|ssl|fmt|gloo|ibverbs|not found'
done

rows=()
clean_failures=()
# stage NAME ENV COMMAND...: one stage in its own process, within 60 s.
stage() {
  local name=$1 env_name=$2 t0 rc result
  shift 2
  echo "== $name [$env_name]"
  t0=$(date +%s)
  LD_LIBRARY_PATH=${paths[$env_name]} TPCOMM_DISABLE=local PYTHONPATH=build-gpu-here/python \
    timeout --kill-after=5 60 "$@"
  rc=$?
  case $rc in
    0) result=OK ;;
    124 | 137) result="HANG (killed after 60 s)" ;;
    134 | 135 | 136 | 139) result="CRASH (exit status $rc: signal $((rc - 128)))" ;;
    *) result="FAIL (exit status $rc)" ;;
  esac
  echo "$result: $name [$env_name]"
  rows+=("| $name | $env_name | $result | $(($(date +%s) - t0)) |")
  [ "$result" = OK ] && return 0
  [ "$env_name" = clean ] && clean_failures+=("$name")
  if [ "${result%% *}" = CRASH ]; then backtrace "$env_name" "$@"; fi
  return 0
}
# The native backtrace of a crashed stage: gdb -batch on the process under the launcher (the
# launcher's own children: the command after `--`), else catchsegv.
backtrace() {
  local env_name=$1
  shift
  local cmd=("$@") i
  for i in "${!cmd[@]}"; do [ "${cmd[$i]}" = -- ] && break; done
  local before=("${cmd[@]:0:$((i + 1))}") after=("${cmd[@]:$((i + 1))}")
  if command -v gdb > /dev/null; then
    echo "-- native backtrace (gdb)"
    LD_LIBRARY_PATH=${paths[$env_name]} TPCOMM_DISABLE=local PYTHONPATH=build-gpu-here/python \
      timeout 90 "${before[@]}" gdb -q -batch -ex run -ex 'thread apply all bt 15' --args "${after[@]}" 2>&1 |
      grep -vE '^\[(New|Thread .* exited)' | tail -120
  elif command -v catchsegv > /dev/null; then
    echo "-- native backtrace (catchsegv)"
    LD_LIBRARY_PATH=${paths[$env_name]} TPCOMM_DISABLE=local PYTHONPATH=build-gpu-here/python \
      timeout 90 "${before[@]}" catchsegv "${after[@]}" 2>&1 | tail -80
  else
    echo "-- no gdb or catchsegv on this machine: the faulthandler backtrace above is all there is"
  fi
}

py=(python3 -X faulthandler -c)
run=("$launcher" run -n 1 --)
stage "C++ communicator built on this machine (hypothesis 2)" clean \
  "${run[@]}" build-gpu-here/tests/tpcomm_gpu_check communicator
for env_name in prebuilt-first clean; do
  stage "torch alone (1)" "$env_name" \
    "${py[@]}" 'import torch;print(torch.ones(4,device="cuda").sum().item())'
  stage "import tpcomm (3)" "$env_name" "${run[@]}" "${py[@]}" 'import tpcomm;print("import ok")'
  stage "from_env without torch: handshake, NCCL init (1)" "$env_name" "${run[@]}" "${py[@]}" \
    'import tpcomm;c=tpcomm.Communicator.from_env(device="cuda",cuda_device=0);print(c.plan_text());c.close()'
  stage "torch, then from_env (1, 5)" "$env_name" "${run[@]}" "${py[@]}" \
    'import torch,tpcomm;c=tpcomm.Communicator.from_env(device="cuda",cuda_device=0);print("created");c.close()'
  stage "all_reduce on a side stream, then on the default stream (4)" "$env_name" "${run[@]}" \
    "${py[@]}" 'import torch,tpcomm;c=tpcomm.Communicator.from_env(device="cuda",cuda_device=0);s=torch.cuda.Stream();x=torch.ones(1<<20,device="cuda")
with torch.cuda.stream(s): c.all_reduce(x)
s.synchronize();print("side ok");c.all_reduce(x);torch.cuda.synchronize();print("default ok");c.close()'
done

echo "== which copies the module's calls bind to (clean path; hypotheses 1 and 5)"
LD_LIBRARY_PATH=${paths[clean]} PYTHONPATH=build-gpu-here/python LD_DEBUG=bindings timeout 60 \
  python3 -c 'import torch,tpcomm' 2>&1 |
  grep -E "_tpcomm.*(HMAC|EVP_sha256|RAND_bytes|\`cuda)" | sed 's/^ *[0-9]*: *//' | sort | uniq | head -20

echo
echo "| stage | path | result | seconds |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "Decision rules: torch alone crashing on prebuilt-first only: hypothesis 1 (the"
echo "environment); the C++ program built here crashing: 2; a crash at 'import tpcomm': 3; at"
echo "'from_env' / 'created': 1 (the OpenSSL handshake) or NCCL init (see the bindings above);"
echo "only the default-stream call: 4."
if [ ${#clean_failures[@]} -gt 0 ]; then
  printf 'python-triage: FAILED on the clean path: %s\n' "${clean_failures[@]}"
  exit 1
fi
echo "python-triage: every stage passed on the clean path"
