"""tpcomm in SGLang (the real package, python/requirements-sglang.txt, in .venv-sglang): the
plugin loads through SGLang's own loader and its hook makes SGLang's custom all-reduce dispatch
return TpcommCustomAllreduce, the GroupCoordinator of a TP group builds ours, everything SGLang
reads of it exists with the signature of SGLang's own class (and nothing that would send SGLang
down AMD AITER's paths), and a TP group of 2 CPU ranks reduces through it by SGLang's own
out-of-place dispatch ("ca"), every element checked. Not run here (no GPU): CUDA tensors,
GroupCoordinator.graph_capture() (SGLang's own code asks the CUDA driver for the current
stream), NCCL, so the gate's NCCL answer is tests/python/test_engines_dropin.py's."""

import inspect
import re
from pathlib import Path

import pytest

from conftest import run_group, run_one, same_parameters

sglang = pytest.importorskip("sglang", reason="SGLang is not installed in this interpreter: run "
                             "the engine tests under .venv-sglang (make test-engines)")

LOAD = """
import torch
from sglang.srt import plugins
from tpcomm.engines import sglang_plugin, TpcommCustomAllreduce
found = plugins.load_plugins_by_group(plugins.GENERAL_PLUGINS_GROUP)
print("found", "tpcomm" in found, found.get("tpcomm", (None,))[0] is sglang_plugin.register)
plugins.load_plugins()
from sglang.srt.distributed.device_communicators import custom_all_reduce as car
hooked = getattr(car.dispatch_custom_allreduce, "__wrapped__", None) is not None
print("hooked", hooked)
if hooked:
    for device in (torch.device("cpu"), "cuda:0", 1):
        assert car.dispatch_custom_allreduce(group=None, device=device) is TpcommCustomAllreduce
    # Another device keeps SGLang's own choice.
    mine = sglang_plugin.dispatch_custom_allreduce(lambda group, device: ("own", device),
                                                   group=None, device="xpu:0")
    assert mine == ("own", "xpu:0"), mine
ok()
"""


def test_the_plugin_loads_through_sglangs_loader_and_hooks_the_dispatch(tmp_path):
    out = run_one(tmp_path, LOAD)
    assert "found True True" in out and "hooked True" in out, out


def test_sglangs_allowlist_leaves_the_plugin_out(tmp_path):
    out = run_one(tmp_path, LOAD, env={"SGLANG_PLUGINS": "another_plugin"})
    assert "found False False" in out and "hooked False" in out, out


def test_everything_sglang_reads_of_its_custom_all_reduce_exists_with_sglangs_signature():
    from sglang.srt.distributed import parallel_state
    from sglang.srt.distributed.device_communicators.custom_all_reduce import CustomAllreduce

    from tpcomm.engines import TpcommCustomAllreduce

    source = Path(inspect.getsourcefile(parallel_state)).read_text()
    read = set(re.findall(r"ca_comm\.(\w+)", source)) | \
        set(re.findall(r"getattr\(ca_comm, \"(\w+)\"", source))
    assert {"disabled", "should_custom_ar", "custom_all_reduce", "capture"} <= read, read
    # What SGLang only calls where the object has it: AMD AITER's fused and custom
    # all-gather/reduce-scatter paths, with their own calling conventions. Ours must not have them.
    probed = set(re.findall(r"hasattr\(ca_comm, \"(\w+)\"\)", source)) - {"should_custom_ar"}
    assert {"reduce_scatter", "all_gather_reg", "custom_fused_ar_rms"} <= probed, probed
    for name in sorted(read - probed):
        assert hasattr(TpcommCustomAllreduce, name), name
        theirs = getattr(CustomAllreduce, name, None)  # None: an attribute set by __init__
        if callable(theirs):
            mine, theirs = same_parameters(getattr(TpcommCustomAllreduce, name), theirs)
            assert mine == theirs, (name, mine, theirs)
    # SGLang's shutdown (comm_cleanup.register_comm_cleanup) calls close().
    mine, theirs = same_parameters(TpcommCustomAllreduce.close, CustomAllreduce.close)
    assert mine == theirs, (mine, theirs)
    for name in sorted(probed):
        assert not hasattr(TpcommCustomAllreduce, name), name
    # GroupCoordinator: CAClass(group=self.cpu_group, device=self.device).
    inspect.signature(TpcommCustomAllreduce).bind(group=None, device="cuda:0")


GROUP = """
import torch
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.distributed import parallel_state as ps
from tpcomm.engines import TpcommCustomAllreduce
ps.init_distributed_environment(world_size=2, rank=RANK, local_rank=RANK, backend="gloo",
    distributed_init_method=f"tcp://127.0.0.1:{os.environ['TEST_PORT']}")
# The TP group as SGLang makes it, with its custom all-reduce on (no NCCL, MSCCL++ or symmetric
# memory on a CPU machine).
g = ps.init_model_parallel_group([[0, 1]], local_rank=RANK, backend="gloo", use_pynccl=False,
    use_custom_allreduce=True, use_mscclpp=False, use_torch_symm_mem_allreduce=False,
    group_name="tp")
ca = g.ca_comm
assert type(ca) is TpcommCustomAllreduce and not ca.disabled, ca
assert (ca.rank, ca.world_size, str(ca.device)) == (RANK, 2, "cpu")
n, r = 2, RANK
base = torch.arange(3000, dtype=torch.float32) % 41
for dt in (torch.float32, torch.bfloat16, torch.float16):
    x = (base + 7 * r).to(dt).reshape(30, 100)
    before = x.clone()
    assert g._resolve_outplace_all_reduce_method(x) == "ca", dt
    # The body of SGLang's out-of-place op (registered for CUDA tensors only), with the method
    # left to SGLang ("auto", as under torch.compile) and as its all_reduce picks it ("ca").
    out = g._all_reduce_out_place(x, "auto")
    assert torch.equal(out, g._all_reduce_out_place(x, "ca"))
    want = sum(base + 7 * q for q in range(n)).to(dt).reshape(30, 100)
    assert out.shape == x.shape and torch.equal(out, want), dt
    assert torch.equal(x, before), "the input is left as it is"
# float64 is not tpcomm's: SGLang's dispatch passes it on (no "ca").
assert g._resolve_outplace_all_reduce_method(torch.ones(8, dtype=torch.float64)) is None
# What graph_capture() does with it (SGLang's own graph_capture needs a CUDA driver).
with ca.capture():
    assert ca._IS_CAPTURING
    out = g._all_reduce_out_place(torch.full((64,), float(r + 1)), "ca")
    assert torch.equal(out, torch.full((64,), 3.0))
assert not ca._IS_CAPTURING and ca.registered_buffers == 0
refused(lambda: ca.should_custom_ar(torch.ones(4, device="meta")),
        "a tensor on meta, but this custom all-reduce serves cpu")
# SGLang's shutdown: close() (then disabled, as comm_cleanup does); the group falls back.
ca.close()
assert ca.disabled and g._resolve_outplace_all_reduce_method(torch.ones(8)) is None
refused(ca.comm.barrier, "this communicator was closed")
ok()
"""


def test_a_tp_group_of_two_cpu_ranks_reduces_through_sglangs_dispatch(tmp_path):
    run_group(tmp_path, GROUP, n=2)
