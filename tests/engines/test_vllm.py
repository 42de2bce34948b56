"""tpcomm in vLLM (the real package, python/requirements-vllm.txt, in .venv-vllm): the plugin
loads through vLLM's own loader, the device communicator vLLM builds for the TP group is
tpcomm's, every method vLLM calls on it (and on its custom all-reduce) exists with vLLM's
signature, and a TP group of 2 CPU ranks runs its collectives through it, every element checked.
Not run here (no GPU): the CUDA platform (CudaCommunicator's own set-up needs NCCL and a device),
vLLM's graph_capture() around TpcommCustomAllreduce.capture(), CUDA tensors."""

import inspect
import re
from pathlib import Path

import pytest

from conftest import run_group, run_one, same_parameters

vllm = pytest.importorskip("vllm", reason="vLLM is not installed in this interpreter: run the "
                           "engine tests under .venv-vllm (make test-engines)")

CPU = {"VLLM_TARGET_DEVICE": "cpu"}  # the CPU platform: the CUDA one needs a GPU

LOAD = """
import vllm.plugins as plugins
from tpcomm.engines import vllm_plugin
found = plugins.load_plugins_by_group(plugins.DEFAULT_PLUGINS_GROUP)
print("found", "tpcomm" in found, found.get("tpcomm") is vllm_plugin.register)
plugins.load_general_plugins()
from vllm.platforms import current_platform
from vllm.utils.import_utils import resolve_obj_by_qualname
name = current_platform.get_device_communicator_cls()
if "tpcomm" in found:
    vllm_plugin.register()   # again: changes nothing
    assert current_platform.get_device_communicator_cls() == name
cls = resolve_obj_by_qualname(name)
print("communicator", type(current_platform).__name__, name,
      [c.__name__ for c in cls.__mro__])
ok()
"""


def test_the_plugin_loads_through_vllms_loader_and_names_tpcomms_communicator(tmp_path):
    out = run_one(tmp_path, LOAD, env=CPU)
    assert "found True True" in out, out
    assert ("communicator CpuPlatform tpcomm.engines.vllm_communicator.TpcommDeviceCommunicator "
            "['TpcommDeviceCommunicator', '_TpcommServed', 'CpuCommunicator', "
            "'DeviceCommunicatorBase', 'object']") in out, out


def test_vllms_allowlist_leaves_the_plugin_out(tmp_path):
    out = run_one(tmp_path, LOAD, env=dict(CPU, VLLM_PLUGINS="another_plugin"))
    assert "found False False" in out, out
    assert ("communicator CpuPlatform vllm.distributed.device_communicators.cpu_communicator."
            "CpuCommunicator") in out, out


def _source(module):
    return Path(inspect.getsourcefile(module)).read_text()


def test_every_method_vllm_calls_exists_with_vllms_signature():
    from vllm.distributed import parallel_state
    from vllm.distributed.device_communicators import cuda_communicator
    from vllm.distributed.device_communicators.base_device_communicator import (
        DeviceCommunicatorBase)
    from vllm.distributed.device_communicators.cpu_communicator import CpuCommunicator
    from vllm.distributed.device_communicators.custom_all_reduce import CustomAllreduce

    from tpcomm.engines import TpcommCustomAllreduce
    from tpcomm.engines.vllm_communicator import communicator_class

    # What GroupCoordinator calls on its device communicator, read from vLLM's source.
    called = set(re.findall(r"device_communicator\.(\w+)\(", _source(parallel_state)))
    assert {"all_reduce", "all_gather", "reduce_scatter", "gather", "destroy"} <= called, called
    cuda = cuda_communicator.CudaCommunicator
    for base in (DeviceCommunicatorBase, CpuCommunicator, cuda):
        ours = communicator_class(base)
        assert issubclass(ours, base) and ours is communicator_class(base)
        assert same_parameters(ours.__init__, base.__init__)[0] == \
            same_parameters(ours.__init__, base.__init__)[1]
        for name in sorted(called):
            if not hasattr(base, name):  # the CPU SHM path's tensor-dict calls, not on this base
                continue
            mine, theirs = same_parameters(getattr(ours, name), getattr(base, name))
            assert mine == theirs, (base.__name__, name, mine, theirs)
        for name in ("all_reduce", "all_gather", "reduce_scatter", "destroy"):
            assert getattr(ours, name) is not getattr(base, name), (base.__name__, name)
    # What vLLM asks of a custom all-reduce (CudaCommunicator's ca_comm, graph_capture()).
    asked = set(re.findall(r"ca_comm\.(\w+)", _source(parallel_state) + _source(cuda_communicator)))
    assert {"should_custom_ar", "custom_all_reduce", "capture", "disabled"} <= asked, asked
    for name in sorted(asked):
        assert hasattr(TpcommCustomAllreduce, name), name
        theirs = getattr(CustomAllreduce, name, None)  # None: an attribute set by __init__
        if callable(theirs):
            mine, theirs = same_parameters(getattr(TpcommCustomAllreduce, name), theirs)
            assert mine == theirs, (name, mine, theirs)
    inspect.signature(TpcommCustomAllreduce).bind(group=None, device="cuda:0")


