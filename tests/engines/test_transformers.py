"""Hugging Face transformers' tensor parallelism over tpcomm (the real package,
python/requirements-transformers.txt, in .venv-transformers; docs/transformers.md): a small
Llama-shaped model made from a config with seeded weights, loaded by W = 2 CPU ranks under
`tpcomm run` with `from_pretrained(..., tp_plan="auto")` after `dist.init_process_group("tpcomm")`
(and again with `distributed_config=DistributedConfig(tp_plan="auto")`), gives the logits of the
same model loaded whole in one process within 1e-5, with autograd off and on, and tpcomm's
statistics show that it carried every all-reduce (and the all-gather) of transformers' plan, on
the route its plan gives. Not run here (no GPU): CUDA tensors."""

import re

import pytest

from conftest import run_group

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed in this interpreter: run this test "
    "under .venv-transformers (make test-engines)")
import torch  # noqa: E402  (after the skip: the venv that has transformers has torch)

W = 2
# Llama-shaped and small: 4 query heads and 2 key/value heads split over 2 ranks, an MLP width
# that divides by 2. initializer_range 0.1 (not 0.02) gives logits of order 1, so that 1e-5 is a
# real bound and not a fraction of numbers near 0.
CONFIG = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=160, max_position_embeddings=64,
              initializer_range=0.1)
SEED = 1234
INPUT_IDS = [[3, 17, 42, 99, 7, 128, 64, 5, 11, 150, 23, 77],
             [9, 1, 158, 33, 2, 86, 120, 45, 6, 71, 14, 100]]
TOLERANCE = 1e-5
# Hugging Face's hub is never asked (the model is a local directory); one OpenMP thread a rank,
# as torchrun sets it.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def make_model(path):
    """The model from CONFIG with weights drawn under SEED, saved as a checkpoint in `path`."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG)).to(torch.float32)
    model.save_pretrained(path)


def reference_logits(path):
    """The logits of one process: the same from_pretrained, without tp_plan."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        return model(torch.tensor(INPUT_IDS)).logits


