#!/usr/bin/env bash
# tpcomm as an outside project uses it (docs/packaging.md), each step in a temporary directory:
#   install   cmake --install of this build into a prefix; every installed header compiles alone
#             as C++17 and includes no private dependency;
#   cmake     a C++17 project with find_package(tpcomm) and tpcomm::tpcomm, built and run under
#             the installed `tpcomm run -n 2` (its ranks must not map libmpi), and under mpirun
#             (the MPI bootstrap opens the installed plug-in libtpcomm_mpi.so);
#   pkgconfig the same program compiled with `pkg-config --cflags --libs tpcomm`, run likewise;
#   subdir    a project that vendors tpcomm with add_subdirectory: configured (tpcomm's tests,
#             benchmarks and examples stay off) and the library parts that read the generated
#             version header built.
# Usage: tests/packaging/consumer_test.sh BUILD_DIR [SANITIZE(ON|OFF)]
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
sanitize="${2:-OFF}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
flags=()
if [ "$sanitize" = ON ]; then
  flags=(-fsanitize=address,undefined)
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
fi

echo "== install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/tpcomm/tpcomm.hpp include/tpcomm/version.hpp lib/libtpcomm.so \
         lib/cmake/tpcomm/tpcommConfig.cmake lib/pkgconfig/tpcomm.pc bin/tpcomm; do
  [ -e "$prefix/$f" ] || { echo "FAIL: the install tree has no $f"; exit 1; }
done
if find "$prefix/include" -name '*.hpp' | xargs grep -l '#include <fmt\|#include <gloo\|#include <mpi\|#include <cuda' ; then
  echo "FAIL: an installed header includes a private dependency"; exit 1
fi

# Every installed header on its own, as C++17 with warnings as errors.
for h in "$prefix"/include/tpcomm/*.hpp; do
  echo "#include <tpcomm/$(basename "$h")>" |
    g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" -x c++ - ||
    { echo "FAIL: tpcomm/$(basename "$h") does not compile alone as C++17"; exit 1; }
done
echo "headers: each compiles alone as C++17"

expect_ranks_ok() {  # expect_ranks_ok NAME OUTPUT yes|no: both ranks ok, libmpi mapped or not
  for r in 0 1; do
    grep -q "consumer [0-9.]* rank $r of 2 ok (libmpi mapped: $3)" "$2" ||
      { cat "$2"; echo "FAIL: $1: rank $r (not ok, or libmpi mapped: not $3)"; exit 1; }
  done
}

run_pair() {  # run_pair NAME PROGRAM: both ranks must print their "ok" line, without libmpi
  local out="$work/$1.out"
  if ! timeout 120 "$prefix/bin/tpcomm" run -n 2 -- "$2" >"$out" 2>&1; then
    cat "$out"; echo "FAIL: $1: the consumer failed under tpcomm run -n 2"; exit 1
  fi
  expect_ranks_ok "$1" "$out" no
  echo "$1: both ranks ok, libmpi not mapped"
}

echo "== find_package(tpcomm)"
cmake -S "$source_dir/tests/packaging/consumer" -B "$work/cmake" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" ||
  { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/cmake" >>"$work/cmake.log" || { cat "$work/cmake.log"; exit 1; }
if readelf -d "$work/cmake/consumer" | grep -q 'libmpi'; then
  echo "FAIL: the consumer links libmpi directly: MPI must be private to libtpcomm"; exit 1
fi
run_pair cmake "$work/cmake/consumer"
if [ -e "$prefix/lib/libtpcomm_mpi.so" ] && command -v mpirun >/dev/null; then
  # Under mpirun the MPI bootstrap finds the installed plug-in beside libtpcomm.so. Open MPI
  # leaks at exit by design (and unloads its components first): no leak check there.
  if ! ASAN_OPTIONS=detect_leaks=0 timeout 120 mpirun --allow-run-as-root --oversubscribe -n 2 \
      -x TPCOMM_TIMEOUT_MS=30000 -x ASAN_OPTIONS "$work/cmake/consumer" >"$work/mpirun.out" 2>&1; then
    cat "$work/mpirun.out"; echo "FAIL: mpirun: the consumer failed"; exit 1
  fi
  expect_ranks_ok mpirun "$work/mpirun.out" yes
  echo "mpirun: both ranks ok through the installed MPI plug-in"
else
  echo "mpirun: not run (no libtpcomm_mpi.so installed: a build without Open MPI, or no mpirun)"
fi

echo "== pkg-config tpcomm"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
g++ -std=c++17 -Wall -Werror "${flags[@]}" "$source_dir/tests/packaging/consumer/main.cpp" \
  $(pkg-config --cflags --libs tpcomm) -o "$work/pkgconfig-consumer"
LD_LIBRARY_PATH="$prefix/lib" run_pair pkgconfig "$work/pkgconfig-consumer"

echo "== add_subdirectory(tpcomm)"
cmake -S "$source_dir/tests/packaging/subproject" -B "$work/subdir" -G Ninja \
  -DTPCOMM_SOURCE_DIR="$source_dir" -DTPCOMM_CUDA=OFF >"$work/subdir.log" 2>&1 ||
  { cat "$work/subdir.log"; echo "FAIL: add_subdirectory(tpcomm) does not configure"; exit 1; }
cmake --build "$work/subdir" --target tpcomm_probe >>"$work/subdir.log" 2>&1 ||
  { cat "$work/subdir.log"; echo "FAIL: add_subdirectory(tpcomm) does not build"; exit 1; }
echo "subdir: configured, tpcomm_probe built"
echo "PASS"
