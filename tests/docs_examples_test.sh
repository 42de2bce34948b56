#!/usr/bin/env bash
# The command examples of README.md and docs/*.md, run and compared with what they show. A
# fenced block marked `console` is an example: each `$ COMMAND` line runs (from the repository
# root, `tpcomm` being build/bin/tpcomm) and the lines after it, up to the next `$` line or the
# end of the block, are its exact output. `<host>` stands for this machine's hostname; when the
# shown lines start with a rank prefix ("[0] "), their order is free. A change that alters an
# example's output fails here until the document is updated.
# Usage: tests/docs_examples_test.sh BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
[[ "$build" = /* ]] || build="$PWD/$build"
export PATH="$build/bin:$PATH"
[ -x "$build/bin/tpcomm" ] || { echo "no tpcomm in $build/bin: build first"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Split every console block into numbered examples: N.where, N.cmd, N.want.
awk -v dir="$work" '
  FNR == 1 { fence = 0 }
  /^```/ {
    if (!fence) { fence = ($0 == "```console") ? 2 : 1; next }
    fence = 0; next
  }
  fence == 2 && /^\$ / {
    n++; sub(/^\$ /, "")
    print FILENAME ":" FNR > (dir "/" n ".where")
    print > (dir "/" n ".cmd")
    printf "" > (dir "/" n ".want")
    next
  }
  fence == 2 && n { print >> (dir "/" n ".want") }
' README.md docs/*.md

host=$(hostname)
examples=0 failed=0 skipped=0
for cmd_file in $(ls "$work"/*.cmd 2>/dev/null | sort -V); do
  n=${cmd_file%.cmd}
  cmd=$(cat "$cmd_file")
  where=$(cat "$n.where")
  examples=$((examples + 1))
  if [[ "$cmd" == *"--nodes"* && $(id -u) -ne 0 ]]; then
    echo "skipped  $where: $cmd (simulated nodes need root; not root here)"
    skipped=$((skipped + 1))
    continue
  fi
  sed "s/<host>/$host/g" "$n.want" > "$n.expected"
  timeout 120 bash -c "$cmd" > "$n.got" 2>&1
  if grep -q '^\[[0-9]*\] ' "$n.expected"; then
    sort -o "$n.expected" "$n.expected"
    sort -o "$n.got" "$n.got"
  fi
  if diff -u "$n.expected" "$n.got" > "$n.diff"; then
    echo "ok       $where: $cmd"
  else
    echo "DIFFERS  $where: $cmd"
    sed 's/^/    /' "$n.diff"
    failed=$((failed + 1))
  fi
done
if [ "$examples" -lt 3 ]; then
  echo "only $examples console examples found: the documents lost their examples?"
  exit 1
fi
echo "docs examples: $((examples - failed - skipped)) passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
