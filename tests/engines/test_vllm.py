"""tpcomm in vLLM (the real package, python/requirements-vllm.txt, in .venv-vllm): the plugin
loads through vLLM's own loader, the device communicator vLLM builds for the TP group is
tpcomm's, every method vLLM calls on it and every attribute any module of vLLM reads from its
custom all-reduce exists with vLLM's meaning, and a TP group of 2 CPU ranks runs its collectives
through it, every element checked and every call counted. What tpcomm does where it does not
serve: another device, a set-up that fails on one rank, elastic EP's stateless groups.

vLLM's CUDA code paths run here on the CPU device ("CUDA on CPU", AS_CUDA below): the CPU
platform is made to answer what the CUDA platform answers (CudaCommunicator), and vLLM's own
CudaCommunicator is constructed on the CPU device with its NCCL, FlashInfer and symmetric memory
off by vLLM's own variables; its all-reduce chain, its custom all-reduce slot, graph_capture()
(with no CUDA stream) and suspend()/resume() then run for real around tpcomm's CPU communicator.
Not run here (no GPU): CUDA tensors, real stream capture and registered graph buffers, NCCL,
vLLM's cuMem graph pool (simulated through its flag), a model served end to end
(scripts/gpu-check.sh's runbook, docs/engines.md)."""

import ast
import inspect
import json
import re
from pathlib import Path

import pytest

from conftest import free_port, run_group, run_one, same_parameters

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
        for name in ("all_reduce", "all_gather", "reduce_scatter", "destroy", "suspend",
                     "resume"):
            assert getattr(ours, name) is not getattr(base, name), (base.__name__, name)
        # Sleep mode calls these through parallel_state's suspend_device_comms() and
        # resume_device_comms() (`comm.suspend()`), which the pattern above does not see.
        for name in ("suspend", "resume"):
            mine, theirs = same_parameters(getattr(ours, name), getattr(base, name))
            assert mine == theirs, (base.__name__, name, mine, theirs)
    # What vLLM asks of a custom all-reduce, from every module of the package (ca_comm_reads).
    reads, probes = ca_comm_reads(Path(vllm.__file__).parent)
    assert not probes, probes  # vLLM probes nothing with hasattr: every read is required
    for name in sorted(reads):
        theirs = getattr(CustomAllreduce, name, None)  # None: an attribute set by __init__
        if callable(theirs) and callable(getattr(TpcommCustomAllreduce, name, None)):
            mine, theirs = same_parameters(getattr(TpcommCustomAllreduce, name), theirs)
            assert mine == theirs, (name, reads[name], mine, theirs)
    inspect.signature(TpcommCustomAllreduce).bind(group=None, device="cuda:0")
    # vLLM's CudaCommunicator builds its own with register_graph_buffers=...; ours takes it too.
    inspect.signature(TpcommCustomAllreduce).bind(group=None, device="cuda:0",
                                                  register_graph_buffers=False)


def _is_ca_comm(node):
    """An expression that is a device communicator's custom all-reduce: `x.ca_comm` (x not the
    `self` of a class outside vLLM's device communicators, see ca_comm_reads),
    `getattr(x, "ca_comm"[, default])`, or either under typing's cast(...)."""
    if isinstance(node, ast.Attribute) and node.attr == "ca_comm":
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if (node.func.id == "getattr" and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and node.args[1].value == "ca_comm"):
            return True
        if node.func.id == "cast" and len(node.args) == 2:
            return _is_ca_comm(node.args[1])
    return False