TP = """
import warnings
import torch
import torch.distributed as dist
import tpcomm.torch
from torch.distributed.tensor import DTensor, Shard
from transformers import AutoModelForCausalLM, DistributedConfig

dist.init_process_group("tpcomm")   # before from_pretrained: transformers then makes no group
assert dist.get_backend() == "tpcomm"
comm = tpcomm.torch.communicator(None, "cpu")   # the world's tpcomm Communicator (collective)
ids = torch.tensor(INPUT_IDS)
reference = torch.load(os.environ["REFERENCE"])


def load(**how):
    before = comm.stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # "pass tp_plan in distributed_config"
        model = AutoModelForCausalLM.from_pretrained(os.environ["MODEL_DIR"], dtype=torch.float32,
                                                     **how)
    model.eval()
    loading = {k: c["calls"] - before[k]["calls"] for k, c in comm.stats().items()}
    print(f"rank {RANK}: from_pretrained({', '.join(how)}=...): tpcomm counted calls {loading}",
          flush=True)
    # transformers' mesh: its tp dimension spans the world, so DeviceMesh reuses the world
    # group; every group it made (the other dimensions, of one rank each) is tpcomm's too.
    tp = model._device_mesh["tp"].get_group()
    assert tp is dist.group.WORLD and tpcomm.torch.communicator(tp, "cpu") is comm
    groups = dist.distributed_c10d._world.pg_map
    assert {dist.get_backend(g) for g in groups} == {"tpcomm"}, {
        g: dist.get_backend(g) for g in groups}
    # transformers' plan for Llama (LlamaConfig.base_model_tp_plan, LlamaForCausalLM._tp_plan,
    # and the vocab-parallel input embedding it adds when a plan is set): this rank holds half
    # of each of those weights.
    layer = {"self_attn.q_proj": "colwise", "self_attn.k_proj": "colwise",
             "self_attn.v_proj": "colwise", "self_attn.o_proj": "rowwise",
             "mlp.gate_proj": "colwise", "mlp.up_proj": "colwise", "mlp.down_proj": "rowwise"}
    assert model.tp_plan == {"model.embed_tokens": "embedding_rowwise",
                             **{f"model.layers.*.{k}": v for k, v in layer.items()},
                             "lm_head": "colwise_gather_output"}, model.tp_plan
    attn, mlp = model.model.layers[0].self_attn, model.model.layers[0].mlp
    for module, dim in ((model.model.embed_tokens, 0), (attn.q_proj, 0), (attn.k_proj, 0),
                        (attn.o_proj, 1), (mlp.gate_proj, 0), (mlp.down_proj, 1),
                        (model.lm_head, 0)):
        w = module.weight
        assert isinstance(w, DTensor) and w.placements == (Shard(dim),), (module, type(w))
        assert w.to_local().shape[dim] * W == w.shape[dim], (module, w.to_local().shape, w.shape)
    return model


def counted_during(call):
    # call()'s result, and what tpcomm's statistics of this rank counted during it.
    before = comm.stats()
    result = call()
    after = comm.stats()
    counted = {}
    for collective, now in after.items():
        was = before[collective]
        routes = {}
        for route, here in now["routes"].items():
            then = was["routes"].get(route, {"calls": 0, "bytes": 0})
            if here["calls"] != then["calls"]:
                routes[route] = {k: here[k] - then[k] for k in ("calls", "bytes")}
        counted[collective] = {"calls": now["calls"] - was["calls"],
                               "bytes": now["bytes"] - was["bytes"], "routes": routes}
    return result, counted


# Which all-reduces transformers made by calling dist.all_reduce itself (the rest are DTensor's).
direct = []
_all_reduce = dist.all_reduce
def spy(*args, **kwargs):
    direct.append(kwargs.get("group"))
    return _all_reduce(*args, **kwargs)
dist.all_reduce = spy


def forward_counted(model, what, grad, want_direct):
    layers, hidden = model.config.num_hidden_layers, model.config.hidden_size
    # Per forward: one all-reduce of the hidden states per row-parallel layer (o_proj and
    # down_proj: 2 per layer) and one for the vocab-parallel embedding (each rank looks up its
    # part of the vocabulary; the parts are summed), all of one size; one all-gather of
    # lm_head's output columns.
    want_all_reduces, want_all_gathers = 2 * layers + 1, 1
    nbytes = ids.numel() * hidden * 4   # float32
    want_route = "/".join(comm.route("all_reduce", nbytes, torch.float32))
    eligible = comm.plan()["ops"]["all_reduce"]["eligible"]

    def forward():
        with torch.set_grad_enabled(grad):
            return model(ids).logits
    del direct[:]
    logits, counted = counted_during(forward)
    if isinstance(logits, DTensor):
        logits = logits.full_tensor()
    logits = logits.detach()
    diff = (logits - reference).abs().max().item()
    ar, ag = counted["all_reduce"], counted["all_gather"]
    print(f"rank {RANK}: {what}: max abs difference {diff:.3g} (largest |logit| "
          f"{reference.abs().max().item():.3g}); tpcomm counted all_reduce {ar['calls']} calls, "
          f"{ar['bytes']} bytes, routes {ar['routes']}; all_gather {ag['calls']} calls, "
          f"routes {ag['routes']} (plan for {nbytes} bytes: {want_route}, eligible {eligible})",
          flush=True)
    assert logits.shape == reference.shape, (logits.shape, reference.shape)
    assert diff <= TOLERANCE, (what, diff)
    assert len(direct) == want_direct and all(g is dist.group.WORLD for g in direct), (what, direct)
    # Every all-reduce the plan makes went through tpcomm, on the route its plan gives that size.
    assert ar["calls"] >= 2 * layers, (what, ar)
    assert ar == {"calls": want_all_reduces, "bytes": want_all_reduces * nbytes, "routes": {
        want_route: {"calls": want_all_reduces, "bytes": want_all_reduces * nbytes}}}, (what, ar)
    assert ag["calls"] == want_all_gathers, (what, ag)
    for collective, here in counted.items():
        for route in here["routes"]:
            assert route.split("/")[0] in eligible, (what, collective, route, eligible)


model = load(tp_plan="auto")
layers = model.config.num_hidden_layers
# Inference (no_grad: what generate() runs): RowwiseParallel's local path calls
# dist.all_reduce(output, group=tp) on each row-parallel output; the embedding's sum is DTensor's
# redistribute of a Partial output (torch's functional all_reduce on the same group).
forward_counted(model, "no_grad forward", grad=False, want_direct=2 * layers)
# With autograd on, every layer runs on DTensors: all of the reductions are DTensor's.
forward_counted(model, "grad forward", grad=True, want_direct=0)
# The spelling transformers asks for instead of tp_plan= (the same path inside).
model = load(distributed_config=DistributedConfig(tp_plan="auto"))
forward_counted(model, "DistributedConfig no_grad forward", grad=False, want_direct=2 * layers)
dist.destroy_process_group()
ok()
"""


