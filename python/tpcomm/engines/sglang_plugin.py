"""tpcomm's `sglang.srt.plugins` entry point (python/engines-plugin; docs/engines.md, "SGLang").

SGLang runs every general plugin in each of its processes (sglang.srt.plugins.load_plugins: the
engine, the schedulers that own the TP workers, ...) and then applies the hooks they registered
with its HookRegistry. register() puts three AROUND hooks:

- on SGLang's custom all-reduce dispatch (`dispatch_custom_allreduce(group, device)`, whose
  result a GroupCoordinator builds as `CAClass(group=cpu_group, device=device)`): SGLang's own
  choice on every device by default. With TPCOMM_SGLANG_TAKEOVER=1, a cuda group gets
  TakeOver, which builds tpcomm's custom all-reduce agreed by the group (or, where tpcomm's
  set-up fails on any rank, SGLang's own class on every rank); the SGLang features gated on
  SGLang's own class (V2_FEATURES), which then turn off, are logged once;
- on GroupCoordinator.all_reduce: SGLang's CPU TP all-reduce, served by tpcomm, and the count
  of the calls a group with tpcomm's custom all-reduce hands to SGLang's own path
  (sglang_cpu_all_reduce);
- on GroupCoordinator.destroy: the group's tpcomm objects are closed before SGLang destroys its
  process groups (SGLang itself only drops ca_comm).

SGLang's allowlist SGLANG_PLUGINS without "tpcomm" leaves the plugin out (SGLang's loader). Set
and empty, it leaves it out too: register() then does nothing, as tpcomm does for VLLM_PLUGINS="",
where SGLang's own loader reads an empty value as "no filter"."""

import logging
import os

from .log_once import log_once

log = logging.getLogger("tpcomm.engines")

_MODULE = "sglang.srt.distributed"
DISPATCH = f"{_MODULE}.device_communicators.custom_all_reduce.dispatch_custom_allreduce"
ALL_REDUCE = f"{_MODULE}.parallel_state.GroupCoordinator.all_reduce"
ALL_GATHERV = f"{_MODULE}.parallel_state.GroupCoordinator.all_gatherv"
REDUCE_SCATTERV = f"{_MODULE}.parallel_state.GroupCoordinator.reduce_scatterv"
DESTROY = f"{_MODULE}.parallel_state.GroupCoordinator.destroy"

TAKEOVER = "TPCOMM_SGLANG_TAKEOVER"

# What turns off in SGLang 0.5.23 where a TP group's ca_comm is not SGLang's CustomAllReduceV2:
# (the module that holds the gate, the feature). Every `isinstance(..., CustomAllReduceV2)` gate
# of the package is here (tests/engines/test_sglang.py checks it against the installed SGLang),
# and the gate that reads attributes only CustomAllReduceV2 has (ca_comm.obj, .has_multicast).
V2_FEATURES = (
    (
        "sglang.srt.layers.dp_attention",
        "the DP-attention SUM_LEN gather (one TP all-reduce of the summed decode buffer)",
    ),
    ("sglang.srt.layers.communication.k3_ar_fusion", "K3 all-reduce + residual fusion"),
    (
        "sglang.srt.layers.communication.k3_sp_collective",
        "K3 sequence-parallel MoE collectives (MNNVL reduce-scatter/all-gather)",
    ),
    (
        "sglang.srt.layers.moe.qwen4_decode",
        "Qwen4 single-token decode MoE (finalize + shared gate + TP4 collective)",
    ),
    ("sglang.srt.models.beam", "the Beam model's fused MoE all-reduce"),
    (
        "sglang.srt.layers.communication.muse_spark_gemm_ag",
        "Muse Spark GEMM + all-gather push workspace",
    ),
    (
        "sglang.kernels.ops.communication.muse_spark_all_gather",
        "Muse Spark multicast GEMM all-gather",
    ),
    (
        "sglang.kernels.ops.communication.muse_spark_all_gather_norm_residual",
        "Muse Spark all-gather + FFN norm-residual fusion",
    ),
    (
        "sglang.srt.models.muse_spark",
        "Muse Spark MoE finalize + all-reduce fusion (SGLANG_ENABLE_MUSE_SPARK_FINALIZE_AR)",
    ),
    (
        "sglang.srt.layers.quantization.mxfp4_flashinfer_trtllm_moe",
        "the mxfp4 MoE fused finalize + shared-expert add + TP all-reduce, and the layer-boundary "
        "all-reduce + residual + RMSNorm fusions on its push plane",
    ),
    ("sglang.srt.distributed.device_communicators.vocab_gather", "the NVLink vocab gather"),
)


def _once(key, level, message, *args):
    log_once(log, level, key, message, *args)