def ca_comm_reads(root):
    """Every attribute any module under `root` (the installed vllm package) reads from a device
    communicator's custom all-reduce object: {name: ["file:line", ...]}, and the names only
    probed with hasattr (optional). Found by walking each file's syntax tree: reads of
    `<expr>.ca_comm.NAME`, of `NAME` on a local name bound to such an expression in the same
    function (`ca_comm = self.ca_comm`, `comm = cast(..., dc).ca_comm`), and getattr(x, "NAME").
    `self.ca_comm` counts in vLLM's device communicators only: elsewhere (the AITER fusion pass)
    `self.ca_comm` is an object of the class's own, not the device communicator's slot."""
    reads, probes = {}, {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        if "ca_comm" not in text:  # every form read below names it: nothing to parse
            continue
        tree = ast.parse(text, rel)
        own_self = rel.startswith("distributed/device_communicators/")

        def ca_expr(node):
            if (isinstance(node, ast.Attribute) and node.attr == "ca_comm" and not own_self
                    and isinstance(node.value, ast.Name) and node.value.id == "self"):
                return False
            return _is_ca_comm(node)

        scopes = [n for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef))]
        for scope in scopes:
            aliases = set()
            for n in ast.walk(scope):
                if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and \
                        n.value is not None and ca_expr(n.value):
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    aliases |= {t.id for t in targets if isinstance(t, ast.Name)}

            def is_ca(node):
                return ca_expr(node) or (isinstance(node, ast.Name) and node.id in aliases)

            for n in ast.walk(scope):
                name, into = None, reads
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and is_ca(n.value):
                    name = n.attr
                elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                      and n.func.id in ("getattr", "hasattr") and len(n.args) >= 2
                      and isinstance(n.args[1], ast.Constant) and is_ca(n.args[0])):
                    name, into = n.args[1].value, (probes if n.func.id == "hasattr" else reads)
                if name is not None:
                    into.setdefault(name, set()).add(f"{rel}:{n.lineno}")
    return ({k: sorted(v) for k, v in reads.items()}, {k: sorted(v) for k, v in probes.items()})


CA_ATTRIBUTES = """
import json, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TEST_PORT']}",
                        rank=0, world_size=1)
from tpcomm.engines import TpcommCustomAllreduce
ca = TpcommCustomAllreduce(dist.group.WORLD, "cpu")
names = json.loads(os.environ["TEST_NAMES"])
missing = [name for name in names if not hasattr(ca, name)]
print("missing", missing)
print("values", ca.disabled, ca.fully_connected, ca.mnnvl_lamport_ag_multicast_ptr,
      ca.custom_all_gather(torch.ones(4)), ca.custom_reduce_scatter(torch.ones(4)))
ca.close()
ok()
"""


def test_every_attribute_any_vllm_module_reads_from_the_custom_all_reduce_exists(tmp_path):
    import json

    reads, probes = ca_comm_reads(Path(vllm.__file__).parent)
    # The scan finds what a reading of vLLM 0.33.0 found (docs/engines.md, "TpcommCustomAllreduce"):
    # the dispatch chain, graph_capture(), sequence parallelism's fallbacks and DeepSeek V4.1's
    # model code.
    assert {"disabled", "should_custom_ar", "custom_all_reduce", "capture", "custom_all_gather",
            "custom_reduce_scatter", "fully_connected",
            "mnnvl_lamport_ag_multicast_ptr"} <= set(reads), reads
    assert any(w.startswith("models/deepseek_v41/") for w in reads["fully_connected"]), reads
    assert not any(w.startswith("compilation/") for ws in reads.values() for w in ws), \
        "the AITER fusion pass's own self.ca_comm is not the device communicator's"
    out = run_one(tmp_path, CA_ATTRIBUTES, env=dict(CPU, TEST_NAMES=json.dumps(sorted(reads)),
                                                    TEST_PORT=str(free_port())))
    assert "missing []" in out, (out, reads)
    # vLLM's meanings: a bool, False without NVLink (CPU); no multicast buffer (0); None from
    # the custom all-gather and reduce-scatter, which sends vLLM to the group's own.
    assert "values False False 0 None None" in out, out


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
    # all_gatherv and reduce_scatterv of uneven rows (a rank of none), as vLLM's DP MoE makes
    # them: tpcomm's, counted under their own names.
    sizes = [3, 0]
    mine = torch.full((sizes[r], 6), float(r + 1))
    gv = dc.all_gatherv(mine, dim=0, sizes=sizes)
    assert torch.equal(gv, torch.ones(3, 6)), gv
    lists = dc.all_gatherv([mine, mine.to(torch.int32)], dim=0, sizes=sizes)
    assert torch.equal(lists[1], torch.ones(3, 6, dtype=torch.int32)), lists
    whole = torch.arange(18, dtype=torch.float32).reshape(3, 6) + r
    rv = dc.reduce_scatterv(whole, dim=0, sizes=sizes)
    want = (2 * torch.arange(18, dtype=torch.float32).reshape(3, 6) + 1)[: sizes[0]]
    assert torch.equal(rv, want if r == 0 else torch.empty(0, 6)), rv
    st = dc.stats()
    assert st["all_gatherv"]["calls"] == 3 and st["reduce_scatterv"]["calls"] == 1, st
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


