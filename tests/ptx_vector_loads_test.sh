#!/usr/bin/env bash
# The one-shot all-reduce's reduction must load every rank's 16 bytes with one vector load each,
# all issued before the conversions (docs/gpu-kernels.md, "custom"; the loop had once decayed to 8
# scalar ld.u16 per rank for bf16). Compiles the custom kernels to PTX for sm_90 and counts the
# vector loads of custom_kernel<__nv_bfloat16, 8>, the kernel one-shot bf16 at W=8 runs. Usage:
# tests/ptx_vector_loads_test.sh NVCC INCLUDE_DIR SOURCE  (exit 77: skipped, with why)
set -uo pipefail
nvcc="$1" include="$2" source="$3"
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
  echo "SKIP: no nvcc in this build (TPCOMM_CUDA off): the kernels are not compiled here"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! "$nvcc" -ptx -arch=sm_90 -std=c++17 -I"$include" "$source" -o "$work/kernels.ptx" 2>"$work/err"; then
  echo "FAIL: nvcc could not compile $source to PTX:"
  cat "$work/err"
  exit 1
fi
# The body of the entry whose name is custom_kernel<__nv_bfloat16, 8>.
awk '/^\.visible \.entry|^\.entry|^\.weak \.entry/ { inside = ($0 ~ /custom_kernelI13__nv_bfloat16Li8E/) }
     inside { print }' "$work/kernels.ptx" >"$work/entry.ptx"
if [ ! -s "$work/entry.ptx" ]; then
  echo "FAIL: no custom_kernel<__nv_bfloat16, 8> entry in the PTX (renamed?)"
  grep -o '\.entry [A-Za-z0-9_]*' "$work/kernels.ptx" | head
  exit 1
fi
vector=$(grep -c 'ld\.volatile\.global\.v4' "$work/entry.ptx")
scalar16=$(grep -c 'ld\.\(global\.\)\?u16' "$work/entry.ptx")
echo "custom_kernel<bf16, 8>: $vector volatile 16-byte loads, $scalar16 16-bit loads"
if [ "$vector" -lt 8 ]; then
  echo "FAIL: the reduction should issue one ld.volatile.global.v4 per rank (8 at W=8)"
  exit 1
fi
echo "PASS"
