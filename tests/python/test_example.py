"""examples/python/tp_mlp.py is correct under torchrun (default rendezvous) and tpcomm run -n 4:
every rank prints 'correct' (both errors against the one-process reference below 1e-4)."""

import re
import subprocess

from conftest import PYTHON, REPO, TORCHRUN, TPCOMM, env_for_ranks, free_port

EXAMPLE = str(REPO / "examples" / "python" / "tp_mlp.py")


def ranks_correct(output, n):
    found = re.findall(r"tp_mlp rank (\d) of (\d): .*?: (correct|WRONG)", output)
    return sorted(int(r) for r, size, verdict in found if verdict == "correct" and int(size) == n)


def test_tp_mlp_under_tpcomm_run_with_4_ranks():
    p = subprocess.run(
        [str(TPCOMM), "run", "-n", "4", "--", PYTHON, EXAMPLE],
        env=env_for_ranks(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0 and ranks_correct(p.stdout, 4) == [0, 1, 2, 3], p.stdout


def test_tp_mlp_under_torchrun_default_rendezvous():
    p = subprocess.run(
        [*TORCHRUN, "--nproc_per_node", "2", "--master_port", str(free_port()), EXAMPLE],
        env=env_for_ranks(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0 and ranks_correct(p.stdout, 2) == [0, 1], p.stdout