# --- where tpcomm does not serve: another device, a failed set-up, elastic EP ------------------

OTHER_DEVICE = """
import time, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TEST_PORT']}",
                        rank=RANK, world_size=2)
group = dist.new_group(backend="gloo")
from vllm.distributed.device_communicators.base_device_communicator import (
    DeviceCommunicatorBase)
from tpcomm.engines.vllm_communicator import communicator_class
# What vLLM builds on XPU or an out-of-tree platform (NPU, HPU, ...) with the plugin loaded:
# tpcomm's subclass of the platform's class, for the TP group, on a device tpcomm has no
# backend for. Its tensors here are CPU tensors, which the base class reduces over the group.
cls = communicator_class(DeviceCommunicatorBase)
n, r = 2, RANK
for device in (torch.device("xpu", 0), torch.device("meta"), torch.device("hpu", 1)):
    dc = cls(cpu_group=group, device=device, device_group=group, unique_name="tp:0")
    assert dc.tpcomm is None and dc.tpcomm_ar is None, device
    assert (f"device {device}: tpcomm serves cpu and cuda devices, not {device.type}; "
            "DeviceCommunicatorBase serves this group") == dc.tpcomm_reason, dc.tpcomm_reason
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) % 11
    x = base + 4 * r
    s = dc.all_reduce(x.clone())
    assert torch.equal(s, sum(base + 4 * q for q in range(n))), (device, s)
    g = dc.all_gather(x, dim=-1)
    assert torch.equal(g, torch.cat([base + 4 * q for q in range(n)], dim=-1)), (device, g)
    rs = dc.reduce_scatter(x, dim=0)
    assert torch.equal(rs, sum(base + 4 * q for q in range(n)).chunk(n, dim=0)[r]), device
    stats = dc.stats()
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        b = 96 * n if op == "all_gather" else 96  # an all-gather counts its output
        assert stats[op] == {"calls": 1, "bytes": b,
                             "routes": {"engine": {"calls": 1, "bytes": b}}}, (op, stats[op])
    dc.destroy()
ok()
"""


def test_a_tp_group_on_another_device_keeps_the_platforms_class_and_serves_nothing(tmp_path):
    run_group(tmp_path, OTHER_DEVICE, n=2, env=CPU)


SETUP_FAILS = """
import threading, time, torch
if RANK == 1:
    os.environ["TPCOMM_THREADS"] = "-5"   # tpcomm refuses it when it creates the communicator
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.distributed import parallel_state as ps
from vllm.distributed import communication_op as ops
from tpcomm.engines import vllm_communicator
with set_current_vllm_config(VllmConfig()):
    ps.init_distributed_environment(world_size=2, rank=RANK, local_rank=RANK, backend="gloo",
        distributed_init_method=f"tcp://127.0.0.1:{os.environ['TEST_PORT']}")
    start = time.monotonic()
    ps.initialize_model_parallel(tensor_model_parallel_size=2)
    made_s = time.monotonic() - start
    print(f"rank {RANK} made its groups in {made_s:.2f} s")
    assert made_s < 5, made_s
    tp = ps.get_tp_group()
    dc = tp.device_communicator
    assert type(dc) is vllm_communicator.TpcommDeviceCommunicator, type(dc)
    assert dc.tpcomm is None and dc.tpcomm_ar is None, dc.tpcomm
    assert "rank 1: InvalidInputError: TPCOMM_THREADS=-5" in dc.tpcomm_reason, dc.tpcomm_reason
    n, r = 2, RANK
    base = torch.arange(4 * 6, dtype=torch.float32).reshape(4, 6) % 13
    for dt in (torch.float32, torch.bfloat16, torch.int32):
        x = (base + 5 * r).to(dt)
        s = ops.tensor_model_parallel_all_reduce(x.clone())  # vLLM's CPU one is in place
        assert torch.equal(s, sum(base + 5 * q for q in range(n)).to(dt)), dt
        g = ops.tensor_model_parallel_all_gather(x, dim=-1)
        assert torch.equal(g, torch.cat([(base + 5 * q).to(dt) for q in range(n)], dim=-1)), dt
    stats = dc.stats()
    assert stats["all_reduce"]["routes"] == {"engine": {"calls": 3, "bytes": 96 + 48 + 96}}, stats
    assert list(stats["all_gather"]["routes"]) == ["engine"], stats
    ps.destroy_model_parallel()
    ps.destroy_distributed_environment()
# Rank 0's creation still waits for rank 1 in tpcomm's rendezvous, on its thread, until its
# deadline (TPCOMM_TIMEOUT_MS, short here); nothing uses it. Let it end before the interpreter.
for t in threading.enumerate():
    if t.name.startswith("tpcomm set-up"):
        t.join(30)
ok()
"""


