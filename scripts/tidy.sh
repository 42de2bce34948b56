#!/usr/bin/env bash
# clang-tidy (.clang-tidy: bug-prone patterns and readability, as errors) over the C++ sources of
# src/, tools/ and python/src/ (CUDA sources are nvcc's: not linted), with build/'s compile
# commands, one process per core.
#
#   scripts/tidy.sh --all        every source (`make tidy`; about 10 s a file on one core here)
#   scripts/tidy.sh --changed    the sources changed since the last release tag (v*), else since
#                                the commit in .tidy-base (the last tree linted whole or in
#                                part by hand): what .ci/run lints
#   scripts/tidy.sh FILE...      these files
set -euo pipefail
cd "$(dirname "$0")/.."

sources() { git ls-files 'src/*.cpp' 'tools/*.cpp' 'python/src/*.cpp'; }
case "${1:-}" in
  --all) mapfile -t files < <(sources) ;;
  --changed)
    base=$(git describe --tags --abbrev=0 --match 'v*' 2> /dev/null || true)
    if [ -z "$base" ]; then
      base=$(cat .tidy-base)
    fi
    if ! git cat-file -e "$base^{commit}" 2> /dev/null; then
      echo "tidy: base $base is not in this clone's history (a shallow clone?): nothing linted;" \
           "run scripts/tidy.sh --all" >&2
      exit 0
    fi
    mapfile -t files < <(git diff --name-only --diff-filter=AMR "$base" -- 'src/*.cpp' \
                           'tools/*.cpp' 'python/src/*.cpp')
    echo "tidy: ${#files[@]} sources changed since $(git rev-parse --short "$base")" ;;
  "") echo "usage: scripts/tidy.sh --all | --changed | FILE..." >&2; exit 2 ;;
  *) files=("$@") ;;
esac
# Not linted: GCC-only code clang 14 rejects, which makes the whole file a compile error to it:
# CPU feature names (__builtin_cpu_supports("f16c"), "x86-64-v4") and the reductions' GCC vector
# extensions (__builtin_shuffle; the kernels refuse any compiler but GCC on x86-64).
skipped=(src/kernels/cpu/convert.cpp src/kernels/cpu/kernel_isa.cpp src/kernels/cpu/reduce.cpp
         src/kernels/cpu/reduce_bf16.cpp src/kernels/cpu/reduce_f16.cpp
         src/kernels/cpu/sum_by_pages.cpp src/kernels/cpu/add_rmsnorm.cpp)
kept=()
for f in "${files[@]}"; do
  [[ " ${skipped[*]} " == *" $f "* ]] || kept+=("$f")
done
files=("${kept[@]+"${kept[@]}"}")
[ ${#files[@]} -eq 0 ] && { echo "tidy: nothing to lint"; exit 0; }
if ! command -v clang-tidy > /dev/null; then
  echo "tidy: clang-tidy is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
[ -f build/compile_commands.json ] || { echo "tidy: no build/compile_commands.json (make build)" >&2; exit 1; }
# Any finding fails the run (WarningsAsErrors in .clang-tidy); xargs then exits 123.
set +e
# clang 14 has no _Float16 on x86 without AVX512-FP16 (GCC 12 has): the lint parses it as
# __fp16, a storage type with the same conversions.
printf '%s\n' "${files[@]}" |
  xargs -P "$(nproc)" -n 1 clang-tidy -p build --quiet --extra-arg=-D_Float16=__fp16 2>&1 |
  grep -v -E '^[0-9]+ warnings? (generated|treated as errors)\.$'
status=${PIPESTATUS[1]}
set -e
if [ "$status" -ne 0 ]; then
  echo "tidy: findings above (clang-tidy exit status $status)" >&2
  exit 1
fi
echo "tidy: ${#files[@]} sources clean"
