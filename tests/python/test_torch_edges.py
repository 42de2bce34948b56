"""Edges of the torch.distributed backend and of tpcomm run under PyTorch programs (docs/store.md,
"tpcomm run and torch.distributed"): init_process_group in a program started by `tpcomm run`
(the launcher's store does not hold MASTER_PORT), a non-strided tensor named by its layout, the
Backend attributes torch reads (no recursion), torch's abort of a tpcomm group, and the statistics
through the backend. torch 2.x for the backend; the init under tpcomm run is checked with gloo on
1.13."""

import pytest

from conftest import run_ranks

torch = pytest.importorskip("torch")
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
needs_torch2 = pytest.mark.skipif(
    not TORCH2,
    reason=f"torch {torch.__version__}: the backend needs torch 2.x (a Python-"
    "subclassable torch.distributed Backend)",
)

INIT_UNDER_RUN = """
import torch.distributed as dist
backend = "tpcomm" if int(torch.__version__.split(".")[0]) >= 2 else "gloo"
if backend == "tpcomm":
    import tpcomm.torch
dist.init_process_group(backend)   # env://: rank 0's torch store on MASTER_PORT
r, w = dist.get_rank(), dist.get_world_size()
t = torch.arange(10, dtype=torch.float32) * (r + 1)
dist.all_reduce(t)
assert torch.equal(t, torch.arange(10, dtype=torch.float32) * sum(range(1, w + 1))), t
comm = tpcomm.Communicator.from_env()   # tpcomm's own store, TPCOMM_STORE_PORT, beside it
u = torch.full((4,), float(r))
comm.all_reduce(u)
assert torch.equal(u, torch.full((4,), float(sum(range(w))))), u
comm.close()
dist.destroy_process_group()
ok(f"init_process_group({backend}) under tpcomm run")
"""


def test_init_process_group_works_in_a_program_started_by_tpcomm_run(tmp_path):
    run_ranks(tmp_path, INIT_UNDER_RUN, launcher="tpcomm").expect_ok(2)


BACKEND_EDGES = """
import torch.distributed as dist
import tpcomm.torch
from torch.distributed.distributed_c10d import _abort_process_group
dist.init_process_group("tpcomm")
r = dist.get_rank()
backend = dist.group.WORLD._get_backend(torch.device("cpu"))
# What torch reads of a backend (its coalescing manager, its time estimates, _abort_process_group,
# batch_isend_irecv): plain answers, no recursion.
assert backend.supports_coalescing is False, backend.supports_coalescing
assert backend._supports_time_estimate is False, backend._supports_time_estimate
for name in ("supports_splitting", "supports_shrinking", "supports_reconfigure",
             "supports_window"):
    assert getattr(backend, name) is False, name
assert backend.options is not None
sparse = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.0, 2.0]), (4,))
dist.all_reduce(sparse)  # on the group's gloo
assert torch.equal(sparse.to_dense(), torch.tensor([2.0, 0.0, 4.0, 0.0])), sparse
refused(lambda: tpcomm.torch.communicator().all_reduce(sparse), "layout torch.sparse_coo")
# Both ranks send first, then receive: no deadlock (gloo's sends do not wait for the receiver).
ops = [dist.P2POp(dist.isend, torch.full((3,), float(r)), 1 - r),
       dist.P2POp(dist.irecv, torch.empty(3), 1 - r)]
for work in dist.batch_isend_irecv(ops):
    work.wait()
assert torch.equal(ops[1].tensor, torch.full((3,), float(1 - r))), ops[1].tensor
t = torch.arange(8, dtype=torch.float32) + r
dist.all_reduce(t)
assert torch.equal(t, 2 * torch.arange(8, dtype=torch.float32) + 1), t
stats = tpcomm.torch.communicator().stats()
assert stats["all_reduce"]["calls"] == 1 and stats["all_reduce"]["bytes"] == 32, stats
assert all(not k.startswith("engine") for k in stats["all_reduce"]["routes"]), stats
_abort_process_group()   # torch's abort of every group: tpcomm's communicators abort
assert tpcomm.torch.communicator.__module__  # the module is still usable
ok("backend edges")
"""


@needs_torch2
def test_backend_attributes_layouts_abort_and_stats(tmp_path):
    run_ranks(tmp_path, BACKEND_EDGES, launcher="torchrun").expect_ok(2)
