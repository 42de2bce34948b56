#!/usr/bin/env bash
# Intel MPI for scripts/bench-impi.sh: .venv-impi, made from Debian's /usr/bin/python3, with the
# impi-rt and impi-devel wheels pinned by python/requirements-impi.txt. A venv of its own, so
# that Intel's mpirun, mpicc and libmpi never reach the library's build or its .venv (tpcomm
# links Debian's Open MPI). Safe to run again: a venv made from unchanged pins is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=python/requirements-impi.txt
venv=.venv-impi
want="$(cat "$requirements")"
if [ -x "$venv/bin/mpirun" ] && [ -f "$venv/tpcomm-installed.txt" ] &&
   [ "$(cat "$venv/tpcomm-installed.txt")" = "$want" ]; then
  echo "setup-impi: $venv is up to date"
  exit 0
fi
echo "setup-impi: installing $requirements into $venv"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
printf '%s' "$want" > "$venv/tpcomm-installed.txt"
echo "setup-impi: $venv ready, $(du -sh "$venv" | cut -f1)"