def test_a_setup_that_fails_on_one_rank_leaves_every_rank_on_vllms_own_within_5_s(tmp_path):
    out = run_group(tmp_path, SETUP_FAILS, n=2, env=dict(CPU, TPCOMM_TIMEOUT_MS="8000"))
    for rank in (0, 1):
        lines = [line for line in out.splitlines()
                 if line.startswith(f"[{rank}] ") and "tpcomm:" in line]
        assert len(lines) == 1, (rank, lines, out)
        assert ("tpcomm: vLLM's tp:0 group keeps vLLM's own communicator: vLLM's tp:0 device "
                "communicator: tpcomm's set-up failed on the group (rank 1: InvalidInputError: "
                "TPCOMM_THREADS=-5") in lines[0], lines


# The CUDA platform's answer, on the CPU platform (see the module's docstring): vLLM's own
# CudaCommunicator is the platform's class; its NCCL, FlashInfer and symmetric memory are off.
CUDA_ON_CPU = dict(CPU, VLLM_DISABLE_PYNCCL="1", VLLM_ALLREDUCE_USE_FLASHINFER="0",
                   VLLM_ALLREDUCE_USE_SYMM_MEM="0")
AS_CUDA = """
import time, torch
from vllm.platforms import current_platform
CUDA_NAME = "vllm.distributed.device_communicators.cuda_communicator.CudaCommunicator"
type(current_platform).get_device_communicator_cls = classmethod(lambda cls: CUDA_NAME)
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.distributed import parallel_state as ps
from vllm.distributed import communication_op as ops
from vllm.distributed.device_communicators.base_device_communicator import (
    DeviceCommunicatorBase)
from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator
from tpcomm.engines import TpcommCustomAllreduce, vllm_communicator
config = VllmConfig()
config_context = set_current_vllm_config(config)
config_context.__enter__()
ps.init_distributed_environment(world_size=2, rank=RANK, local_rank=RANK, backend="gloo",
    distributed_init_method=f"tcp://127.0.0.1:{os.environ['TEST_PORT']}")
ps.initialize_model_parallel(tensor_model_parallel_size=2)
tp = ps.get_tp_group()
dc = tp.device_communicator
n, r = 2, RANK
assert isinstance(dc, CudaCommunicator) and type(dc).__mro__[2] is CudaCommunicator, type(dc)
assert dc.tpcomm is not None and dc.ca_comm is dc.tpcomm_ar, (dc.tpcomm, dc.ca_comm)
"""

ELASTIC_EP = AS_CUDA + """
from torch.distributed import TCPStore
from vllm.distributed.stateless_coordinator import StatelessGroupCoordinator
# Elastic EP's DP/EP/EPLB groups: vLLM's StatelessGroupCoordinator asserts that the platform
# names exactly CudaCommunicator, then builds CudaCommunicator itself.
store = TCPStore("127.0.0.1", int(os.environ["TEST_STORE_PORT"]), 2, RANK == 0)
ep = StatelessGroupCoordinator(group_ranks=[[0, 1]], local_rank=RANK,
                               torch_distributed_backend="gloo", use_device_communicator=True,
                               coord_store=store, group_name="ep", host="127.0.0.1",
                               global_rank=RANK, global_world_size=2)
assert type(ep.device_communicator) is CudaCommunicator, type(ep.device_communicator)
# The platform's answer elsewhere is still tpcomm's; the TP group, a normal group under elastic
# EP too, is still served.
assert current_platform.get_device_communicator_cls() == vllm_communicator.QUALNAME
x = torch.arange(40, dtype=torch.float32) * (r + 1)
s = ops.tensor_model_parallel_all_reduce(x)
assert torch.equal(s, torch.arange(40, dtype=torch.float32) * 3), s
assert dc.stats()["all_reduce"]["calls"] == 1 and "engine" not in dc.stats()["all_reduce"]["routes"]
ep.destroy()
ps.destroy_model_parallel()
ps.destroy_distributed_environment()
ok()
"""


