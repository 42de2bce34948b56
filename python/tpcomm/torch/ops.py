"""tpcomm's collectives as torch.library custom ops, so that torch.compile keeps them in the
graph (fullgraph=True, no graph break) as vLLM keeps its `vllm::all_reduce`:

    torch.ops.tpcomm.all_reduce(Tensor input, str comm, str op="sum") -> Tensor
    torch.ops.tpcomm.all_gather(Tensor input, str comm, int dim=0) -> Tensor
    torch.ops.tpcomm.reduce_scatter(Tensor input, str comm, str op="sum", int dim=0) -> Tensor
    torch.ops.tpcomm.all_reduce_rmsnorm(Tensor input, Tensor? residual, Tensor weight, float eps,
                                        str comm) -> (Tensor, Tensor)
    torch.ops.tpcomm.all_reduce_rmsnorm_(Tensor(a!) input, Tensor(b!)? residual, Tensor weight,
                                         float eps, str comm) -> ()

`comm` is the name a communicator is registered under (tpcomm.torch._registry): a compiled graph
holds strings, not Python objects. The wrappers below take a tpcomm.Communicator too. Needs
torch.library.register_fake (PyTorch 2.4 or later); see docs/python.md, "torch.compile"."""

import torch

from .. import _buffers
from ..communicator import Communicator, _check_op, _dimension, _with
from . import _registry, rmsnorm_into_new_tensors

if not hasattr(torch.library, "register_fake"):
    raise ImportError(
        f"tpcomm.torch.ops needs torch.library.register_fake (PyTorch 2.4 or later) to give "
        f"torch.compile the ops' fake implementations; this is torch {torch.__version__}. The "
        f"Communicator's own calls work on any torch"
    )

__all__ = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_reduce_rmsnorm",
    "all_reduce_rmsnorm_",
    "name_of",
]

# The attribute of a Communicator that caches the name it was registered under for these ops.
_NAME_ATTRIBUTE = "_torch_ops_name"

# Defined and implemented directly on a Library (as vLLM's direct_register_custom_op does), not
# through torch.library.custom_op, whose Python dispatch adds several microseconds to every eager
# call. The Library object must live as long as the ops: a module global.
_lib = torch.library.Library("tpcomm", "FRAGMENT")

# Functional: every op returns a new tensor and never writes its input. A compiled graph is
# functionalized; an op that mutated its input would have to declare it in the schema
# (Tensor(a!)), and AOTAutograd would then copy the input back around it and forbid reusing the
# input's buffer. A functional op lets the compiler plan memory freely, and an in-place
# Communicator.all_reduce stays available to eager code that wants no new tensor.
_lib.define('all_reduce(Tensor input, str comm, str op="sum") -> Tensor')
_lib.define("all_gather(Tensor input, str comm, int dim=0) -> Tensor")
_lib.define('reduce_scatter(Tensor input, str comm, str op="sum", int dim=0) -> Tensor')
# all_reduce + residual + RMSNorm (Communicator.all_reduce_rmsnorm): the functional form returns
# (out, residual_out), residual_out the sum plus the residual (the sum alone without one). The
# in-place form, as vLLM's fused_add_rms_norm, writes out over input and residual_out over
# residual, declared in its schema (Tensor(a!)): compiled graphs functionalize it.
_lib.define(
    "all_reduce_rmsnorm(Tensor input, Tensor? residual, Tensor weight, float eps, str comm) "
    "-> (Tensor, Tensor)"
)
_lib.define(
    "all_reduce_rmsnorm_(Tensor(a!) input, Tensor(b!)? residual, Tensor weight, float eps, "
    "str comm) -> ()"
)


# --- the checks the fake implementations make (the real calls make the same ones) -------------

_DTYPES = None  # the torch dtypes the library takes, bool included (as _buffers.view takes them)


def _check_input(what, t, comm):
    """ValueError naming the cause when the Communicator would refuse t, without touching t's
    data: the fake implementations run it on fake tensors while the graph is traced."""
    global _DTYPES
    if _DTYPES is None:
        _DTYPES = {getattr(torch, name) for name in _buffers.DTYPE_NAMES + ("bool",)}
    if t.dtype not in _DTYPES:
        raise ValueError(
            f"{what}: dtype {t.dtype} is not one of "
            + ", ".join(f"torch.{n}" for n in _buffers.DTYPE_NAMES + ("bool",))
        )
    if t.device.type != comm.device:
        raise ValueError(
            f"{what}: a {t.device.type} buffer on a {comm.device} communicator "
            f'(create it with device="{t.device.type}")'
        )
    if comm.device == "cuda" and t.device.index != comm.cuda_device:
        raise ValueError(
            f"{what}: a tensor on {t.device}, but this communicator's calls run on "
            f"cuda:{comm.cuda_device}"
        )


