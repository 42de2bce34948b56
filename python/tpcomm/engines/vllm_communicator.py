"""The device communicator vLLM builds per process group when tpcomm's plugin is loaded
(vllm_plugin.py): a subclass of the platform's own class (CudaCommunicator on CUDA,
CpuCommunicator on CPU, DeviceCommunicatorBase or a vendor's class elsewhere), made when vLLM
first asks the platform for it, that serves a TP group's all_reduce, all_gather, reduce_scatter,
all_gatherv and reduce_scatterv (dimension 0) through a tpcomm.Communicator where tpcomm's plan
keeps the call on one of its own backends, and leaves everything else (calls the plan gives to
NCCL, other dtypes, broadcast, gather, send/recv, all-to-all, other groups, other devices) to the
class it derives from (docs/engines.md, "vLLM").

vLLM constructs it as `cls(cpu_group=..., device=..., device_group=..., unique_name=...,
use_all2all=...)` inside GroupCoordinator, collectively on every rank of the group, and catches
nothing: so the constructor never raises for tpcomm's sake. Where tpcomm does not serve the group
(a device other than cpu and cuda, ROCm, a set-up that failed on any rank of the group), it is
the platform's class, unchanged, and says why once in the log. On a CUDA platform it also takes
the custom all-reduce slot (`ca_comm`) with a TpcommCustomAllreduce on the same communicator,
so that vLLM's graph_capture() enters its capture(), which registers the captured buffers with
tpcomm afterwards (not under vLLM's cuMem graph pool, as vLLM's own)."""

import inspect
import logging
import math

from ..communicator import add_stats, stats_rows
from .agreed_setup import SetupRefused, create_agreed
from .custom_all_reduce import TpcommCustomAllreduce, _device
from .log_once import log_once
from .ordered_fallback import ORDERED_DTYPES, ordered_all_reduce, ordered_reduce_scatter
from .passed_on import PassedOn, nbytes

log = logging.getLogger("tpcomm.engines.vllm")

# The groups tpcomm serves, by the first part of vLLM's unique name ("tp:0"): the tensor-parallel
# group, as for vLLM's own custom all-reduce. The others keep vLLM's own collectives.
SERVED_GROUPS = ("tp",)
# The devices tpcomm has backends for; every other device keeps the platform's class as it is.
SERVED_DEVICES = ("cpu", "cuda")

# The name vLLM resolves (resolve_obj_by_qualname): the class made for this process's platform.
QUALNAME = __name__ + ".TpcommDeviceCommunicator"

_classes = {}  # base class -> its subclass


def _log_once(level, key, message, *args):
    """One line per process and key: every group and rank would otherwise repeat it."""
    log_once(log, level, key, message, *args)


def _check_dim(what, input_, dim):
    if isinstance(dim, bool) or not isinstance(dim, int) or not -input_.dim() <= dim < input_.dim():
        raise ValueError(
            f"{what}: dim {dim!r} is not a dimension of a tensor of shape {tuple(input_.shape)}"
        )
    return dim % input_.dim()


def _stateless(group):
    """A vLLM StatelessProcessGroup (elastic EP's), unknown to torch.distributed: tpcomm's
    rendezvous goes through torch.distributed's store, so such a group keeps vLLM's own."""
    from torch.distributed.distributed_c10d import _world

    return _world.pg_map.get(group) is None


def _batch_invariant():
    """vLLM's VLLM_BATCH_INVARIANT: reductions must not depend on the batch. tpcomm then serves
    them in deterministic mode (rank order at every size and route), and sums the calls its plan
    leaves to vLLM in the same order (ordered_fallback.py)."""
    import vllm.envs as envs

    return bool(envs.VLLM_BATCH_INVARIANT)


def _register_graph_buffers():
    """vLLM's own rule (CudaCommunicator): cuMem graph buffers (sleep mode's graph pool) cannot
    be shared by IPC handles, so capture does not register them."""
    from vllm.config import get_current_vllm_config_or_none

    config = get_current_vllm_config_or_none()
    return config is None or not config.use_cumem_cudagraph_pool