def test_elastic_eps_stateless_groups_get_the_platforms_class_and_tp_stays_tpcomms(tmp_path):
    # Who asks the platform for its class: the two constructors the plugin tells apart.
    callers = set()
    for path in Path(vllm.__file__).parent.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if "get_device_communicator_cls()" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                for f in node.body:
                    if isinstance(f, ast.FunctionDef) and \
                            "get_device_communicator_cls()" in ast.get_source_segment(text, f):
                        callers.add(f"{node.name}.{f.name}")
    assert callers == {"GroupCoordinator.__init__", "StatelessGroupCoordinator.__init__"}, callers
    run_group(tmp_path, ELASTIC_EP, n=2,
              env=dict(CUDA_ON_CPU, TEST_STORE_PORT=str(free_port())))


# --- vLLM's CUDA paths, on the CPU device ------------------------------------------------------

CUDA_PATHS = AS_CUDA + """
from vllm.distributed.parallel_state import GraphCaptureContext
# 1. The gate: what tpcomm's plan gives to NCCL goes to vLLM's own chain (CudaCommunicator's
# all_reduce: symmetric memory, quick reduce, FlashInfer, custom, pynccl...), whose custom
# all-reduce slot (ours) declines it again, consistently. Here a plan that gives 8 KiB and more
# to NCCL, as a CUDA plan does for its largest calls.
reached = []
for name in ("all_reduce", "all_gather", "reduce_scatter"):
    def spy(self, *a, _real=getattr(CudaCommunicator, name), _name=name, **k):
        reached.append(_name)
        if _name == "reduce_scatter":  # vLLM's own runs on its NCCL, off here: the base's gloo
            return DeviceCommunicatorBase.reduce_scatter(self, *a, **k)
        return _real(self, *a, **k)
    setattr(CudaCommunicator, name, spy)
asked = []
real_gate = dc.ca_comm.should_custom_ar
dc.ca_comm.should_custom_ar = lambda t: asked.append(t.numel() * t.element_size()) or real_gate(t)
real_route = dc.tpcomm.route
dc.tpcomm.route = lambda op, nbytes, dtype, mode="eager": (
    ("nccl", "nccl") if nbytes >= 8192 else real_route(op, nbytes, dtype, mode))
dc.reset_stats()
for numel in (1024, 2048, 4096):  # 4 KiB: tpcomm's; 8 and 16 KiB: the plan says NCCL
    base = torch.arange(numel, dtype=torch.float32) % 97
    x = base + 7 * r
    want = sum(base + 7 * q for q in range(n))
    assert torch.equal(ops.tensor_model_parallel_all_reduce(x), want), numel
    g = ops.tensor_model_parallel_all_gather(x.reshape(-1, 16), dim=-1)
    assert torch.equal(g, torch.cat([(base + 7 * q).reshape(-1, 16) for q in range(n)], -1))
    rs = tp.reduce_scatter(x.reshape(-1, 16), dim=0)
    assert torch.equal(rs, want.reshape(-1, 16).chunk(n, dim=0)[r]), numel
assert reached == ["all_reduce", "all_gather", "reduce_scatter"] * 2, reached
assert asked == [8192, 16384], asked  # vLLM's chain asked our slot once per declined call
for op in ("all_reduce", "all_gather", "reduce_scatter"):
    k = n if op == "all_gather" else 1  # tpcomm counts an all-gather's output
    routes = dict(dc.stats()[op]["routes"])
    assert routes.pop("engine") == {"calls": 2, "bytes": k * (8192 + 16384)}, (op, routes)
    assert sum(v["calls"] for v in routes.values()) == 1, (op, routes)
    assert sum(v["bytes"] for v in routes.values()) == k * 4096, (op, routes)
dc.ca_comm.should_custom_ar = real_gate
dc.tpcomm.route = real_route

# 2. vLLM's graph_capture() enters our capture(); no CUDA here, so no stream to capture on.
torch.cuda.current_stream = lambda *a, **k: None
registered = []
real_register = dc.tpcomm.register_graph_buffers
dc.tpcomm.register_graph_buffers = lambda: registered.append(RANK) or real_register()
with tp.graph_capture(GraphCaptureContext(None)):
    assert dc.ca_comm._IS_CAPTURING
    s = ops.tensor_model_parallel_all_reduce(torch.full((64,), float(r + 1)))
    assert torch.equal(s, torch.full((64,), 3.0))
assert registered == [RANK] and not dc.ca_comm._IS_CAPTURING, registered
# A capture that fails: vLLM's graph_capture() lets the exception out as it is (and every caller
# of it in vLLM lets it end the worker's start-up); tpcomm registers nothing for it, and the
# group still works, a later capture registering again.
class CaptureFailed(Exception):
    pass
failure = CaptureFailed(f"rank {RANK}")
try:
    with tp.graph_capture(GraphCaptureContext(None)):
        raise failure
except CaptureFailed as e:
    assert e is failure
else:
    raise AssertionError("the failed capture's exception did not come out")
assert registered == [RANK] and not dc.ca_comm._IS_CAPTURING, registered
with tp.graph_capture(GraphCaptureContext(None)):
    s = ops.tensor_model_parallel_all_reduce(torch.full((8,), 2.0 ** r))
    assert torch.equal(s, torch.full((8,), 3.0))
assert registered == [RANK, RANK], registered

# 3. Sleep mode: graphs were captured with tpcomm's calls, so suspend() keeps its communicator.
kept, kept_ca = dc.tpcomm, dc.ca_comm
dc.suspend()
assert dc.tpcomm is kept and not kept._native.closed and dc.ca_comm is kept_ca
dc.resume()
assert dc.tpcomm is kept and dc.ca_comm is kept_ca and kept_ca is dc.tpcomm_ar
s = ops.tensor_model_parallel_all_reduce(torch.full((32,), float(5 * r + 1)))
assert torch.equal(s, torch.full((32,), 7.0)), s

def another(unique_name):
    return type(dc)(cpu_group=tp.cpu_group, device=tp.device, device_group=tp.device_group,
                    unique_name=unique_name)

# 4. No graph captured: suspend() closes tpcomm's communicator (and with it its memory) and
# resume() makes it again, collectively; in between vLLM's own path serves every call.
eager = another("tp:1")
assert eager.ca_comm is eager.tpcomm_ar and eager.tpcomm is not dc.tpcomm
first = eager.tpcomm
x = torch.arange(300, dtype=torch.float32) + 1000 * r
want = sum(torch.arange(300, dtype=torch.float32) + 1000 * q for q in range(n))
assert torch.equal(eager.all_reduce(x), want)
eager.suspend()
assert eager.tpcomm is None and first._native.closed and eager.ca_comm is None
assert torch.equal(eager.all_reduce(x), want), "vLLM's own chain while asleep"
eager.resume()
assert eager.tpcomm is not None and eager.tpcomm is not first and eager.ca_comm is eager.tpcomm_ar
assert torch.equal(eager.all_reduce(x), want)
s = eager.stats()["all_reduce"]
assert s["calls"] == 3 and s["routes"]["engine"] == {"calls": 1, "bytes": 1200}, s
assert sum(v["calls"] for k, v in s["routes"].items() if k != "engine") == 2, s
eager.destroy()

# 5. vLLM's cuMem graph pool (sleep mode's): no registration, as vLLM's own custom all-reduce.
# Its flag is a property of the config, true only on a CUDA-like platform: set it so here.
pool_flag = type(config).__dict__["use_cumem_cudagraph_pool"]
type(config).use_cumem_cudagraph_pool = property(lambda self: True)
cumem = another("tp:2")
assert cumem.ca_comm is cumem.tpcomm_ar and cumem.ca_comm.register_graph_buffers is False
dc_was, tp.device_communicator = tp.device_communicator, cumem
asked_to_register = []
cumem.tpcomm.register_graph_buffers = lambda: asked_to_register.append(1) or 0
with tp.graph_capture(GraphCaptureContext(None)):
    s = ops.tensor_model_parallel_all_reduce(torch.full((16,), float(3 * r)))
    assert torch.equal(s, torch.full((16,), 3.0))
assert asked_to_register == [] and cumem.ca_comm.captures == 1, asked_to_register
tp.device_communicator = dc_was
cumem.destroy()
type(config).use_cumem_cudagraph_pool = pool_flag

# 6. VLLM_BATCH_INVARIANT: tpcomm serves the group in deterministic mode, all_reduce and
# reduce_scatter included, and takes the custom all-reduce slot (its kernels keep rank order).
os.environ["VLLM_BATCH_INVARIANT"] = "1"
invariant = another("tp:3")
del os.environ["VLLM_BATCH_INVARIANT"]
assert invariant.tpcomm.plan()["deterministic"] is True
assert invariant.ca_comm is invariant.tpcomm_ar
reached.clear()
base = torch.arange(64, dtype=torch.float32).reshape(8, 8) % 5
x = base + 2 * r
assert torch.equal(invariant.all_reduce(x), sum(base + 2 * q for q in range(n)))
assert torch.equal(invariant.reduce_scatter(x, dim=0),
                   sum(base + 2 * q for q in range(n)).chunk(n, dim=0)[r])
assert torch.equal(invariant.all_gather(x, dim=0), torch.cat([base + 2 * q for q in range(n)]))
assert reached == [], reached
st = invariant.stats()
for op in ("all_reduce", "reduce_scatter", "all_gather"):
    assert st[op]["calls"] == 1 and "engine" not in st[op]["routes"], st
invariant.destroy()
ps.destroy_model_parallel()
ps.destroy_distributed_environment()
ok()
"""


