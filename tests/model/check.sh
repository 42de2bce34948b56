#!/usr/bin/env bash
# Checks the kernels' signalling protocol (tests/model/signalling.pml) with SPIN: every
# configuration below is compiled into its own verifier (spin -a, gcc) and searched exhaustively
# (-DSAFETY: assertions and invalid end states; -DCOLLAPSE: lossless state compression, which is
# faster here and uses a third of the memory). The correct protocol must pass; the current
# kernels' failure handling and every deliberately broken variant must fail, each with the
# property named. Usage: check.sh [name-filter]   (exit 77 when spin or gcc is missing)
# Time cap: the whole run is meant to take at most 3 minutes on 2 cores (docs/gpu-kernels.md,
# "The signalling protocol, checked"); each search is also stopped after 150 s.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
filter=${1:-}

for tool in spin gcc; do
  if ! command -v "$tool" >/dev/null; then
    echo "model check skipped: $tool is not installed (scripts/setup.sh installs the Debian package)"
    exit 77
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Call sequences (3 consecutive calls each, on 2 blocks per rank):
#   A: custom one-shot (eager, 2 blocks), two-shot (eager, 1 block), one-shot in place (graph)
#   B: custom in place only, all graph replays: one-shot, two-shot (1 block), one-shot
#   C: multimem reduce in the switch (eager), gather (eager, 1 block), reduce (graph)
A=""
B="-DOP1=ONE_IP -DOP2=TWO_IP -DOP3=ONE_IP -DGR1=1 -DGR2=1 -DGR3=1"
Cm="-DOP1=MMR -DOP2=MMG -DOP3=MMR"
STALL="-DFAULT=1"
ABORT="-DFAULT=2"

# name | expected result (pass, or the property that must fail) | macros [| big: a search of
# millions of states, worth compiling with -O2; the small ones compile faster with -O0]
# The default model is the code as it is (commit f4f442a: the group's failure word, a failed
# graph replay traps; ff9c36e: abort() writes that word before anything else); BEFORE is the
# code the review read (97e1ca9), LATE the abort order of f4f442a.
BEFORE="-DGROUP_WORD=0 -DPUBLISH_FIRST=0"
LATE="-DPUBLISH_FIRST=0"
configs=(
  # The protocol without faults: no deadlock, no stale read.
  "ok-A-W2|pass|-DW=2 $A"
  "ok-A-W3|pass|-DW=3 $A"
  "ok-A-W4|pass|-DW=4 $A"
  "ok-B-W2|pass|-DW=2 $B"
  "ok-B-W3|pass|-DW=3 $B"
  "ok-B-W4|pass|-DW=4 $B"
  "ok-C-W2|pass|-DW=2 $Cm"
  "ok-C-W3|pass|-DW=3 $Cm"
  "ok-C-W4|pass|-DW=4 $Cm"
  # A rank that stalls past the wait budget, the kernels as they are: every property holds.
  # W = 2, 3: explored to the end; W = 4: every interleaving up to the first failure (STOP).
  "stall-A-W2|pass|-DW=2 $STALL $A"
  "stall-B-W2|pass|-DW=2 $STALL $B"
  "stall-C-W2|pass|-DW=2 $STALL $Cm"
  "stall-A-W3|pass|-DW=3 $STALL $A|big"
  "stall-B-W3|pass|-DW=3 $STALL $B|big"
  "stall-C-W3|pass|-DW=3 $STALL $Cm|big"
  "stall-A-W4-stop|pass|-DW=4 -DSTOP=1 $STALL $A|big"
  "stall-B-W4-stop|pass|-DW=4 -DSTOP=1 $STALL $B|big"
  "stall-C-W4-stop|pass|-DW=4 -DSTOP=1 $STALL $Cm|big"
  # A rank that aborts, the kernels as they are (ff9c36e): abort() writes the group's word
  # everywhere before it sets the abort word or any call is refused. Every property holds.
  "abort-A-W2|pass|-DW=2 $ABORT $A"
  "abort-B-W2|pass|-DW=2 $ABORT $B"
  "abort-C-W2|pass|-DW=2 $ABORT $Cm"
  "abort-timeouts-A-W2|pass|-DW=2 $ABORT -DTIMEOUTS=1 $A"
  "abort-timeouts-C-W2|pass|-DW=2 $ABORT -DTIMEOUTS=1 $Cm"
  "abort-A-W3|pass|-DW=3 $ABORT $A|big"
  "abort-B-W3|pass|-DW=3 $ABORT $B|big"
  "abort-C-W3|pass|-DW=3 $ABORT $Cm|big"
  "abort-A-W4-stop|pass|-DW=4 -DSTOP=1 $ABORT $A|big"
  # The order before it (f4f442a, LATE="-DPUBLISH_FIRST=0"): abort() set the abort word, then
  # wrote the group's word from the host. A graph replay that sees the abort word traps first,
  # and the host's write through CUDA never happens: the peers wait for ever (no budget) ...
  "late-word-abort-A-W2|deadlock|-DW=2 $LATE $ABORT $A"
  "late-word-abort-B-W3|deadlock|-DW=3 $LATE $ABORT $B"
  # ... or until their budget, and fail without ever hearing of the abort ...
  "late-word-abort-timeouts-A-W2|invisible_failure|-DW=2 $LATE $ABORT -DTIMEOUTS=1 $A"
  # ... and the refused eager calls shift the launches: a replay signals the peers' step with
  # another call's data before the word arrives (silent wrong result) ...
  "late-word-abort-timeouts-C-W2|stale_read|-DW=2 $LATE $ABORT -DTIMEOUTS=1 $Cm"
  # ... which telling the group from the trapping kernel too does not prevent.
  "late-word-abort-tell-A-W2|stale_read|-DW=2 $LATE $ABORT -DTELL_ON_ABORT=1 $A"
  # The code before f4f442a: a give-up is seen by no peer ...
  "before-stall-A-W2|invisible_failure|-DW=2 $BEFORE $STALL $A"
  "before-stall-C-W3|invisible_failure|-DW=3 $BEFORE $STALL $Cm"
  "before-stall-B-W4|invisible_failure|-DW=4 $BEFORE $STALL $B"
  # ... an abort reaches no peer's kernel ...
  "before-abort-A-W2|deadlock|-DW=2 $BEFORE $ABORT $A"
  "before-abort-C-W4|deadlock|-DW=4 $BEFORE $ABORT $Cm"
  # ... and graph replays after a failure return wrong results silently.
  "before-stall-B-W2-garbage|stale_read|-DW=2 $BEFORE $STALL -DCHECK_VISIBLE=0 $B"
  "before-stall-C-W2-garbage|stale_read|-DW=2 $BEFORE $STALL -DCHECK_VISIBLE=0 $Cm"
  # Deliberately broken variants of the protocol (no fault): each must fail.
  "broken-weak-acquire-A-W2|stale_read|-DW=2 -DBROKEN_WEAK_ACQUIRE=1 $A"
  "broken-weak-acquire-C-W3|stale_read|-DW=3 -DBROKEN_WEAK_ACQUIRE=1 $Cm"
  "broken-weak-release-A-W2|stale_read|-DW=2 -DBROKEN_WEAK_RELEASE=1 $A"
  "broken-weak-release-C-W3|stale_read|-DW=3 -DBROKEN_WEAK_RELEASE=1 $Cm"
  "broken-step-not-advanced-A-W2|stale_read|-DW=2 -DBROKEN_STEP_NOT_ADVANCED=1 $A"
  "broken-step-not-advanced-B-W3|stale_read|-DW=3 -DBROKEN_STEP_NOT_ADVANCED=1 $B"
  "broken-skip-middle-barrier-A-W2|stale_read|-DW=2 -DBROKEN_SKIP_MIDDLE=1 $A"
  "broken-skip-middle-barrier-C-W3|stale_read|-DW=3 -DBROKEN_SKIP_MIDDLE=1 $Cm"
  "broken-skip-end-barrier-B-W2|stale_read|-DW=2 -DBROKEN_SKIP_END=1 $B"
  "broken-skip-end-barrier-B-W3|stale_read|-DW=3 -DBROKEN_SKIP_END=1 $B"
  "broken-skip-count-C-W2|deadlock|-DW=2 -DBROKEN_SKIP_COUNT=1 $Cm"
  # A fault does not hide a broken protocol.
  "broken-weak-acquire-stall-A-W2|stale_read|-DW=2 $STALL -DBROKEN_WEAK_ACQUIRE=1 $A"
)