def test_llama_tensor_parallel_over_tpcomm_gives_one_process_logits_and_tpcomm_carries_it(
        tmp_path):
    model_dir = tmp_path / "model"
    make_model(model_dir)
    reference = reference_logits(model_dir)
    torch.save(reference, tmp_path / "reference.pt")
    constants = f"W = {W!r}\nINPUT_IDS = {INPUT_IDS!r}\nTOLERANCE = {TOLERANCE!r}\n"
    # The ranks under `tpcomm run -n 2`, which sets what init_process_group's env:// reads.
    out = run_group(tmp_path, constants + TP, n=W, env=dict(
        OFFLINE, MODEL_DIR=str(model_dir), REFERENCE=str(tmp_path / "reference.pt")))
    print(out)
    for what in ("no_grad forward", "grad forward", "DistributedConfig no_grad forward"):
        diffs = re.findall(rf"rank \d+: {what}: max abs difference (\S+)", out)
        assert len(diffs) == W and all(float(d) <= TOLERANCE for d in diffs), (what, out)


# Expert parallelism: a small Mixtral-shaped model (8 experts, 2 per token) whose tokens travel
# between the ranks by all_to_all_single (transformers' ep_implementation="all_to_all"), which
# the tpcomm backend runs natively, on shm (docs/torch-backend.md).
MOE_CONFIG = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=160, max_position_embeddings=64,
                  num_local_experts=8, num_experts_per_tok=2, initializer_range=0.1)

EP = """
import os
import torch
import torch.distributed as dist
import tpcomm.torch
from transformers import AutoModelForCausalLM, DistributedConfig

dist.init_process_group("tpcomm")
config = DistributedConfig(tp_size=W, ep_size=W, ep_implementation="all_to_all")
model = AutoModelForCausalLM.from_pretrained(os.environ["MODEL_DIR"], dtype=torch.float32,
                                             distributed_config=config)
model.eval()
with torch.no_grad():
    logits = model(torch.tensor(INPUT_IDS)).logits
diff = (logits - torch.load(os.environ["REFERENCE"])).abs().max().item()
delegated = dist.group.WORLD._get_backend(torch.device("cpu")).delegated
stats = tpcomm.torch.communicator().stats()
moved = {k: stats[k]["calls"] for k in ("all_to_all", "all_to_allv")}
print(f"rank {dist.get_rank()}: expert-parallel forward: max abs difference {diff:.3e}, "
      f"native {moved}, delegated {delegated}", flush=True)
assert "all_to_all_single" not in delegated, delegated
assert sum(moved.values()) >= 2, stats   # dispatch and combine, per layer, on tpcomm's own
dist.destroy_process_group()
ok()
"""


def test_mixtral_expert_parallel_all_to_all_over_tpcomm_gives_one_process_logits(tmp_path):
    from transformers import MixtralConfig, MixtralForCausalLM
    model_dir = tmp_path / "model"
    torch.manual_seed(SEED)
    MixtralForCausalLM(MixtralConfig(**MOE_CONFIG)).to(torch.float32).save_pretrained(model_dir)
    torch.save(reference_logits(model_dir), tmp_path / "reference.pt")
    constants = f"W = {W!r}\nINPUT_IDS = {INPUT_IDS!r}\n"
    out = run_group(tmp_path, constants + EP, n=W, env=dict(
        OFFLINE, MODEL_DIR=str(model_dir), REFERENCE=str(tmp_path / "reference.pt")))
    print(out)
    diffs = re.findall(r"rank \d+: expert-parallel forward: max abs difference ([0-9.e+-]+)", out)
    assert len(diffs) == W and all(float(d) <= TOLERANCE for d in diffs), out
