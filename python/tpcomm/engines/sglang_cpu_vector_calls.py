"""SGLang's all_gatherv and reduce_scatterv of its CPU TP group, through tpcomm (AROUND hooks on
GroupCoordinator.all_gatherv and .reduce_scatterv; docs/engines.md, "SGLang"). SGLang's own
methods need its PyNccl (a GPU): on a CPU host they fail, so a data-parallel MoE's gather of
uneven token counts had no CPU path. The group's state is the CPU all-reduce's
(sglang_cpu_all_reduce: the same communicator, created at the group's first call tpcomm serves);
what tpcomm does not carry goes to SGLang's own method, counted as passed on."""

import math

from . import sglang_cpu_all_reduce as _ar
from .passed_on import nbytes


def _state(group):
    """The group's state (made at its first call), or None where tpcomm leaves the group."""
    state = group.__dict__.get(_ar.ATTR, _ar._UNSEEN)
    return _ar._attach(group) if state is _ar._UNSEEN else state


def _agreed(t, sizes, world):
    """The gathered bytes per rank: the same on every rank, whatever its own rows."""
    row = t.element_size() * math.prod(t.shape[1:])
    rows = sum(sizes) if sizes is not None else t.shape[0] * world
    return rows * row // world


def _comm_for(group, state, tensors, op, sizes):
    """The communicator that serves the call, or None (SGLang's own path then)."""
    if state is None or state.closed or state.refused is not None:
        return None
    if not all(_ar._served(t) and t.dim() >= 1 for t in tensors):
        return None
    comm = state.comm if state.comm is not None else state.set_up(group.cpu_group)
    if comm is None:
        return None
    for t in tensors:
        size = _agreed(t, sizes, group.world_size) if op == "all_gather" else nbytes(t)
        if not state.takes(t, op, size):
            return None
    return comm


def all_gatherv(original, group, *args, **kwargs):
    """The AROUND hook on GroupCoordinator.all_gatherv(input_, sizes=None, output=None)."""
    torch = _ar._torch if _ar._torch is not None else _ar._load_torch()
    if torch.compiler.is_compiling():
        return original(group, *args, **kwargs)
    names = ("input_", "sizes", "output")
    call = dict(zip(names, args), **kwargs)
    if set(call) - set(names) or "input_" not in call:
        return original(group, *args, **kwargs)
    input_, sizes, output = call["input_"], call.get("sizes"), call.get("output")
    single = isinstance(input_, torch.Tensor)
    tensors = [input_] if single else list(input_)
    state = _state(group)
    comm = _comm_for(group, state, tensors, "all_gather", sizes)
    if comm is None:
        if state is not None:
            for t in tensors:
                state.passed_on(t, "all_gatherv")
        return original(group, *args, **kwargs)
    outs = [
        comm.all_gather(t.contiguous())
        if sizes is None
        else comm.all_gatherv(t.contiguous(), sizes)
        for t in tensors
    ]
    if output is not None and single:
        output.copy_(outs[0])
        outs[0] = output
    return outs[0] if single else outs


def reduce_scatterv(original, group, *args, **kwargs):
    """The AROUND hook on GroupCoordinator.reduce_scatterv(input_, output=None, sizes=None)."""
    torch = _ar._torch if _ar._torch is not None else _ar._load_torch()
    if torch.compiler.is_compiling():
        return original(group, *args, **kwargs)
    names = ("input_", "output", "sizes")
    call = dict(zip(names, args), **kwargs)
    if set(call) - set(names) or not isinstance(call.get("input_"), torch.Tensor):
        return original(group, *args, **kwargs)
    input_, output, sizes = call["input_"], call.get("output"), call.get("sizes")
    state = _state(group)
    comm = _comm_for(group, state, [input_], "reduce_scatter", sizes)
    if comm is None:
        if state is not None:
            state.passed_on(input_, "reduce_scatterv")
        return original(group, *args, **kwargs)
    x = input_.contiguous()
    got = comm.reduce_scatterv(x, sizes) if sizes is not None else comm.reduce_scatter(x)
    if output is not None:
        output.copy_(got.view(output.shape))
        return output
    return got