class _TpcommServed:
    """The methods the subclass adds to vLLM's class (mixed in first)."""

    def _setup_tpcomm(self):
        self.tpcomm = None  # the Communicator, where this group is served
        self.tpcomm_ar = None  # a TpcommCustomAllreduce on it (vLLM's ca_comm on CUDA)
        self.tpcomm_reason = None  # why a TP group is not served, where it is not
        self.tpcomm_passed = PassedOn()  # the calls handed to the base class
        self._tpcomm_retired = []  # stats() of communicators closed by suspend()
        self._tpcomm_suspended = False
        self._tpcomm_graph_calls = False  # a call of the device communicator ran in capture
        self._tpcomm_took_ca = False
        self._tpcomm_batch_invariant = False  # VLLM_BATCH_INVARIANT, for a served group
        name = self.unique_name.split(":")[0]
        if self.world_size < 2 or name not in SERVED_GROUPS or _stateless(self.cpu_group):
            return
        reason = self._tpcomm_refusal()
        if reason is not None:
            self._tpcomm_decline(reason)
            return
        self._tpcomm_batch_invariant = _batch_invariant()
        if self._tpcomm_batch_invariant:
            _log_once(
                logging.INFO,
                "batch-invariant",
                "tpcomm: VLLM_BATCH_INVARIANT is set: tpcomm serves vLLM's TP group in "
                "deterministic mode (every sum in rank order 0..W-1, whatever the size); a "
                "reduction its plan leaves to vLLM is gathered by vLLM and summed so too",
            )
        self._tpcomm_create()

    def _tpcomm_refusal(self):
        """Why tpcomm cannot serve this TP group, known before any set-up (the same on every
        rank of the group), or None."""
        import torch

        device = self.device if self.device is not None else torch.device("cpu")
        kind = torch.device(device).type
        if kind not in SERVED_DEVICES:
            return (
                f"device {device}: tpcomm serves cpu and cuda devices, not {kind}; "
                f"{type(self).__mro__[2].__name__} serves this group"
            )
        if kind == "cuda" and getattr(torch.version, "hip", None):
            return (
                f"ROCm (torch {torch.__version__}, HIP {torch.version.hip}): tpcomm's CUDA "
                f"backends do not serve AMD GPUs; vLLM's ROCm communicators serve this group"
            )
        return None

    def _tpcomm_decline(self, reason):
        self.tpcomm = None
        self.tpcomm_ar = None
        self.tpcomm_reason = reason
        level = logging.INFO if reason.startswith("device ") else logging.WARNING
        _log_once(
            level,
            ("declined", self.unique_name, reason),
            "tpcomm: vLLM's %s group keeps vLLM's own communicator: %s",
            self.unique_name,
            reason,
        )

    def _tpcomm_create(self):
        """Creates the communicator, agreed by the group (agreed_setup.create_agreed): every
        rank ends served, or every rank keeps the base class's behaviour."""
        from ..communicator import Communicator

        device, kind, index = _device(self.device)
        group = self.cpu_group
        # vLLM runs NCCL (pynccl, or torch.distributed on its device group) and Gloo itself:
        # tpcomm sets up neither, and the gate sends the calls its plan gives them to vLLM.
        try:
            comm = create_agreed(
                group,
                lambda: Communicator.from_torch(
                    group,
                    device=kind,
                    cuda_device=index,
                    caller_serves_fallback=True,
                    deterministic=True if self._tpcomm_batch_invariant else None,
                ),
                f"vLLM's {self.unique_name} device communicator",
            )
        except SetupRefused as e:
            self._tpcomm_decline(str(e))
            return False
        self.tpcomm = comm
        self.tpcomm_reason = None
        self.tpcomm_ar = TpcommCustomAllreduce(
            group, device, comm=comm, register_graph_buffers=_register_graph_buffers()
        )
        self.tpcomm_ar.passed_on = self.tpcomm_passed  # one account: this object's stats()
        if hasattr(self, "ca_comm"):
            own = self.ca_comm
            if own is not None and own is not self.tpcomm_ar and hasattr(own, "close"):
                own.close()  # vLLM's IPC buffers: tpcomm serves the all-reduces now
            self.ca_comm = self.tpcomm_ar
            self._tpcomm_took_ca = True
        return True

    def _tpcomm_takes(self, op, input_, size=None):
        """Whether tpcomm serves this call: a served group, a tensor on the
        group's device of a dtype tpcomm carries, of a size the plan keeps off NCCL (which
        vLLM's own chain serves). A pure function of what every rank sees alike: `size`, where
        the ranks' tensors differ (all_gatherv), is one they agree on."""
        ar = self.tpcomm_ar
        if (
            self.tpcomm is None
            or ar.disabled
            or input_.device != ar.device
            or input_.dtype not in ar._dtypes
        ):
            return False
        mode = ar._mode(input_)
        size = nbytes(input_) if size is None else size
        taken = (
            ar.gate(size, input_.dtype, mode)
            if op == "all_reduce"
            else ar.serves(op, size, input_.dtype, mode)
        )
        if taken and mode == "graph":
            self._tpcomm_graph_calls = True
        return taken

    def _tpcomm_ordered(self, input_):
        """Whether a reduction handed to vLLM is summed in rank order here (batch invariance: a
        served group, a dtype deterministic mode covers)."""
        return (
            self._tpcomm_batch_invariant
            and self.tpcomm is not None
            and input_.dtype in ORDERED_DTYPES
        )

    def all_reduce(self, input_):
        """The sum over the group, as a new tensor (vLLM's custom op is out of place)."""
        if not self._tpcomm_takes("all_reduce", input_):
            self.tpcomm_passed.add("all_reduce", nbytes(input_))
            if self._tpcomm_ordered(input_):
                return ordered_all_reduce(super().all_gather, input_)
            return super().all_reduce(input_)
        src = input_.contiguous()
        out = src.new_empty(src.shape)
        self.tpcomm.all_reduce(src, out=out)
        return out

    def all_gather(self, input_, dim=-1):
        """The ranks' tensors concatenated along `dim`, in rank order."""
        d = _check_dim("all_gather", input_, dim)
        if not self._tpcomm_takes("all_gather", input_):
            # Counted as tpcomm counts an all-gather: the gathered output.
            self.tpcomm_passed.add("all_gather", nbytes(input_) * self.world_size)
            return super().all_gather(input_, dim)
        return self.tpcomm.all_gather(input_.contiguous(), dim=d)

    def reduce_scatter(self, input_, dim=-1):
        """This rank's part of the sum, `dim` split in rank order into world_size parts."""
        d = _check_dim("reduce_scatter", input_, dim)
        if input_.shape[d] % self.world_size:
            raise ValueError(
                f"reduce_scatter: dimension {d} of shape {tuple(input_.shape)} does "
                f"not divide among {self.world_size} ranks"
            )
        if not self._tpcomm_takes("reduce_scatter", input_):
            self.tpcomm_passed.add("reduce_scatter", nbytes(input_))
            if self._tpcomm_ordered(input_):
                return ordered_reduce_scatter(
                    super().all_gather,
                    input_,
                    d,
                    self.tpcomm.rank,
                    self.world_size,
                )
            return super().reduce_scatter(input_, dim)
        return self.tpcomm.reduce_scatter(input_.contiguous(), dim=d)

    def all_gatherv(self, input_, dim=0, sizes=None):
        """Rank r's tensor of sizes[r] rows along dimension 0 (any of them 0), concatenated in rank
        order (a list of tensors: each gathered so); vLLM's data-parallel MoE gathers its tokens
        so. Other dimensions, and calls tpcomm does not serve, go to vLLM's own path."""
        tensors = [input_] if not isinstance(input_, (list, tuple)) else list(input_)

        def agreed(t):  # the gathered bytes over the ranks: the same on every rank
            row = t.element_size() * math.prod(t.shape[1:])
            rows = sum(sizes) if sizes is not None else t.shape[0] * self.world_size
            return rows * row // self.world_size

        if dim != 0 or not all(
            t.dim() and self._tpcomm_takes("all_gather", t, agreed(t)) for t in tensors
        ):
            for t in tensors:
                self.tpcomm_passed.add("all_gatherv", nbytes(t) * self.world_size)
            return super().all_gatherv(input_, dim, sizes)
        out = [
            self.tpcomm.all_gather(t.contiguous())
            if sizes is None
            else self.tpcomm.all_gatherv(t.contiguous(), list(sizes))
            for t in tensors
        ]
        return out[0] if not isinstance(input_, (list, tuple)) else out

    def reduce_scatterv(self, input_, dim=-1, sizes=None):
        """This rank's sizes[rank] rows of the sum, dimension 0 split in rank order into parts of
        sizes[r] rows (without sizes: reduce_scatter). Other dimensions, and calls tpcomm does
        not serve, go to vLLM's own path."""
        d = _check_dim("reduce_scatterv", input_, dim)
        if sizes is None:
            return self.reduce_scatter(input_, dim)
        if d != 0 or not self._tpcomm_takes("reduce_scatter", input_):
            self.tpcomm_passed.add("reduce_scatterv", nbytes(input_))
            return super().reduce_scatterv(input_, dim, sizes)
        return self.tpcomm.reduce_scatterv(input_.contiguous(), list(sizes))

    # --- statistics ------------------------------------------------------------------------------

    def stats(self):
        """What this rank's all_reduce, all_gather and reduce_scatter calls carried since the
        group was made or reset_stats(): Communicator.stats()'s dict, tpcomm's routes plus the
        calls handed to vLLM's own path under the route "engine" (every call counted once)."""
        out = self.tpcomm_passed.stats(self.tpcomm)
        for retired in self._tpcomm_retired:  # communicators closed by suspend()
            add_stats(out, stats_rows(retired))
        return out

    def reset_stats(self):
        """Starts stats() from zero on this rank (not collective)."""
        self.tpcomm_passed.reset()
        self._tpcomm_retired = []
        if self.tpcomm is not None and not self.tpcomm._native.closed:
            self.tpcomm.reset_stats()

    # --- sleep mode (vLLM's suspend_device_comms / resume_device_comms) --------------------------

    def _tpcomm_in_graphs(self):
        """Whether CUDA graphs may hold tpcomm's calls: vLLM entered capture() of our custom
        all-reduce, or one of our calls ran while a stream was being captured."""
        return self._tpcomm_graph_calls or (
            self.tpcomm_ar is not None and self.tpcomm_ar.captures > 0
        )

    def suspend(self):
        """vLLM's sleep (collective: every rank of every group, the groups in the same order).
        The base class's first (NCCL's memory). Then tpcomm's device memory: where no CUDA graph
        holds tpcomm's calls, its communicator is closed (calls until resume() go to vLLM's own
        path); where graphs do, it stays as it is, since vLLM replays those graphs after waking
        without capturing them again and they read tpcomm's buffers in place (logged)."""
        super().suspend()
        if self.tpcomm is None or self._tpcomm_suspended:
            return
        if self._tpcomm_in_graphs():
            _log_once(
                logging.WARNING,
                ("suspend-kept", self.unique_name),
                "tpcomm: sleep keeps the device memory of vLLM's %s group's tpcomm "
                "communicator: CUDA graphs captured with its calls read its buffers and "
                "are replayed after waking up (run with enforce_eager, or without the "
                "plugin, for sleep to free it)",
                self.unique_name,
            )
            return
        self._tpcomm_retired.append(self.tpcomm.stats())
        self.tpcomm_ar.close()
        self.tpcomm.close()
        self.tpcomm = None
        if self._tpcomm_took_ca:
            self.ca_comm = None  # vLLM's own chain until resume()
        self._tpcomm_suspended = True

    def resume(self):
        """vLLM's wake-up (collective): tpcomm's communicator made again, agreed by the group,
        where suspend() closed it; where that fails on any rank, vLLM's own path keeps every
        call (its custom all-reduce, closed when tpcomm took over, stays off)."""
        if self._tpcomm_suspended:
            self._tpcomm_suspended = False
            if not self._tpcomm_create():
                self._tpcomm_took_ca = False
        super().resume()

    def destroy(self):
        if self.tpcomm is not None:
            self.tpcomm_ar.close()
            self.tpcomm.close()
        super().destroy()


def communicator_class(base):
    """The subclass of vLLM device communicator class `base` that tpcomm serves (made once)."""
    cls = _classes.get(base)
    if cls is not None:
        return cls

    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        self._setup_tpcomm()

    # The constructor takes what the base's does (vLLM passes keywords); inspect sees that.
    __init__.__signature__ = inspect.signature(base.__init__)
    cls = type(
        "TpcommDeviceCommunicator",
        (_TpcommServed, base),
        {
            "__init__": __init__,
            "__module__": __name__,
            "__doc__": f"{base.__name__} whose TP group's all_reduce, all_gather and "
            "reduce_scatter tpcomm serves (tpcomm.engines.vllm_communicator).",
        },
    )
    _classes[base] = cls
    return cls


def install(base_qualname):
    """Makes the subclass of the class vLLM names `base_qualname` this module's
    TpcommDeviceCommunicator, and returns its qualified name for vLLM to resolve."""
    from vllm.utils.import_utils import resolve_obj_by_qualname

    global TpcommDeviceCommunicator
    TpcommDeviceCommunicator = communicator_class(resolve_obj_by_qualname(base_qualname))
    return QUALNAME


TpcommDeviceCommunicator = None  # set by install()
