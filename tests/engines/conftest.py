"""Helpers of the engine tests (make test-engines): they run under an engine's own environment
(.venv-vllm, .venv-sglang, .venv-transformers: scripts/setup-engines.sh), whose interpreter runs
the ranks too. Every test has a time limit (an alarm) besides its subprocesses' own."""

import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# The Python suite's shared helpers (tests/python/rank_support.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import rank_support  # noqa: E402
from rank_support import RANK_HELPERS  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TPCOMM_BUILD_DIR", REPO / "build")).resolve()
TPCOMM = BUILD / "bin" / "tpcomm"
TEST_TIME_LIMIT_S = 400

PREAMBLE = """
import os, sys
sys.path.insert(0, {pythonpath!r})
RANK = int(os.environ.get("RANK", "0"))
""" + RANK_HELPERS


@pytest.fixture(autouse=True)
def time_limit():
    with rank_support.time_limit(TEST_TIME_LIMIT_S):
        yield


def free_port():
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 60000:
            return port


def _env(extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(BUILD / "python")
    env.setdefault("TPCOMM_TIMEOUT_MS", "60000")
    env.update(extra or {})
    return env


def _script(tmp_path, code):
    script = tmp_path / "rank.py"
    script.write_text(PREAMBLE.format(pythonpath=str(BUILD / "python")) + textwrap.dedent(code))
    return script


def run_one(tmp_path, code, env=None, timeout=240):
    """Runs `code` in a fresh interpreter of this environment (plugins load once per process);
    returns its output, asserting that it printed OK."""
    proc = subprocess.run([sys.executable, str(_script(tmp_path, code))], env=_env(env),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, cwd=tmp_path)
    assert proc.returncode == 0 and "OK rank 0" in proc.stdout, proc.stdout
    return proc.stdout


def run_group(tmp_path, code, n=2, env=None, timeout=300):
    """Runs `code` as every rank of a group of n under `tpcomm run`; asserts every rank
    printed OK and returns the output."""
    cmd = [str(TPCOMM), "run", "-n", str(n), "--", sys.executable, str(_script(tmp_path, code))]
    proc = subprocess.run(cmd, env=_env(dict(env or {}, TEST_PORT=str(free_port()))),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, cwd=tmp_path)
    ranks = sorted({int(m) for m in re.findall(r"OK rank (\d+)", proc.stdout)})
    assert proc.returncode == 0 and ranks == list(range(n)), proc.stdout
    return proc.stdout


def same_parameters(ours, theirs):
    """The parameters (names, kinds, defaults; not annotations) of two callables, for a
    readable assertion: equal when the engine's calls bind to ours as to theirs."""
    import inspect

    def shape(f):
        return [(p.name, p.kind.name, p.default) for p in inspect.signature(f).parameters.values()]
    return shape(ours), shape(theirs)