def takeover():
    """Whether TPCOMM_SGLANG_TAKEOVER asks tpcomm to replace SGLang's custom all-reduce on CUDA
    ("1"; "0" or unset: no). Another value keeps SGLang's own, with a warning (once)."""
    value = os.environ.get(TAKEOVER, "")
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    _once(
        ("bad", value),
        logging.WARNING,
        "tpcomm: %s=%r is not 0 or 1; SGLang keeps its own custom all-reduce",
        TAKEOVER,
        value,
    )
    return False


def _features_line():
    return "; ".join(feature for _, feature in V2_FEATURES)


class TakeOver:
    """What the dispatch returns for a cuda group under TPCOMM_SGLANG_TAKEOVER=1. SGLang calls it
    as it calls its own class, `CAClass(group=cpu_group, device=device)`. Every rank of the group
    creates a TpcommCustomAllreduce (`builds`: SglangCustomAllreduce, over a communicator of its
    own that leaves NCCL to SGLang) through create_agreed, and the first one a process builds
    logs the features that turn off. Where the set-up fails on any rank, every rank logs one
    line naming the failure and builds the class SGLang's own dispatch chooses
    (CustomAllReduceV2, ...), so the group keeps SGLang's own custom all-reduce, agreed
    (SGLang's own try/except around the constructor decides per rank)."""

    def __init__(self, own_dispatch, args, kwargs):
        from .sglang_custom_all_reduce import SglangCustomAllreduce

        self.builds = SglangCustomAllreduce
        self._own = own_dispatch
        self._args, self._kwargs = args, kwargs

    def __call__(self, group, device, **kwargs):
        from sglang.srt.environ import envs

        from .agreed_setup import SetupRefused, create_agreed

        ours = dict(kwargs)
        if envs.SGLANG_MEMORY_SAVER_CUDA_GRAPH.get():
            # SGLang's own classes register no graph inputs under its memory saver's cuMem
            # graph pool (cuMem buffers cannot be shared by IPC handles): neither does ours.
            ours["register_graph_buffers"] = False
        try:
            made = create_agreed(
                group,
                lambda: self.builds(group=group, device=device, **ours),
                "SGLang's custom all-reduce (TPCOMM_SGLANG_TAKEOVER=1)",
            )
        except SetupRefused as e:
            log.warning("%s; SGLang's own custom all-reduce serves this group", e)
            return self._own(*self._args, **self._kwargs)(group=group, device=device, **kwargs)
        _once(
            "takeover",
            logging.WARNING,
            "tpcomm: %s=1: tpcomm's custom all-reduce replaces SGLang's CustomAllReduceV2; "
            "these SGLang features, which need SGLang's own class, turn off: %s",
            TAKEOVER,
            _features_line(),
        )
        return made

    def __repr__(self):
        return f"<tpcomm.engines.sglang_plugin.TakeOver building {self.builds.__name__}>"


def dispatch_custom_allreduce(original, *args, **kwargs):
    """The AROUND hook: SGLang's dispatch(group, device) -> what the GroupCoordinator builds."""
    if not takeover():
        return original(*args, **kwargs)
    import torch

    device = kwargs["device"] if "device" in kwargs else args[1]
    kind = "cuda" if isinstance(device, int) else torch.device(device).type
    if kind != "cuda":  # CPU: SGLang's CPU all-reduce never asks ca_comm (sglang_cpu_all_reduce)
        return original(*args, **kwargs)
    return TakeOver(original, args, kwargs)


def destroy(original, group, *args, **kwargs):
    """The AROUND hook on GroupCoordinator.destroy(): tpcomm's objects of the group are closed
    first, while the group's process groups still exist; then SGLang's own teardown."""
    from . import sglang_cpu_all_reduce

    try:
        sglang_cpu_all_reduce.close_group(group)
    except Exception:
        log.exception(
            "tpcomm: closing the communicators of SGLang group %s failed",
            getattr(group, "unique_name", "?"),
        )
    return original(group, *args, **kwargs)


def register():
    if os.environ.get("SGLANG_PLUGINS") == "":
        log.info("tpcomm: SGLANG_PLUGINS is set and empty: the tpcomm plugin does nothing")
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from . import sglang_cpu_all_reduce, sglang_cpu_vector_calls

    HookRegistry.register(DISPATCH, dispatch_custom_allreduce, HookType.AROUND)
    HookRegistry.register(ALL_REDUCE, sglang_cpu_all_reduce.all_reduce, HookType.AROUND)
    HookRegistry.register(ALL_GATHERV, sglang_cpu_vector_calls.all_gatherv, HookType.AROUND)
    HookRegistry.register(REDUCE_SCATTERV, sglang_cpu_vector_calls.reduce_scatterv, HookType.AROUND)
    HookRegistry.register(DESTROY, destroy, HookType.AROUND)