def _check_reduction(what, t, op):
    _check_op(op)
    if op == "avg" and t.dtype == torch.bool:
        raise ValueError(
            f"{what}: op 'avg' is not defined for bool (sum is a logical or, min a logical and)"
        )


def _gathered_shape(t, dim, size):
    """The shape Communicator.all_gather returns: dimension `dim` times size (a 0-d t: (size,))."""
    shape = tuple(t.shape)
    d = _dimension("all_gather", dim, shape)
    return _with(shape, d, size * shape[d]) if shape else (size,)


def _scattered_shape(t, dim, size):
    """The shape Communicator.reduce_scatter returns, with its errors."""
    shape = tuple(t.shape)
    d = _dimension("reduce_scatter", dim, shape)
    if d != 0 and shape[d] % size:
        raise ValueError(
            f"reduce_scatter: dimension {d} of shape {shape} has {shape[d]} "
            f"elements, which do not divide among {size} ranks"
        )
    numel = t.numel()
    if numel % size:
        raise ValueError(f"reduce_scatter: {numel} elements do not divide among {size} ranks")
    if shape and shape[d] % size == 0:
        return _with(shape, d, shape[d] // size)
    return (numel // size,)


_NORM_DTYPES = None  # the torch dtypes all_reduce_rmsnorm takes


def _check_norm(input, residual, weight, comm):
    """ValueError where Communicator.all_reduce_rmsnorm would refuse its tensors (fake ones
    too: shapes, dtypes and devices only)."""
    global _NORM_DTYPES
    if _NORM_DTYPES is None:
        _NORM_DTYPES = {torch.float32, torch.bfloat16, torch.float16}
    _check_input("all_reduce_rmsnorm", input, comm)
    if input.dtype not in _NORM_DTYPES:
        raise ValueError(
            f"all_reduce_rmsnorm: {_buffers.dtype_name(input.dtype)} is not float32, bfloat16 "
            f"or float16"
        )
    if input.dim() == 0:
        raise ValueError("all_reduce_rmsnorm: a 0-d input has no rows")
    if weight.dtype != input.dtype or weight.numel() != input.shape[-1]:
        raise ValueError(
            f"weight: {weight.numel()} elements of {weight.dtype}, but the rows hold "
            f"{input.shape[-1]} of {input.dtype}"
        )
    _check_input("weight", weight, comm)
    if residual is not None:
        _check_input("residual", residual, comm)
        if residual.dtype != input.dtype or residual.shape != input.shape:
            raise ValueError(
                f"residual: {residual.dtype} of shape {tuple(residual.shape)}, but the input "
                f"is {input.dtype} of shape {tuple(input.shape)}"
            )


# --- real implementations (CPU and CUDA tensors; the Communicator checks everything) -----------
# The input is made contiguous (a compiled graph may pass any strides) and the result is always a
# new contiguous tensor, as the fake implementations say.


def _all_reduce(input, comm, op="sum"):
    c = _registry.lookup(comm)
    src = input.contiguous()
    return c.all_reduce(src, op=op, out=torch.empty_like(src))


def _all_gather(input, comm, dim=0):
    return _registry.lookup(comm).all_gather(input.contiguous(), dim=dim)


def _reduce_scatter(input, comm, op="sum", dim=0):
    return _registry.lookup(comm).reduce_scatter(input.contiguous(), op=op, dim=dim)


def _all_reduce_rmsnorm(input, residual, weight, eps, comm):
    return rmsnorm_into_new_tensors(_registry.lookup(comm), input, residual, weight, eps)


def _all_reduce_rmsnorm_(input, residual, weight, eps, comm):
    _registry.lookup(comm).all_reduce_rmsnorm(
        input, residual, weight.contiguous(), eps, inplace=True
    )


for _name, _impl in (
    ("all_reduce", _all_reduce),
    ("all_gather", _all_gather),
    ("reduce_scatter", _reduce_scatter),
    ("all_reduce_rmsnorm", _all_reduce_rmsnorm),
    ("all_reduce_rmsnorm_", _all_reduce_rmsnorm_),
):
    for _key in ("CPU", "CUDA"):
        _lib.impl(_name, _impl, _key)


# --- fake implementations: shapes, dtypes and devices only, no communication ------------------
# They look the communicator up (its size gives the shapes; a closed or unknown one is an error
# while tracing, not at the first run) and refuse what the real call would refuse.


@torch.library.register_fake("tpcomm::all_reduce", lib=_lib)
def _all_reduce_fake(input, comm, op="sum"):
    c = _registry.lookup(comm)
    _check_reduction("all_reduce", input, op)
    _check_input("all_reduce", input, c)
    return torch.empty_like(input, memory_format=torch.contiguous_format)


@torch.library.register_fake("tpcomm::all_gather", lib=_lib)
def _all_gather_fake(input, comm, dim=0):
    c = _registry.lookup(comm)
    _check_input("all_gather", input, c)
    return input.new_empty(_gathered_shape(input, dim, c.size))


@torch.library.register_fake("tpcomm::reduce_scatter", lib=_lib)
def _reduce_scatter_fake(input, comm, op="sum", dim=0):
    c = _registry.lookup(comm)
    _check_reduction("reduce_scatter", input, op)
    _check_input("reduce_scatter", input, c)
    return input.new_empty(_scattered_shape(input, dim, c.size))


@torch.library.register_fake("tpcomm::all_reduce_rmsnorm", lib=_lib)
def _all_reduce_rmsnorm_fake(input, residual, weight, eps, comm):
    _check_norm(input, residual, weight, _registry.lookup(comm))
    shape = dict(memory_format=torch.contiguous_format)
    return torch.empty_like(input, **shape), torch.empty_like(input, **shape)


@torch.library.register_fake("tpcomm::all_reduce_rmsnorm_", lib=_lib)
def _all_reduce_rmsnorm_inplace_fake(input, residual, weight, eps, comm):
    _check_norm(input, residual, weight, _registry.lookup(comm))


# --- the public wrappers -----------------------------------------------------------------------


def name_of(comm):
    """The name the ops know `comm` by: a tpcomm.Communicator is registered the first time (the
    name is kept on it); a str is taken as a registered name. Compiled code should carry the
    name (a module attribute set once), not look it up per call."""
    if isinstance(comm, str):
        return comm
    if not isinstance(comm, Communicator):
        raise ValueError(
            f"comm: a tpcomm.Communicator or the name of one, not {type(comm).__name__}"
        )
    name = getattr(comm, _NAME_ATTRIBUTE, None)
    if name is None:
        if torch.compiler.is_compiling():
            # Registering is a side effect on the registry that torch.compile cannot put in a
            # graph: it would break the graph (an error under fullgraph=True).
            raise ValueError(
                "tpcomm.torch.ops: this communicator has no name yet, and code "
                "being compiled cannot register one; call "
                "tpcomm.torch.ops.name_of(comm) once before compiling and pass "
                "the name (or call an op on comm eagerly first)"
            )
        name = _registry.register(comm)
        setattr(comm, _NAME_ATTRIBUTE, name)
    return name


def all_reduce(t, comm, op="sum"):
    """A new tensor: t reduced over comm's group (op: sum, max, min, avg); t is not written."""
    return torch.ops.tpcomm.all_reduce(t, name_of(comm), op)


def all_gather(t, comm, dim=0):
    """A new tensor: every rank's t in rank order along `dim` (as Communicator.all_gather)."""
    return torch.ops.tpcomm.all_gather(t, name_of(comm), dim)


def reduce_scatter(t, comm, op="sum", dim=0):
    """A new tensor: this rank's part of the reduction, `dim` split in rank order."""
    return torch.ops.tpcomm.reduce_scatter(t, name_of(comm), op, dim)


def all_reduce_rmsnorm(t, residual, weight, eps, comm):
    """(out, residual_out), new tensors: t summed over comm's group plus residual (None: none),
    then RMS-normalised by rows of the last dimension and scaled by weight
    (Communicator.all_reduce_rmsnorm); t and residual are not written."""
    return torch.ops.tpcomm.all_reduce_rmsnorm(t, residual, weight, eps, name_of(comm))


def all_reduce_rmsnorm_(t, residual, weight, eps, comm):
    """The in-place form: the norm over t, sum plus residual over residual (vLLM's
    fused_add_rms_norm). t and residual must be contiguous."""
    torch.ops.tpcomm.all_reduce_rmsnorm_(t, residual, weight, eps, name_of(comm))
