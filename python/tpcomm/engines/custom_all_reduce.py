"""TpcommCustomAllreduce: the custom all-reduce object vLLM and SGLang build per TP group
(`CAClass(group=cpu_group, device=device)`) and consult per call, served by tpcomm.

The engine asks `should_custom_ar(t)` and, if it says yes, takes `custom_all_reduce(t)`'s new
tensor; otherwise it runs its own NCCL (or symmetric-memory, ...) all-reduce. Every rank must
take the same branch, or the group deadlocks: the gate here is a pure function of the input's
bytes, its dtype and the mode (eager, or captured in a CUDA graph), which every rank of a TP
group sees alike, answered by the plan every rank agreed on (Communicator.route): tpcomm serves
what its plan gives to one of its own backends and declines what the plan gives to NCCL (or
Gloo), which the engine already runs. custom_all_reduce returns None wherever the gate says no (the engines'
own classes do the same; their callers ask the gate first). capture() is the context the
engines wrap around CUDA-graph capture: on leaving it, every rank registers the captured
buffers (Communicator.register_graph_buffers), so replays read peers' inputs in place where the
graph plan allows; an engine whose graph buffers cannot be shared (vLLM's cuMem graph pool of
sleep mode) passes register_graph_buffers=False, and the captured calls keep copying through
tpcomm's workspace. stats() accounts for its calls: the communicator's routes, plus the calls
handed back to the engine under the route "engine" (passed_on, which an engine's glue may share)."""

import contextlib
import sys

from .. import _buffers
from ..communicator import Communicator
from .passed_on import PassedOn, nbytes

# The plan's backends that the engine serves itself: the gate declines them. They are tpcomm's
# fallback engines (NCCL on CUDA, Gloo on CPU), which every engine runs of its own (vLLM's and
# SGLang's PyNccl or torch.distributed): a communicator created with caller_serves_fallback=True
# does not even set them up.
ENGINE_BACKENDS = ("nccl", "gloo")


def _torch():
    import torch

    return torch


def _device(device):
    """(torch.device, "cpu" or "cuda", CUDA index or -1) of what an engine passes as `device`:
    a torch.device, "cuda:1", "cpu", or a bare CUDA index (vLLM's int)."""
    torch = _torch()
    if isinstance(device, bool) or device is None:
        raise ValueError(
            f"device: expected a torch.device, a device string or a CUDA index, got {device!r}"
        )
    if isinstance(device, int):
        device = torch.device("cuda", device)
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device: {device!r} is not a torch device ({e})") from None
    if device.type == "cpu":
        return device, "cpu", -1
    if device.type != "cuda":
        raise ValueError(
            f"device {device}: tpcomm serves cpu and cuda devices, not "
            f"{device.type} (the engine's own all-reduce serves it)"
        )
    index = torch.cuda.current_device() if device.index is None else device.index
    return torch.device("cuda", index), "cuda", index


def _group_size(group):
    import torch.distributed as dist

    return dist.get_world_size(group)