if [[ "${MODEL_EXTRA:-0}" == 1 ]]; then
  configs+=("stall3-A-W4-drain|pass|-DW=4 -DDRAIN=1 -DSTALL_CALL=3 $STALL $A|big")
fi

# What one search found: pass, stale_read, invisible_failure, deadlock, or an error text.
outcome() {
  local out=$1
  if grep -q "max search depth too small" "$out"; then
    echo "truncated"
  elif grep -q "assertion violated  !(stale_read)" "$out"; then
    echo "stale_read"
  elif grep -q "assertion violated  !(invisible_failure)" "$out"; then
    echo "invisible_failure"
  elif grep -qE "^pan:[0-9]+: invalid end state" "$out"; then
    echo "deadlock"
  elif grep -q "errors: 0" "$out"; then
    echo "pass"
  else
    echo "error"
  fi
}

failures=0
ran=0
start=$SECONDS
printf '%-36s %-18s %-18s %12s %7s\n' configuration expected got states seconds
for entry in "${configs[@]}"; do
  IFS='|' read -r name expect macros size <<<"$entry"
  opt=-O0
  [[ "${size:-}" == big ]] && opt=-O2
  [[ -n "$filter" && "$name" != *"$filter"* ]] && continue
  dir="$work/$name"
  mkdir -p "$dir"
  # shellcheck disable=SC2086  # the macros are separate words
  if ! (cd "$dir" && spin -a $macros "$here/signalling.pml" >spin.log 2>&1 &&
        gcc $opt -w -DSAFETY -DCOLLAPSE -o pan pan.c >gcc.log 2>&1); then
    echo "$name: the model does not compile:"
    cat "$dir/spin.log" "$dir/gcc.log"
    failures=$((failures + 1))
    continue
  fi
  t0=$SECONDS
  (cd "$dir" && timeout 150 ./pan -m20000 -w24 >pan.log 2>&1)
  got=$(outcome "$dir/pan.log")
  states=$(awk '/states, stored/ {print $1; exit}' "$dir/pan.log")
  printf '%-36s %-18s %-18s %12s %7s\n' "$name" "$expect" "$got" "${states:-?}" $((SECONDS - t0))
  ran=$((ran + 1))
  if [[ "$got" != "$expect" ]]; then
    failures=$((failures + 1))
    echo "--- $name: expected $expect, got $got (macros: $macros)"
    grep -E '^pan:|errors:' "$dir/pan.log" | head -5
  fi
done
echo "$ran searches, $failures unexpected, $((SECONDS - start)) s"
[[ $ran -gt 0 && $failures -eq 0 ]]
