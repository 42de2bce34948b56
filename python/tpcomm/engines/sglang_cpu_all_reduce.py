"""SGLang's CPU TP all-reduce, served by tpcomm (docs/engines.md, "SGLang"): the plugin's AROUND
hook on GroupCoordinator.all_reduce (SGLang's HookRegistry).

SGLang reduces CPU tensors in GroupCoordinator.all_reduce before it looks at any custom
all-reduce object: in place, through its shm kernel (sgl_kernel.shm_allreduce, on AMX or arm64
hosts with LOCAL_SIZE set) or torch.distributed.all_reduce on the group's device group, and
returns the tensor. `tensor_model_parallel_all_reduce(t)` is `get_tp_group().all_reduce(t)`.

For the TP group (unique_name "tp:N") of a cpu GroupCoordinator of at least 2 ranks, all_reduce()
below sums a dense CPU tensor of a dtype tpcomm reduces in place through a tpcomm.Communicator
over the group and returns it, as SGLang's own does, where tpcomm's plan gives the call to one
of its own backends. A non-contiguous tensor goes through a contiguous copy (torch 2.14's Gloo
all_reduce, SGLang's own path where its shm kernel is not used, reduces the wrong memory of
one). The communicator is created with caller_serves_fallback=True: Gloo, tpcomm's fallback, is
SGLang's own path already. Every other call goes to SGLang's own method, counted as passed on
(route "engine"). The group's state is the GroupCoordinator's attribute `tpcomm`
(SglangCpuAllReduce: .comm, .stats(), .refused), set at its first all_reduce. On a group whose
ca_comm is tpcomm's (TPCOMM_SGLANG_TAKEOVER=1, CUDA) the hook only counts: a call SGLang's own
path carried goes under "engine" in ca_comm.stats() (SglangCustomAllreduce.count_call).

The communicator is created at the group's first call tpcomm serves: every rank of a TP group
makes the same all_reduce calls, with the same dtypes and shapes, so every rank creates it at the
same call, through create_agreed (every rank ends with it, or every rank keeps SGLang's own path
for that group from then on, with one log line naming the failure). Inside a torch.compile trace
(SGLang's CPU graph runner) the call is SGLang's own: the compiled graph keeps SGLang's
collective, and nothing is counted at trace time."""

import logging
import threading

from ..communicator import Communicator
from .agreed_setup import SetupRefused, create_agreed
from .passed_on import PassedOn, nbytes

log = logging.getLogger("tpcomm.engines")

# The GroupCoordinator attribute that holds the group's state (None: a group tpcomm leaves).
ATTR = "tpcomm"
# The groups served, by the name SGLang gives them (unique_name is "<name>:<n>").
SERVED_GROUPS = ("tp",)
# tpcomm's fallback engines, which SGLang runs of its own: the calls the plan gives them are
# SGLang's.
FALLBACK_BACKENDS = ("gloo", "nccl")

_UNSEEN = object()
_torch = None  # the torch module, once a call has come
_dtypes = {}  # the torch dtypes tpcomm reduces -> their names


class _SglangCustomAllreduce:  # replaced by the class once a call has come (_load_torch)
    pass


def _load_torch():
    global _torch, _dtypes, _SglangCustomAllreduce
    import torch

    from .. import _buffers
    from .sglang_custom_all_reduce import SglangCustomAllreduce

    _SglangCustomAllreduce = SglangCustomAllreduce

    _dtypes = {getattr(torch, name): name for name in _buffers.DTYPE_NAMES}
    _torch = torch
    return torch


