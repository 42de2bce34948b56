"""Helpers of the Python suite: run a snippet on every rank of a group (tpcomm run, torchrun) and
read what each rank printed. Every test has a time limit (TEST_TIME_LIMIT_S, an alarm) besides
the subprocess's own."""

import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import rank_support
from rank_support import RANK_HELPERS

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TPCOMM_BUILD_DIR", REPO / "build")).resolve()
TPCOMM = BUILD / "bin" / "tpcomm"
# The ranks run under the interpreter that runs the suite: Debian's /usr/bin/python3 (torch 1.13)
# or the project's .venv (the current torch 2.x); docs/python.md states the matrix.
PYTHON = sys.executable
TEST_TIME_LIMIT_S = 150

# Debian's torchrun (torch 1.13) on Python 3.11 fails in its own argument parsing: the default
# "--redirects 0 --tee 0" map to Std.NONE, which Python 3.11's IntFlag no longer yields when
# iterated, so start_processes gets None. "--redirects 2 --tee 2" (stderr redirected and teed,
# stdout untouched) parse to a real flag and change nothing visible (docs/python.md).
TORCHRUN = [PYTHON, "-m", "torch.distributed.run", "--redirects", "2", "--tee", "2"]

PREAMBLE_HEAD = """
import os, sys, json
sys.path.insert(0, {pythonpath!r})
import numpy as np
import torch
import tpcomm
RANK = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK",
                           os.environ.get("SLURM_PROCID", "0"))))
REPO = {repo!r}
"""
PREAMBLE = PREAMBLE_HEAD + RANK_HELPERS


@pytest.fixture(autouse=True)
def time_limit():
    with rank_support.time_limit(TEST_TIME_LIMIT_S):
        yield


# The CPU engines a test runs on: (environment, ranks, `tpcomm run` arguments). hier needs
# simulated nodes (tpcomm run --nodes), whose namespaces need root.
ENGINES = {
    "shm": ({}, 2, ()),
    "gloo": ({"TPCOMM_DISABLE": "shm"}, 2, ()),
    "hier": ({}, 4, ("--nodes", "2")),
}


def engine_setup(engine):
    """ENGINES[engine], or a pytest skip saying why that engine cannot run here."""
    if engine == "hier" and os.geteuid() != 0:
        pytest.skip(
            "hier needs simulated nodes (tpcomm run --nodes), which need root for "
            "their namespaces; not root here"
        )
    return ENGINES[engine]


def free_port():
    """A port P with P and P + 1 free (tpcomm's store takes MASTER_PORT + 1 under torchrun),
    below the kernel's ephemeral range, so that no outgoing connection of a test running in
    parallel takes P + 1 as its local port between now and the launch."""
    import random

    while True:
        port = random.randrange(20000, 32000)
        if _bindable(port) and _bindable(port + 2):
            return port


class Run:
    def __init__(self, proc):
        self.returncode = proc.returncode
        self.output = proc.stdout

    def ok_ranks(self):
        return sorted({int(m) for m in re.findall(r"OK rank (\d+)", self.output)})

    def expect_ok(self, n):
        assert self.returncode == 0 and self.ok_ranks() == list(range(n)), self.output


def env_for_ranks(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(BUILD / "python")
    env.setdefault("TPCOMM_TIMEOUT_MS", "30000")
    env.update(extra or {})
    return env


def run_ranks(tmp_path, code, n=2, launcher="tpcomm", env=None, timeout=120, args=()):
    """Runs `code` (after PREAMBLE) as every rank of a group of n; returns a Run."""
    script = tmp_path / "rank.py"
    script.write_text(
        PREAMBLE.format(pythonpath=str(BUILD / "python"), repo=str(REPO)) + textwrap.dedent(code)
    )
    if launcher == "srun":  # the environment srun gives its tasks (no Slurm here)
        return _run_as_srun(script, n, env, timeout)
    if launcher == "tpcomm":
        cmd = [str(TPCOMM), "run", "-n", str(n), *args, "--", PYTHON, str(script)]
    elif launcher == "mpirun":
        cmd = [
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-n",
            str(n),
            PYTHON,
            str(script),
        ]
    else:  # torchrun, with its default (static) rendezvous unless args say --standalone
        port = [] if "--standalone" in args else ["--master_port", str(free_port())]
        cmd = [*TORCHRUN, "--nproc_per_node", str(n), *port, *args, str(script)]
        if env and env.get("TPCOMM_STORE_PORT") == "MASTER":  # torchrun's own port
            env = dict(env, TPCOMM_STORE_PORT=port[1])
    proc = subprocess.run(
        cmd,
        env=env_for_ranks(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )
    return Run(proc)


class _Finished:
    def __init__(self, returncode, stdout):
        self.returncode, self.stdout = returncode, stdout


def _bindable(port):
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False


def _run_as_srun(script, n, env, timeout):
    # The store port derives from the job id (20000 + job x 16 mod 12000): one whose port is
    # free now.
    job = next(j for j in range(os.getpid() % 700, 100000) if _bindable(20000 + (j * 16) % 12000))
    procs = []
    for r in range(n):
        rank_env = env_for_ranks(env)
        for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
            rank_env.pop(name, None)
        rank_env.update(
            SLURM_PROCID=str(r),
            SLURM_NTASKS=str(n),
            SLURM_LOCALID=str(r),
            SLURM_STEP_NODELIST="localhost",
            SLURM_STEP_NUM_NODES="1",
            SLURM_JOB_ID=str(job),
            SLURM_STEP_ID="0",
            RANK_FOR_TEST=str(r),
        )
        procs.append(
            subprocess.Popen(
                [PYTHON, str(script)],
                env=rank_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=script.parent,
            )
        )
    outputs, status = [], 0
    for p in procs:
        out, _ = p.communicate(timeout=timeout)
        outputs.append(out)
        status = status or p.returncode
    return Run(_Finished(status, "".join(outputs)))