class TpcommCustomAllreduce:
    """The custom all-reduce of one TP group, over a tpcomm.Communicator.

    group: the TP group's CPU (Gloo) torch.distributed process group, as the engines pass it
    (its ranks meet through torch.distributed's store, Communicator.from_torch). device: the
    rank's device (torch.device, "cuda:0", "cpu" or a CUDA index). max_size: bytes above which
    the gate declines (default: no limit of its own; the plan decides). comm: an existing
    Communicator of the same ranks and device to use instead of creating one (it is then not
    closed by close()). register_graph_buffers: whether capture() registers the captured buffers
    when it ends (vLLM's own flag of that name: False under its cuMem graph pool, whose buffers
    cannot be shared by IPC handles). Collective: every rank of the group creates it, in the same
    order."""

    # Plain attributes the engines read (and SGLang's cleanup writes): disabled until set up.
    disabled = True
    _IS_CAPTURING = False  # inside capture(); SGLang's fused paths read it through getattr

    def __init__(
        self, group, device, max_size=None, *, comm=None, timeout=None, register_graph_buffers=True
    ):
        self.registered_buffers = 0  # what the last capture's registration returned
        self.captures = 0  # how many times capture() was entered: graphs may hold its calls
        self.register_graph_buffers = bool(register_graph_buffers)
        # The calls handed back to the engine's own path (route "engine" in stats()); an
        # engine's glue that asks the gate itself shares its own (vLLM's device communicator).
        self.passed_on = PassedOn()
        self._fully_connected = None
        self.device, kind, index = _device(device)
        if max_size is not None and (isinstance(max_size, bool) or int(max_size) <= 0):
            raise ValueError(f"max_size: expected a positive number of bytes, got {max_size!r}")
        self.max_size = sys.maxsize if max_size is None else int(max_size)
        if comm is None:
            if group is None:
                raise ValueError(
                    "group: the TP group's CPU (Gloo) process group is needed to "
                    "create the communicator (or pass comm=)"
                )
            comm = Communicator.from_torch(group, timeout=timeout, device=kind, cuda_device=index)
            self._owned = True
        else:
            if not isinstance(comm, Communicator):
                raise ValueError(f"comm: expected a tpcomm.Communicator, got {type(comm).__name__}")
            if comm.device != kind or (kind == "cuda" and comm.cuda_device != index):
                raise ValueError(
                    f"comm: a {comm.device} communicator"
                    + (f" of cuda:{comm.cuda_device}" if comm.cuda_device is not None else "")
                    + f", but the device is {self.device}"
                )
            self._owned = False
        if group is not None and _group_size(group) != comm.size:
            raise ValueError(
                f"group: {_group_size(group)} ranks, but the communicator has {comm.size}"
            )
        self.comm = comm
        self.rank, self.world_size = comm.rank, comm.size
        self._cuda = kind == "cuda"
        self._gates = {}  # (op, nbytes, dtype, mode) -> bool: the plan does not change
        self._dtypes = {getattr(_torch(), name): name for name in _buffers.DTYPE_NAMES}
        self.disabled = False

    # --- the gate --------------------------------------------------------------------------------

    def gate(self, nbytes, dtype, mode="eager"):
        """Whether tpcomm serves an all-reduce of `nbytes` bytes of `dtype` (a name, or a torch
        dtype) in `mode` ("eager" or "graph"): the same answer on every rank, for the
        communicator's life. No for dtypes tpcomm does not reduce (float64, bool, float8...),
        above max_size, and where the plan routes the call to NCCL (or, on CPU, Gloo)."""
        return nbytes <= self.max_size and self.serves("all_reduce", nbytes, dtype, mode)

    def serves(self, op, nbytes, dtype, mode="eager"):
        """Whether tpcomm's plan keeps a call of `op` ("all_reduce", "all_gather",
        "reduce_scatter") on an input of `nbytes` bytes of `dtype` in `mode` on one of tpcomm's
        own backends: no for dtypes tpcomm does not carry and where the plan says NCCL (Gloo on
        CPU), which the engine runs itself. A pure function of its arguments (the plan is asked
        once per key)."""
        key = (op, nbytes, dtype, mode)
        answer = self._gates.get(key)
        if answer is None:
            name = dtype if isinstance(dtype, str) else self._dtypes.get(dtype)
            if name not in _buffers.DTYPE_NAMES:
                answer = False
            else:
                backend, _ = self.comm.route(op, nbytes, name, mode)
                answer = backend not in ENGINE_BACKENDS
            self._gates[key] = answer
        return answer

    def _mode(self, inp):
        """ "graph" while the tensor's stream is being captured (every rank captures the same
        graphs together), else "eager"."""
        if self._cuda and _torch().cuda.is_current_stream_capturing():
            return "graph"
        return "eager"

    def _check(self, inp, what):
        torch = _torch()
        if not isinstance(inp, torch.Tensor):
            raise TypeError(f"{what}: expected a torch.Tensor, got {type(inp).__name__}")
        if inp.device != self.device:
            raise ValueError(
                f"{what}: a tensor on {inp.device}, but this custom all-reduce serves {self.device}"
            )

    def should_custom_ar(self, inp):
        """The engines' gate: whether custom_all_reduce(inp) serves inp (see gate())."""
        if self.disabled:
            return False
        self._check(inp, "should_custom_ar")
        return self.gate(inp.numel() * inp.element_size(), inp.dtype, self._mode(inp))

    def custom_all_reduce(self, input):
        """The sum over the group of `input`, as a new tensor (the input is left as it is), or
        None where the gate says no: the engine's own all-reduce serves it then (counted under
        "engine" in stats())."""
        if self.disabled or not self.should_custom_ar(input):
            self.passed_on.add("all_reduce", nbytes(input))
            return None
        src = input if input.is_contiguous() else input.contiguous()
        out = _torch().empty_like(src)
        self.comm.all_reduce(src, out=out)
        return out

    # --- CUDA graphs -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def capture(self):
        """The context the engines put around CUDA-graph capture. On leaving it normally, every
        rank registers the buffers of the calls captured inside (a collective call), so replays
        read them in place where the graph plan allows; registered_buffers says how many. With
        register_graph_buffers=False it registers nothing (the captured calls copy through
        tpcomm's workspace, as captured). Left by an exception, it registers nothing: a rank
        whose capture failed may not reach the collective registration its peers would wait in,
        and the engines let a failed capture end the worker's start-up (docs/engines.md)."""
        self.captures += 1
        self._IS_CAPTURING = True
        try:
            yield
        finally:
            self._IS_CAPTURING = False
        if not self.disabled and self.register_graph_buffers:
            self.registered_buffers = self.comm.register_graph_buffers()

    # --- what vLLM's CudaCommunicator asks its custom all-reduce besides ----------------------

    # The NVLink multicast buffer vLLM's fused DeepSeek mHC all-reduce needs (a device pointer,
    # nonzero where it exists): tpcomm lends none, so that fusion stays off.
    mnnvl_lamport_ag_multicast_ptr = 0

    @property
    def fully_connected(self):
        """Whether every GPU of the group reaches every other over NVLink (vLLM's meaning; its
        DeepSeek V4.1 model shards a projection by tokens when so), as tpcomm's plan sees it:
        the plan admits multimem (NVSwitch multicast), or custom for more than 2 ranks (which
        needs one NVLink island or fabric). False on CPU, when disabled, and for a pair whose
        custom kernels the plan admits over PCIe as well as NVLink (the plan does not tell them
        apart; False is the answer that leaves the model's default path)."""
        if self._fully_connected is None:
            if self.disabled or not self._cuda:
                return False
            eligible = self.comm.plan()["ops"]["all_reduce"]["eligible"]
            self._fully_connected = bool(
                "multimem" in eligible or ("custom" in eligible and self.world_size > 2)
            )
        return self._fully_connected

    def custom_all_gather(self, inp):
        """None: vLLM then gathers through the group's all_gather (tpcomm's device
        communicator serves it)."""
        return None

    def custom_reduce_scatter(self, inp):
        """None: vLLM then reduce-scatters through the group's reduce_scatter."""
        return None

    # --- statistics ----------------------------------------------------------------------------

    def stats(self):
        """The communicator's stats() (Communicator.stats: calls and bytes per collective and
        route; shared with whoever shares the communicator) plus the calls handed back to the
        engine, under the route "engine"."""
        return self.passed_on.stats(self.comm)

    def reset_stats(self):
        """Starts stats() from zero on this rank (the communicator's too)."""
        self.passed_on.reset()
        if self.comm is not None and not self.comm._native.closed:
            self.comm.reset_stats()

    # --- lifetime --------------------------------------------------------------------------------

    def close(self):
        """Disables the gate; closes the communicator if this object created it. Twice is fine."""
        self.disabled = True
        if self._owned and self.comm is not None:
            self.comm.close()

    def __repr__(self):
        state = "disabled" if self.disabled else f"rank {self.rank} of {self.world_size}"
        return f"<tpcomm.engines.TpcommCustomAllreduce {state} on {self.device}>"