GROUP = """
import torch
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.distributed import parallel_state as ps
from vllm.distributed import communication_op as ops
from tpcomm.engines import vllm_communicator
with set_current_vllm_config(VllmConfig()):
    ps.init_distributed_environment(world_size=2, rank=RANK, local_rank=RANK, backend="gloo",
        distributed_init_method=f"tcp://127.0.0.1:{os.environ['TEST_PORT']}")
    ps.initialize_model_parallel(tensor_model_parallel_size=2)
    tp = ps.get_tp_group()
    dc = tp.device_communicator
    assert type(dc) is vllm_communicator.TpcommDeviceCommunicator, type(dc)
    assert dc.tpcomm is not None and (dc.tpcomm.rank, dc.tpcomm.size) == (RANK, 2)
    n, r = 2, RANK
    served = []
    for call in ("all_reduce", "all_gather", "reduce_scatter"):
        real = getattr(dc.tpcomm, call)
        def spy(*a, _real=real, _call=call, **k):
            served.append(_call)
            return _real(*a, **k)
        setattr(dc.tpcomm, call, spy)
    base = torch.arange(4 * 6, dtype=torch.float32).reshape(4, 6) % 13
    for dt in (torch.float32, torch.bfloat16, torch.float16, torch.int32):
        x = (base + 5 * r).to(dt)
        before = x.clone()
        s = ops.tensor_model_parallel_all_reduce(x)
        assert torch.equal(s, sum(base + 5 * q for q in range(n)).to(dt)), dt
        assert torch.equal(x, before), "vLLM's all-reduce is out of place"
        for dim in (0, -1, 1):
            g = ops.tensor_model_parallel_all_gather(x, dim=dim)
            want = torch.cat([(base + 5 * q).to(dt) for q in range(n)], dim=dim)
            assert g.shape == want.shape and torch.equal(g, want), (dt, dim)
            rs = tp.reduce_scatter(x, dim=dim)
            full = sum(base + 5 * q for q in range(n)).to(dt)
            assert torch.equal(rs, full.chunk(n, dim=dim)[r]), (dt, dim)
    assert served == (["all_reduce"] + ["all_gather", "reduce_scatter"] * 3) * 4, served
    # float64 is not tpcomm's: vLLM's own (torch.distributed) serves it, still right.
    before = len(served)
    d = ops.tensor_model_parallel_all_reduce(torch.full((5,), 0.5 + r, dtype=torch.float64))
    assert torch.equal(d, torch.full((5,), 2.0, dtype=torch.float64)) and len(served) == before
    # broadcast and gather are vLLM's own.
    b = tp.broadcast(torch.full((3,), float(r + 7)), src=1)
    assert torch.equal(b, torch.full((3,), 8.0)) and len(served) == before
    # Bad input names the cause, on the calling rank, before anything blocks.
    refused(lambda: dc.reduce_scatter(torch.ones(3, 4), dim=0),
            "reduce_scatter: dimension 0 of shape (3, 4) does not divide among 2 ranks")
    refused(lambda: dc.all_gather(torch.ones(3, 4), dim=2),
            "all_gather: dim 2 is not a dimension of a tensor of shape (3, 4)")
    comm = dc.tpcomm
    ps.destroy_model_parallel()
    ps.destroy_distributed_environment()
    refused(comm.barrier, "this communicator was closed")
ok()
"""


def test_a_tp_group_of_two_cpu_ranks_runs_its_collectives_through_tpcomm(tmp_path):
    run_group(tmp_path, GROUP, n=2, env=CPU)
