#!/usr/bin/env bash
# Small units, checked: no function over 80 lines and no file over 400 lines in src/, tools/ and python/src/
# (C++ and CUDA). Tables are exempt by name below, each with its reason. Functions are found by
# universal-ctags (Debian's universal-ctags, installed by scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
max_function=80
max_file=400
# name|file: why it may be longer
exempt=(
  "env_registry|src/common/env.cpp: the table of every environment variable, one entry each"
  "launch_env_table|src/common/env_launch_table.cpp: the table of the launchers' variables, one entry each"
)

command -v ctags >/dev/null || { echo "check-sizes: ctags not found (apt-get install universal-ctags)" >&2; exit 2; }
files=$(git ls-files --cached --others --exclude-standard 'src/*.cpp' 'src/*.hpp' 'src/*.cu' 'src/*.cuh' 'tools/*.cpp' 'tools/*.hpp' 'python/src/*.cpp' 'python/src/*.hpp')
failed=0
while read -r lines file; do
  [ "$file" = total ] && continue
  if [ "$lines" -gt "$max_file" ]; then
    echo "file too long: $file has $lines lines (limit $max_file)"
    failed=1
  fi
done < <(wc -l $files)

checked=0
while read -r end start name file; do
  checked=$((checked + 1))
  len=$((end - start + 1))
  [ "$len" -le "$max_function" ] && continue
  for e in "${exempt[@]}"; do
    [ "${e%%:*}" = "$name|$file" ] && continue 2
  done
  echo "function too long: $name in $file has $len lines (limit $max_function)"
  failed=1
done < <(ctags -x --langmap=C++:+.cu.cuh --kinds-C++=f --fields=+ne \
           --_xformat='%{end} %{line} %N %F' $files)
if [ "$checked" -lt 100 ]; then
  echo "check-sizes: only $checked functions found: is ctags working?"
  exit 1
fi
echo "check-sizes: $checked functions in $(echo "$files" | wc -l) files checked"
exit $failed
