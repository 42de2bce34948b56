#!/usr/bin/env bash
# In-place all-reduce through Intel MPI, timed as tpcomm bench times its engines, beside tpcomm's
# own figures (docs/bench.md). Intel MPI lives in .venv-impi (scripts/setup-impi.sh, run here when
# needed) and reaches nothing else: bench/impi/impi_allreduce.c is built apart from CMake, into
# build/impi/, by the venv's mpicc, and run by the venv's mpirun.
# Usage: scripts/bench-impi.sh [-n RANKS] [-b MIN -e MAX -f FACTOR] [--dtype float32|bfloat16]
#                              [--warmup W] [--iters I] [--json FILE]
# (default: 2 ranks, 4K..16M by 4, both types)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
venv="$root/.venv-impi"
ranks=2
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) ranks="$2"; shift 2 ;;
    -b|-e|-f|--dtype|--warmup|--iters|--json) args+=("$1" "$2"); shift 2 ;;
    *) echo "bench-impi: unknown argument $1" >&2; exit 2 ;;
  esac
done

scripts/setup-impi.sh >/dev/null
# The wheels' scripts keep Intel's placeholder prefix (I_MPI_SUBSTITUTE_INSTALLDIR): without
# I_MPI_ROOT mpicc passes -I/-L paths that do not exist. Intel's mpirun is a shell script that
# runs mpiexec.hydra by name, hence the venv first on PATH (which also keeps Debian's Open MPI
# mpirun, /usr/bin/mpirun, out of the way).
export I_MPI_ROOT="$venv"
export PATH="$venv/bin:$PATH"
src=bench/impi/impi_allreduce.c
bin=build/impi/impi_allreduce
if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ] || [ "$venv/lib/libmpi.so" -nt "$bin" ]; then
  mkdir -p build/impi
  # gcc is the wrapper's default (I_MPI_CC would change it); the rpath it adds finds libmpi.
  "$venv/bin/mpicc" -O2 -Wall -Wextra -o "$bin" "$src"
fi
# One node: shared memory only (no libfabric provider), and hydra starts the ranks itself rather
# than through ssh. Root needs no setting (unlike Open MPI's --allow-run-as-root). Pinning stays
# Intel's default, a core per rank (the header prints each rank's CPUs).
export I_MPI_FABRICS=shm I_MPI_HYDRA_BOOTSTRAP=fork
exec "$venv/bin/mpirun" -n "$ranks" "$bin" "${args[@]}"
