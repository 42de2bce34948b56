#!/usr/bin/env bash
# The engines' own environments for tests/engines (make test-engines): .venv-vllm,
# .venv-sglang and .venv-transformers (Hugging Face transformers' tensor parallelism over tpcomm's
# torch.distributed backend), each made from Debian's /usr/bin/python3 with the engine from the
# package index, pinned by python/requirements-<engine>.txt (each engine pins its own torch, so
# they share neither .venv nor each other's environment). Into each it installs
# tpcomm-engines-plugin (python/engines-plugin: the entry points vLLM's and SGLang's plugin
# loaders read; transformers reads none of them, so there they are inert) and a .pth file that
# puts the build's Python package (build/python, or TPCOMM_BUILD_DIR/python) on the path: run
# the build first. Safe to run again: an environment whose pins, plugin and build path are
# unchanged is left as it is.
# Usage: scripts/setup-engines.sh [vllm] [sglang] [transformers] (default all three).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
build="$(cd "${TPCOMM_BUILD_DIR:-build}" 2>/dev/null && pwd)" || {
  echo "setup-engines: no build directory ${TPCOMM_BUILD_DIR:-build}: run the build (make) first" >&2
  exit 1
}
if [ ! -d "$build/python/tpcomm" ]; then
  echo "setup-engines: $build/python/tpcomm is missing: build the Python module first" >&2
  exit 1
fi

engines=("$@")
[ ${#engines[@]} -gt 0 ] || engines=(vllm sglang transformers)

for engine in "${engines[@]}"; do
  requirements="python/requirements-$engine.txt"
  if [ ! -f "$requirements" ]; then
    echo "setup-engines: unknown engine '$engine' (no $requirements)" >&2
    exit 1
  fi
  venv=".venv-$engine"
  # What the environment was made from: a change to any of it installs again.
  want="$(cat "$requirements" python/engines-plugin/pyproject.toml; echo "build=$build")"
  if [ -x "$venv/bin/python" ] && [ -f "$venv/tpcomm-installed.txt" ] &&
     [ "$(cat "$venv/tpcomm-installed.txt")" = "$want" ]; then
    echo "setup-engines: $venv is up to date"
    continue
  fi
  echo "setup-engines: installing $requirements into $venv"
  start=$(date +%s)
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  # Entry points only (no code): a regular install, so that importlib.metadata lists them.
  "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
    --force-reinstall --no-deps ./python/engines-plugin
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$build/python" > "$site/tpcomm-build.pth"
  "$venv/bin/python" -c "import tpcomm, $engine; print('setup-engines: $engine', $engine.__version__, 'tpcomm', tpcomm.__version__)"
  printf '%s' "$want" > "$venv/tpcomm-installed.txt"
  echo "setup-engines: $venv ready in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)"
done