class SglangCpuAllReduce:
    """tpcomm's part of one SGLang GroupCoordinator's CPU all-reduce (its attribute `tpcomm`).

    comm: the group's tpcomm.Communicator once created (None before the first call tpcomm
    serves, and after a refused set-up); refused: why the group's set-up failed (then SGLang's
    own path serves every call); stats(): the Communicator's stats() plus the calls handed to
    SGLang's own path (route "engine")."""

    def __init__(self, group_name, world_size):
        self.group_name = group_name
        self.world_size = world_size
        self.comm = None
        self.refused = None
        self.closed = False
        self._passed_on = PassedOn()
        self._takes = {}
        self._lock = threading.Lock()

    def set_up(self, cpu_group):
        """The group's communicator, created collectively (every rank calls this at the same
        call); None, on every rank, where the set-up failed on any."""
        with self._lock:
            if self.comm is None and self.refused is None and not self.closed:
                try:
                    # SGLang runs Gloo itself: tpcomm sets up none (the calls its plan gives
                    # Gloo are SGLang's, takes()).
                    self.comm = create_agreed(
                        cpu_group,
                        lambda: Communicator.from_torch(
                            cpu_group, device="cpu", caller_serves_fallback=True
                        ),
                        f"SGLang's CPU all-reduce of group {self.group_name}",
                    )
                except SetupRefused as e:
                    self.refused = str(e)
                    log.warning("%s; SGLang's own CPU all-reduce serves this group from now on", e)
            return self.comm

    def takes(self, t, op="all_reduce", size=None):
        """Whether the plan gives `op` of t (of `size` bytes, a size every rank agrees on, where
        the ranks' tensors differ) to one of tpcomm's own backends (not to Gloo, tpcomm's
        fallback, which SGLang runs itself): the same answer on every rank, cached."""
        key = (op, nbytes(t) if size is None else size, t.dtype)
        answer = self._takes.get(key)
        if answer is None:
            backend, _ = self.comm.route(op, key[1], _dtypes[t.dtype])
            answer = self._takes[key] = backend not in FALLBACK_BACKENDS
        return answer

    def passed_on(self, t, op="all_reduce"):
        if isinstance(t, _torch.Tensor):
            self._passed_on.add(op, nbytes(t))

    def stats(self):
        return self._passed_on.stats(self.comm)

    def reset_stats(self):
        self._passed_on.reset()
        if self.comm is not None and not self.closed:
            self.comm.reset_stats()

    def close(self):
        """Closes the communicator (SGLang's teardown, GroupCoordinator.destroy); later calls
        go to SGLang's own path. Twice is fine."""
        with self._lock:
            self.closed = True
            if self.comm is not None:
                self.comm.close()

    def __repr__(self):
        state = (
            "closed"
            if self.closed
            else f"refused ({self.refused})"
            if self.refused
            else "not set up"
            if self.comm is None
            else repr(self.comm)
        )
        return f"<tpcomm SGLang CPU all-reduce of {self.group_name}: {state}>"


def _attach(group):
    """The group's state, made at its first call: None for a group tpcomm leaves (not the TP
    group, one rank, or a device other than cpu)."""
    state = None
    name = getattr(group, "unique_name", "") or ""
    device = getattr(group, "device", None)
    if (
        name.split(":", 1)[0] in SERVED_GROUPS
        and getattr(group, "world_size", 1) >= 2
        and device is not None
        and _torch.device(device).type == "cpu"
    ):
        state = SglangCpuAllReduce(name, group.world_size)
    setattr(group, ATTR, state)
    return state


def _served(t):
    """Whether tpcomm reduces t: a dense CPU tensor of tpcomm's dtypes whose elements are
    distinct memory (an expanded tensor, a stride of 0, is SGLang's own)."""
    return (
        isinstance(t, _torch.Tensor)
        and t.is_cpu
        and t.dtype in _dtypes
        and t.layout == _torch.strided
        and (t.is_contiguous() or all(st != 0 or n == 1 for st, n in zip(t.stride(), t.shape)))
    )


def all_reduce(original, group, *args, **kwargs):
    """The AROUND hook on GroupCoordinator.all_reduce(input_)."""
    torch = _torch if _torch is not None else _load_torch()
    if torch.compiler.is_compiling():  # first: Dynamo traces no further than this
        return original(group, *args, **kwargs)
    state = group.__dict__.get(ATTR, _UNSEEN)
    if state is _UNSEEN:
        state = _attach(group)
    if state is None:
        ca = getattr(group, "ca_comm", None)
        if isinstance(ca, _SglangCustomAllreduce) and not ca.disabled:  # TPCOMM_SGLANG_TAKEOVER
            return ca.count_call(original, group, *args, **kwargs)
        return original(group, *args, **kwargs)
    t = args[0] if args else kwargs.get("input_")
    if len(args) + len(kwargs) != 1 or state.closed or state.refused is not None or not _served(t):
        state.passed_on(t)
        return original(group, *args, **kwargs)
    comm = state.comm if state.comm is not None else state.set_up(group.cpu_group)
    if comm is None or not state.takes(t):  # refused just now, or the plan says Gloo
        state.passed_on(t)
        return original(group, *args, **kwargs)
    if t.is_contiguous():
        comm.all_reduce(t)
    else:  # through a contiguous copy (torch's Gloo all_reduce reduces the wrong elements)
        t.copy_(comm.all_reduce(t.contiguous()))
    return t


def close_group(group):
    """Closes the group's tpcomm objects: the CPU all-reduce's communicator and a custom
    all-reduce of tpcomm's in ca_comm (SGLang's GroupCoordinator.destroy only drops them)."""
    from .custom_all_reduce import TpcommCustomAllreduce

    ca = getattr(group, "ca_comm", None)
    if isinstance(ca, TpcommCustomAllreduce):
        ca.close()
    state = group.__dict__.get(ATTR)
    if state is not None:
        state.close()
