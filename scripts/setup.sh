#!/usr/bin/env bash
# Installs the Debian packages the build needs (only those missing, saying which), then
# configures and builds with the "default" CMake preset. Safe to run again: it does nothing that
# is already done. Run as root on a fresh machine, or as a user with everything installed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ make pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev
          libgtest-dev libgmock-dev libssl-dev libbenchmark-dev libgloo-dev
          libopenmpi-dev openmpi-bin libhwloc-dev gnuplot-nox universal-ctags clang-format
          clang-tidy
          python3-dev python3-pybind11 pybind11-dev python3-torch python3-numpy python3-pytest
          python3-venv
          iproute2 nftables spin)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing missing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: these packages are missing and installing them needs root: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all build packages present"
fi

# The project's own Python environment with the current torch (python/requirements-test.txt),
# beside Debian's torch 1.13: nothing is installed into the system interpreter. Made again when
# the requirements change.
requirements=python/requirements-test.txt
if [ ! -x .venv/bin/python ] || ! cmp -s "$requirements" .venv/requirements-installed.txt; then
  echo "setup: installing $requirements into .venv (the current torch, for the Python suite)"
  rm -rf .venv
  /usr/bin/python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r "$requirements"
  cp "$requirements" .venv/requirements-installed.txt
fi

preset="${TPCOMM_PRESET:-default}"
if [ ! -f "build/CMakeCache.txt" ] || [ "$preset" != default ]; then
  cmake --preset "$preset"
fi
cmake --build --preset "$preset"