def test_on_cuda_the_gate_sends_what_tpcomm_declines_to_vllms_own_chain(tmp_path):
    out = run_group(tmp_path, CUDA_PATHS, n=2, env=CUDA_ON_CPU)
    for rank in (0, 1):
        kept = [line for line in out.splitlines()
                if line.startswith(f"[{rank}] ") and "tpcomm: sleep keeps" in line]
        assert len(kept) == 1, (rank, out)


STATS = """
import torch
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.distributed import parallel_state as ps
from vllm.distributed import communication_op as ops
with set_current_vllm_config(VllmConfig()):
    ps.init_distributed_environment(world_size=2, rank=RANK, local_rank=RANK, backend="gloo",
        distributed_init_method=f"tcp://127.0.0.1:{os.environ['TEST_PORT']}")
    ps.initialize_model_parallel(tensor_model_parallel_size=2)
    dc = ps.get_tp_group().device_communicator
    n, r = 2, RANK
    dc.reset_stats()
    total = 0
    for i in range(100):
        numel = 64 * (i % 7 + 1) + i
        base = (torch.arange(numel, dtype=torch.float32) * (i + 1)) % 53
        s = ops.tensor_model_parallel_all_reduce(base + 10 * r + i)
        want = sum(base + 10 * q + i for q in range(n))
        assert torch.equal(s, want), (i, (s - want).abs().max())
        total += 4 * numel
    for i in range(5):  # float64: vLLM's own path, counted under "engine"
        d = ops.tensor_model_parallel_all_reduce(
            torch.full((9,), 0.25 * i + r, dtype=torch.float64))
        assert torch.equal(d, torch.full((9,), 0.5 * i + 1, dtype=torch.float64)), d
    stats = dc.stats()
    ar = stats["all_reduce"]
    routes = dict(ar["routes"])
    assert routes.pop("engine") == {"calls": 5, "bytes": 5 * 72}, ar
    assert routes and all(k.startswith("shm/") for k in routes), routes  # tpcomm's CPU routes
    assert sum(v["calls"] for v in routes.values()) == 100, routes
    assert sum(v["bytes"] for v in routes.values()) == total, (routes, total)
    assert ar["calls"] == 105 and ar["bytes"] == total + 360, ar
    assert stats == dc.tpcomm_ar.stats(), "one account for the object vLLM holds and ours"
    dc.reset_stats()
    assert dc.stats()["all_reduce"] == {"calls": 0, "bytes": 0, "routes": {}}, dc.stats()
    ps.destroy_model_parallel()
    ps.destroy_distributed_environment()
ok()
"""


def test_stats_account_for_100_all_reduces_and_the_calls_left_to_vllm(tmp_path):
    run_group(tmp_path, STATS, n=2, env=CPU)


BATCH_INVARIANT = """
import numpy as np
import torch
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.distributed import parallel_state as ps
from vllm.distributed import communication_op as ops
n, r = 3, RANK

def values(rank, numel):  # float32 of mixed magnitudes: another order than rank order rounds
    g = np.random.default_rng(1000 + rank)
    return (g.standard_normal(numel) * np.exp2(g.integers(-4, 9, numel))).astype(np.float32)

def rank_order(numel, dtype):  # numpy: float32 additions in rank order, rounded once to dtype
    xs = [torch.from_numpy(values(q, numel)).to(dtype).float().numpy() for q in range(n)]
    acc = xs[0].copy()
    for x in xs[1:]:
        acc = acc + x
    return torch.from_numpy(acc).to(dtype)

with set_current_vllm_config(VllmConfig()):
    ps.init_distributed_environment(world_size=n, rank=RANK, local_rank=RANK, backend="gloo",
        distributed_init_method=f"tcp://127.0.0.1:{os.environ['TEST_PORT']}")
    os.environ["VLLM_BATCH_INVARIANT"] = "1"  # read as the TP group's communicator is made
    ps.initialize_model_parallel(tensor_model_parallel_size=n)
    del os.environ["VLLM_BATCH_INVARIANT"]
    tp = ps.get_tp_group()
    dc = tp.device_communicator
    assert dc.tpcomm is not None and dc.tpcomm.plan()["deterministic"] is True, dc.tpcomm_reason
    numel = 6000  # 24 KiB of float32, 12 KiB of 16-bit: above the tuning file's 4 KiB (vLLM's)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x = torch.from_numpy(values(r, numel)).to(dtype)
        want = rank_order(numel, dtype)
        whole = ops.tensor_model_parallel_all_reduce(x)  # vLLM gathers, tpcomm's plugin sums
        assert torch.equal(whole, want), (dtype, (whole != want).sum())
        for a, b in ((0, 500), (1234, 1999), (5999, 6000)):  # tpcomm's shm
            part = ops.tensor_model_parallel_all_reduce(x[a:b].clone())
            assert torch.equal(part, want[a:b]), (dtype, a, b)
        rows = x.reshape(n * 100, 20)
        mine = tp.reduce_scatter(rows, dim=0)
        assert torch.equal(mine, want.reshape(n * 100, 20).chunk(n, dim=0)[r]), dtype
    routes = dc.stats()["all_reduce"]["routes"]
    assert routes["engine"]["calls"] == 3, routes
    assert sum(v["calls"] for k, v in routes.items() if k.startswith("shm/")) == 9, routes
    ps.destroy_model_parallel()
    ps.destroy_distributed_environment()
ok()
"""


def test_batch_invariant_mode_gives_rank_order_bits_on_tpcomms_route_and_vllms(tmp_path):
    # Above 4 KiB the plan leaves all_reduce and reduce_scatter to vLLM (Gloo): the plugin
    # gathers through vLLM and sums in rank order, the bits tpcomm's shm gives below it.
    tuning = tmp_path / "tuning.json"
    rows = [{"max_bytes": 4096, "use": [{"backend": "shm"}]},
            {"max_bytes": None, "use": [{"backend": "gloo"}]}]
    tuning.write_text(json.dumps({"tpcomm_tuning": 1, "entries": [
        {"device": "cpu", "world_size": 3,
         "ops": {"all_reduce": rows, "reduce_scatter": rows}}]}))
    run_group(tmp_path, BATCH_INVARIANT, n=3,
              env=dict(CPU, TPCOMM_TUNING=str(tuning)))
