"""tpcomm.Communicator: a TP group's collectives on torch tensors and numpy arrays."""

import json
import math
import operator

from . import _buffers, _tpcomm
from ._rendezvous import torch_group_address

_OP_CODES = _tpcomm.OP_CODES  # name -> the library's value of the reduction
_OPS = tuple(_OP_CODES)
_NORM_TYPES = ("float32", "bfloat16", "float16")  # all_reduce_rmsnorm's
_NORM_CODES = {_buffers.CODES[name] for name in _NORM_TYPES}
# The collectives stats() counts, each always present.
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "barrier",
    "all_to_all",
    "all_to_allv",
    "gather",
    "scatter",
    "reduce",
    "send",
    "recv",
    "all_gatherv",
    "reduce_scatterv",
    "all_reduce_rmsnorm",
)


def stats_dict(rows):
    """stats()'s dict from (collective, route, calls, bytes) rows: per collective its calls, its
    bytes and its routes ("backend/algorithm", or "store" for a call through the bootstrap; the
    engines' objects add "engine" for the calls they pass to the engine's own path)."""
    return add_stats({name: {"calls": 0, "bytes": 0, "routes": {}} for name in COLLECTIVES}, rows)


def stats_rows(stats):
    """The (collective, route, calls, bytes) rows of a stats() dict."""
    for collective, entry in stats.items():
        for route, counts in entry["routes"].items():
            yield collective, route, counts["calls"], counts["bytes"]


def add_stats(out, rows):
    """Adds (collective, route, calls, bytes) rows to a stats() dict `out`; returns it."""
    for collective, route, calls, nbytes in rows:
        entry = out.setdefault(collective, {"calls": 0, "bytes": 0, "routes": {}})
        entry["calls"] += calls
        entry["bytes"] += nbytes
        here = entry["routes"].setdefault(route, {"calls": 0, "bytes": 0})
        here["calls"] += calls
        here["bytes"] += nbytes
    return out


def _seconds(timeout):
    if timeout is None:
        return 0.0  # TPCOMM_TIMEOUT_MS
    timeout = float(timeout)
    if timeout <= 0:
        raise ValueError(f"timeout must be positive seconds, got {timeout}")
    return timeout


def _threads(threads):
    """None (TPCOMM_THREADS, else the default) or an int; the library checks its range on every
    rank (InvalidInputError)."""
    if threads is None:
        return None
    if isinstance(threads, bool):
        raise TypeError("threads must be an int, got bool")
    return operator.index(threads)


def _check_op(op):
    if op not in _OPS:
        raise ValueError(f"op '{op}' is not one of {', '.join(_OPS)}")
    return op


def _reduction(v, op):
    """The code of op as the library runs it on v. A bool buffer travels as bytes of 0 and 1, so
    its sum is a logical or, run as max (as PyTorch's NCCL group runs it); min is a logical and."""
    if not v.logical:
        return _OP_CODES[op]
    if op == "avg":
        raise ValueError(
            "op 'avg' is not defined for bool (sum is a logical or, min a logical and)"
        )
    return _OP_CODES["max" if op == "sum" else op]


def _dimension(what, dim, shape):
    """dim as an index of shape (negative counts from the end, as torch); a 0-d shape takes 0."""
    rank = max(len(shape), 1)
    try:
        d = operator.index(dim)  # an int, numpy's too; not a float
    except TypeError:
        d = None
    if d is None or not -rank <= d < rank:
        raise ValueError(f"{what}: dim {dim!r} is not a dimension of shape {tuple(shape)}")
    return d % rank


def _leading(shape, d):
    """The product of the dimensions before d: 1 when only size-1 dimensions come before d, so
    that splitting d splits memory into contiguous parts."""
    n = 1
    for s in shape[:d]:
        n *= s
    return n


def _with(shape, d, size):
    return shape[:d] + (size,) + shape[d + 1 :]


class Communicator:
    """A group of ranks that agreed on a plan (tpcomm's C++ Communicator). Every call is made by
    every rank in the same order; a failure raises a tpcomm.Error subclass on every rank, and
    every later call raises tpcomm.AbortedError with the first cause. Calls from several threads
    are serialised in arrival order (the order must still match across ranks); a forked child
    cannot use an inherited communicator (docs/python.md, Threads, fork and lifetime)."""

    def __init__(self, native, device):
        self._native = native
        self.device = device
        self._cuda = device == "cuda"
        self._gpu = native.cuda_device  # -1 on a CPU communicator

    # --- creation ------------------------------------------------------------------------------

    @classmethod
    def from_env(
        cls,
        timeout=None,
        device="cpu",
        cuda_device=-1,
        threads=None,
        caller_serves_fallback=False,
        deterministic=None,
    ):
        """The group of this launch: tpcomm run, torchrun (default or --standalone rendezvous),
        mpirun or srun (see docs/python.md). `timeout` in seconds for every wait (default:
        TPCOMM_TIMEOUT_MS); device "cuda" for CUDA tensors; `threads`: the rank's team for large
        CPU calls (default: TPCOMM_THREADS, else the rank's share of its CPUs).
        caller_serves_fallback: the caller runs the calls the plan gives the fallback engine (nccl
        on cuda, gloo on cpu) itself, so tpcomm does not set it up and refuses such a call; ask
        route() first (an inference engine with its own NCCL communicator).
        deterministic: every reduction sums in rank order whatever its size or backend
        (docs/communicator.md, "Deterministic mode"); None: TPCOMM_DETERMINISTIC."""
        return cls(
            _tpcomm.Comm.from_env(
                _seconds(timeout),
                device,
                cuda_device,
                _threads(threads),
                bool(caller_serves_fallback),
                None if deterministic is None else bool(deterministic),
            ),
            device,
        )

    @classmethod
    def from_torch(
        cls,
        group=None,
        timeout=None,
        device=None,
        cuda_device=-1,
        threads=None,
        caller_serves_fallback=False,
        deterministic=None,
    ):
        """The ranks of a torch.distributed group (default: the world), after
        init_process_group. They meet through torch.distributed's store on a port of tpcomm's
        own that the kernel picks. device: default "cuda" when the group's backend is nccl;
        threads, caller_serves_fallback and deterministic as in from_env."""
        address, rank, size, host, backend = torch_group_address(group, _seconds(timeout))
        if device is None:
            device = "cuda" if backend == "nccl" else "cpu"
        try:
            native = _tpcomm.Comm.from_address(
                address.text,
                rank,
                size,
                _seconds(timeout),
                device,
                cuda_device,
                host,
                _threads(threads),
                bool(caller_serves_fallback),
                None if deterministic is None else bool(deterministic),
            )
        finally:
            address.done(rank)
        return cls(native, device)

    # --- who -----------------------------------------------------------------------------------

    @property
    def rank(self):
        return self._native.rank

    @property
    def size(self):
        return self._native.size

    @property
    def cuda_device(self):
        """The index of the GPU whose tensors and current stream the calls take (cuda_device=,
        else LOCAL_RANK modulo the visible GPUs); None on a CPU communicator."""
        return self._gpu if self._cuda else None

    @property
    def aborted(self):
        return self._native.aborted

    # --- collectives ---------------------------------------------------------------------------

    def _input(self, t, what="input", writable=False):
        v = _buffers.view(t, what, writable)
        if v.device != self.device:
            raise ValueError(
                f"{what}: a {v.device} buffer on a {self.device} communicator "
                f'(create it with device="{v.device}")'
            )
        if self._cuda and v.gpu != self._gpu:
            # The call would run on this GPU's stream over another GPU's memory.
            raise ValueError(
                f"{what}: a tensor on {v.where}, but this communicator's calls run on "
                f"cuda:{self._gpu} (one communicator per GPU; cuda_device= picks it)"
            )
        return v

    def _output(self, out, like, numel, shape, what="out"):
        if out is None:
            return _buffers.view(_buffers.empty_like(like, shape), what)
        v = _buffers.view(out, what, writable=True)
        if v.type_name != like.type_name or v.where != like.where:
            raise ValueError(
                f"{what}: {v.type_name} on {v.where}, but the input is "
                f"{like.type_name} on {like.where}"
            )
        if v.numel != numel:
            raise ValueError(
                f"{what}: {v.numel} elements (shape {v.shape}), the call writes "
                f"{numel} (shape {shape})"
            )
        return v

    def all_reduce(self, t, op="sum", out=None):
        """Reduces t over the group: in place (returns t), or into `out` (returns out)."""
        # A TP layer's call: a contiguous torch.Tensor of this communicator's device, reduced in
        # place. It builds no View, which was half the Python cost of a call (one rank, 4 KiB:
        # 1.16 against 0.71 us, of which the extension call is 0.27); anything else, and every
        # error, goes the checked way below.
        if out is None and type(t) is _buffers.TENSOR and op in _OP_CODES:
            code = _buffers.TORCH_CODES.get(t.dtype)
            if (
                code is not None
                and t.is_contiguous()
                and (t.is_cuda and t.get_device() == self._gpu if self._cuda else t.is_cpu)
            ):
                ptr = t.data_ptr()
                self._native.all_reduce(
                    ptr,
                    ptr,
                    t.numel(),
                    code,
                    _OP_CODES[op],
                    _buffers.cuda_stream(t) if self._cuda else None,
                )
                return t
        _check_op(op)
        v = self._input(t, writable=out is None)
        o = v if out is None else self._output(out, v, v.numel, v.shape)
        self._native.all_reduce(
            v.ptr, o.ptr, v.numel, v.code, _reduction(v, op), _buffers.stream_of(v)
        )
        return o.obj

    def all_reduce_rmsnorm(
        self, t, residual, weight, eps=1e-6, out=None, residual_out=None, inplace=False
    ):
        """A transformer layer's row-parallel all-reduce with the residual add and RMSNorm that
        follow it, over rows of t's last dimension: residual_out = t summed over the group plus
        residual (accumulated in float32, rounded once); out = residual_out * rsqrt(mean of its
        squares + eps) * weight (float32, rounded once), as vLLM's fused_add_rms_norm. float32,
        bfloat16 and float16; weight has t.shape[-1] elements. Returns (out, residual_out).
        residual=None: out is the norm of the sum, and residual_out (given, or None) receives
        the sum. inplace=True writes out over t and residual_out over residual (no out= or
        residual_out= then)."""
        # A decoder layer's call: contiguous CPU tensors of one norm dtype, in place or into new
        # tensors. It builds no View (about 8 us of a 4096-wide row's 11 on the 2-vCPU machine);
        # anything else, and every error, goes the checked way below.
        if (
            type(t) is _buffers.TENSOR
            and type(residual) is _buffers.TENSOR
            and type(weight) is _buffers.TENSOR
            and out is None
            and residual_out is None
            and not self._cuda
        ):
            code = _buffers.TORCH_CODES.get(t.dtype)
            shape = t.shape
            if (
                code in _NORM_CODES
                and len(shape)
                and residual.dtype == t.dtype
                and weight.dtype == t.dtype
                and residual.shape == shape
                and weight.numel() == shape[-1]
                and t.is_cpu
                and residual.is_cpu
                and weight.is_cpu
                and t.is_contiguous()
                and residual.is_contiguous()
                and weight.is_contiguous()
            ):
                o, ro = (t, residual) if inplace else (t.new_empty(shape), t.new_empty(shape))
                self._native.all_reduce_rmsnorm(
                    t.data_ptr(),
                    o.data_ptr(),
                    t.numel(),
                    code,
                    residual.data_ptr(),
                    ro.data_ptr(),
                    weight.data_ptr(),
                    shape[-1],
                    float(eps),
                    None,
                )
                return o, ro
        v = self._input(t, writable=inplace)
        if v.type_name not in _NORM_TYPES:
            raise ValueError(
                f"all_reduce_rmsnorm: {v.type_name} is not float32, bfloat16 or float16"
            )
        if not v.shape:
            raise ValueError("all_reduce_rmsnorm: a 0-d input has no rows")
        w = self._input(weight, "weight")
        if w.type_name != v.type_name or w.numel != v.shape[-1]:
            raise ValueError(
                f"weight: {w.numel} elements of {w.type_name}, but the rows hold {v.shape[-1]} "
                f"of {v.type_name}"
            )
        r = None
        if residual is not None:
            r = self._input(residual, "residual", writable=inplace)
            if r.type_name != v.type_name or r.shape != v.shape:
                raise ValueError(
                    f"residual: {r.type_name} of shape {r.shape}, but the input is "
                    f"{v.type_name} of shape {v.shape}"
                )
        if inplace:
            if out is not None or residual_out is not None:
                raise ValueError(
                    "all_reduce_rmsnorm: inplace=True writes over t and residual; "
                    "pass no out= or residual_out="
                )
            o, ro = v, r
        else:
            o = self._output(out, v, v.numel, v.shape)
            want = residual is not None or residual_out is not None
            ro = self._output(residual_out, v, v.numel, v.shape, "residual_out") if want else None
        self._native.all_reduce_rmsnorm(
            v.ptr,
            o.ptr,
            v.numel,
            v.code,
            r.ptr if r is not None else 0,
            ro.ptr if ro is not None else 0,
            w.ptr,
            v.shape[-1],
            float(eps),
            _buffers.stream_of(v),
        )
        return o.obj, (ro.obj if ro is not None else None)

    def all_gather(self, t, out=None, dim=0):
        """Every rank's t, in rank order, concatenated along dimension `dim` (as torch.cat; a 0-d
        t gives a 1-d result of size elements). Along a dimension other than the first (a TP
        layer's column-parallel output, dim=-1) the ranks' blocks are gathered whole, then
        interleaved into place: one copy of the result more, as vLLM's all_gather does."""
        v = self._input(t)
        d = 0 if dim.__class__ is int and dim == 0 else _dimension("all_gather", dim, v.shape)
        if d == 0 or _leading(v.shape, d) == 1:  # blocks lie one after another: no copy
            shape = _with(v.shape, d, self.size * v.shape[d]) if v.shape else (self.size,)
            o = self._output(out, v, v.numel * self.size, shape)
            self._native.all_gather(v.ptr, o.ptr, v.numel, v.code, _buffers.stream_of(v))
            return o.obj
        shape = _with(v.shape, d, self.size * v.shape[d])
        o = self._output(out, v, v.numel * self.size, shape)
        blocks = _buffers.view(_buffers.empty_like(v, (self.size,) + v.shape), "all_gather")
        self._native.all_gather(v.ptr, blocks.ptr, v.numel, v.code, _buffers.stream_of(v))
        # result[..., q * n + i, ...] = blocks[q][..., i, ...]: split the gathered dimension
        # into (rank, index) and copy the rank-major blocks there.
        split = v.shape[:d] + (self.size, v.shape[d]) + v.shape[d + 1 :]
        _buffers.copy_into(o, split, _buffers.moved(blocks, 0, d))
        return o.obj

    def reduce_scatter(self, t, op="sum", out=None, dim=0):
        """This rank's 1/size of the reduction of t: dimension `dim` split in rank order into
        size equal parts (as torch.chunk); with dim 0, a t whose first dimension does not divide
        gives a 1-d result. Along another dimension (dim=-1) t is first copied so that each
        rank's part is contiguous: one copy of the input more, as vLLM's reduce_scatter does."""
        _check_op(op)
        v = self._input(t)
        d = 0 if dim.__class__ is int and dim == 0 else _dimension("reduce_scatter", dim, v.shape)
        if d != 0 and v.shape[d] % self.size:
            raise ValueError(
                f"reduce_scatter: dimension {d} of shape {v.shape} has "
                f"{v.shape[d]} elements, which do not divide among {self.size} ranks"
            )
        if v.numel % self.size:
            raise ValueError(
                f"reduce_scatter: {v.numel} elements do not divide among {self.size} ranks"
            )
        if v.shape and v.shape[d] % self.size == 0:
            shape = _with(v.shape, d, v.shape[d] // self.size)
        else:
            shape = (v.numel // self.size,)
        o = self._output(out, v, v.numel // self.size, shape)
        if d != 0 and _leading(v.shape, d) != 1:
            # Rank q's part t[..., q * m:(q + 1) * m, ...] moved to the front, contiguous.
            split = v.shape[:d] + (self.size, v.shape[d] // self.size) + v.shape[d + 1 :]
            v = _buffers.contiguous_moved(v, split, d, "reduce_scatter")
        self._native.reduce_scatter(
            v.ptr, o.ptr, o.numel, v.code, _reduction(v, op), _buffers.stream_of(v)
        )
        return o.obj

    def broadcast(self, t, src=0):
        """src's t on every rank, bit for bit, in place; returns t."""
        if not 0 <= src < self.size:
            raise ValueError(f"broadcast: src {src} is not a rank of this group of {self.size}")
        v = self._input(t, "broadcast", writable=True)
        self._native.broadcast(v.ptr, v.numel, v.code, src, _buffers.stream_of(v))
        return t

    def _rows(self, v, what):
        """Elements per row of dimension 0 (a 0-d buffer has no rows to split)."""
        if not v.shape:
            raise ValueError(f"{what}: a 0-d buffer has no dimension 0 to split among ranks")
        rows = v.shape[0]
        return (v.numel // rows if rows else math.prod(v.shape[1:])), rows

    def _splits(self, splits, rows, what):
        if splits is None:
            if rows % self.size:
                raise ValueError(
                    f"{what}: {rows} rows of dimension 0 do not divide among {self.size} ranks "
                    f"(pass the split sizes)"
                )
            return [rows // self.size] * self.size
        splits = [int(n) for n in splits]
        if len(splits) != self.size or any(n < 0 for n in splits):
            raise ValueError(
                f"{what}: split sizes {splits}: expected {self.size} sizes of at least 0"
            )
        return splits

    def all_to_all(self, t, out=None, in_splits=None, out_splits=None):
        """MoE's token exchange along dimension 0: t's rows go out in size parts, part r to rank
        r (in_splits[r] rows each, or equal parts), and `out` receives part r from rank r, in
        rank order (out_splits[r] rows each, or equal). Splits may be 0; rank r's in_splits[q]
        must equal rank q's out_splits[r] (checked on every rank). Returns out."""
        v = self._input(t)
        row, rows = self._rows(v, "all_to_all")
        if in_splits is None and out_splits is None:
            self._splits(None, rows, "all_to_all")
            o = self._output(out, v, v.numel, v.shape)
            self._native.all_to_all(
                v.ptr, o.ptr, v.numel // self.size, v.code, _buffers.stream_of(v)
            )
            return o.obj
        sends = self._splits(in_splits, rows, "all_to_all in_splits")
        if sum(sends) != rows:
            raise ValueError(f"all_to_all: in_splits {sends} do not add up to the {rows} rows of t")
        receives = self._splits(out_splits, rows, "all_to_all out_splits")
        shape = (sum(receives),) + v.shape[1:]
        o = self._output(out, v, sum(receives) * row, shape)
        self._native.all_to_allv(
            v.ptr,
            [n * row for n in sends],
            o.ptr,
            [n * row for n in receives],
            v.code,
            _buffers.stream_of(v),
        )
        return o.obj

    def all_gatherv(self, t, sizes, out=None):
        """Every rank's t concatenated along dimension 0 in rank order, rank r's holding
        sizes[r] rows (any of them 0; the same sizes on every rank, compared by the library).
        Returns out."""
        v = self._input(t)
        row, rows = self._rows(v, "all_gatherv")
        sizes = self._splits(sizes, rows, "all_gatherv sizes")
        if sizes[self.rank] != rows:
            raise ValueError(
                f"all_gatherv: t has {rows} rows, sizes[{self.rank}] says {sizes[self.rank]}"
            )
        o = self._output(out, v, sum(sizes) * row, (sum(sizes),) + v.shape[1:])
        self._native.all_gatherv(
            v.ptr, o.ptr, [n * row for n in sizes], v.code, _buffers.stream_of(v)
        )
        return o.obj

    def reduce_scatterv(self, t, sizes, op="sum", out=None):
        """This rank's part of the reduction of t, whose dimension 0 is split in rank order into
        parts of sizes[r] rows (the same sizes on every rank). Returns out."""
        _check_op(op)
        v = self._input(t)
        row, rows = self._rows(v, "reduce_scatterv")
        sizes = self._splits(sizes, rows, "reduce_scatterv sizes")
        if sum(sizes) != rows:
            raise ValueError(
                f"reduce_scatterv: sizes {sizes} do not add up to the {rows} rows of t"
            )
        mine = sizes[self.rank]
        o = self._output(out, v, mine * row, (mine,) + v.shape[1:])
        self._native.reduce_scatterv(
            v.ptr, o.ptr, [n * row for n in sizes], v.code, _reduction(v, op), _buffers.stream_of(v)
        )
        return o.obj

    def gather(self, t, out=None, root=0):
        """Every rank's t, concatenated along dimension 0 in rank order, on the root (returned
        there; None elsewhere, where `out` is not touched)."""
        v = self._input(t)
        self._check_root(root, "gather")
        o = None
        if self.rank == root:
            shape = _with(v.shape, 0, self.size * v.shape[0]) if v.shape else (self.size,)
            o = self._output(out, v, v.numel * self.size, shape)
        self._native.gather(v.ptr, o.ptr if o else 0, v.numel, v.code, root, _buffers.stream_of(v))
        return o.obj if o else None

    def scatter(self, t, out, root=0):
        """The root's t split along dimension 0 into size equal parts, part r into rank r's
        `out` (which every rank passes; t is read on the root only and may be None elsewhere).
        Returns out."""
        self._check_root(root, "scatter")
        o = self._input(out, "out", writable=True)
        ptr = 0
        if self.rank == root:
            v = self._input(t)
            if v.numel != o.numel * self.size or v.type_name != o.type_name:
                raise ValueError(
                    f"scatter: t holds {v.numel} {v.type_name}, the root needs size x out's "
                    f"{o.numel} {o.type_name}"
                )
            ptr = v.ptr
        self._native.scatter(ptr, o.ptr, o.numel, o.code, root, _buffers.stream_of(o))
        return out

    def reduce(self, t, op="sum", root=0, out=None):
        """The reduction of every rank's t on the root: in place there (returns t), or into
        `out`; None elsewhere, where nothing is written."""
        _check_op(op)
        self._check_root(root, "reduce")
        v = self._input(t, writable=out is None)
        o = None
        if self.rank == root:
            o = v if out is None else self._output(out, v, v.numel, v.shape)
        self._native.reduce(
            v.ptr,
            o.ptr if o else 0,
            v.numel,
            v.code,
            _reduction(v, op),
            root,
            _buffers.stream_of(v),
        )
        return o.obj if o else None

    # --- point-to-point ---------------------------------------------------------------------

    def isend(self, t, peer, tag=0):
        """Starts sending t to rank `peer`; returns a Request whose wait() completes it (t may be
        changed after that). Not collective: only the two ranks take part; messages between
        them match in the order started, and the receive's count, dtype and tag must match."""
        v = self._input(t, "send")
        return Request(
            self,
            self._native.isend(v.ptr, v.numel, v.code, peer, tag, _buffers.stream_of(v)),
            t,
        )

    def irecv(self, t, peer=None, tag=0):
        """Starts receiving into t from rank `peer` (None: whichever rank sends first, host
        buffers only); returns a Request (wait() returns t, its `source` the sender)."""
        v = self._input(t, "recv", writable=True)
        if peer is None:
            return Request(self, self._native.irecv_any(v.ptr, v.numel, v.code, tag), t)
        return Request(
            self,
            self._native.irecv(v.ptr, v.numel, v.code, peer, tag, _buffers.stream_of(v)),
            t,
        )

    def send(self, t, peer, tag=0):
        """Sends t to rank `peer` (isend, then its wait)."""
        self.isend(t, peer, tag).wait()

    def recv(self, t, peer=None, tag=0):
        """Receives into t from rank `peer` (None: any rank); returns t."""
        return self.irecv(t, peer, tag).wait()

    def _check_root(self, root, what):
        if not 0 <= root < self.size:
            raise ValueError(f"{what}: root {root} is not a rank of this group of {self.size}")

    def barrier(self):
        """Returns once every rank has called it."""
        self._native.barrier()

    # --- registered buffers (docs/registered.md) -------------------------------------------------

    def empty(self, shape, dtype="float32"):
        """A new uninitialised buffer of `shape` in registered host memory: a torch tensor for a
        torch dtype (or a dtype name when torch is imported), else a numpy array. Collective: every
        rank calls it with the same shape and dtype, in the same order. Calls whose input is in
        it are read in place by the other ranks of the node. Release with free(). The tensor or
        array holds its memory: it stays valid after free(), close() or the communicator's
        garbage collection, as private memory, until the last view of it goes."""
        if self.device != "cpu":
            raise ValueError("empty: registered buffers are host memory, for a CPU communicator")
        return _buffers.registered_empty(self._native, shape, dtype)

    def free(self, buffer):
        """Collective, in the same order on every rank: releases what empty() returned. Peers
        no longer read it in place; its memory stays mapped, private, while the buffer (or a
        view of it) lives."""
        self._native.free(_buffers.view(buffer, "free").ptr)

    def split(self, color, key=0):
        """Every rank calls it; ranks with the same color form a new Communicator (ranked by key,
        then by rank here). A negative color takes part and gets None."""
        native = self._native.split(int(color), int(key))
        return None if native is None else Communicator(native, self.device)

    # --- plan ----------------------------------------------------------------------------------

    def plan(self):
        """The plan every rank agreed on, as the plan JSON contract (docs/plan.md)."""
        return json.loads(self._native.plan_json())

    def plan_text(self):
        """The plan as `tpcomm plan` prints it."""
        return self._native.plan_text()

    def stage_times(self):
        """Where this rank's time went in staged calls (hier), since creation: seconds per stage
        ("hier intra-node (shm)", "hier inter-node (gloo)"), waits for peers included; {} where
        the plan stages no call. Not collective."""
        return self._native.stage_times()

    def stats(self):
        """What this rank's calls carried since creation or reset_stats(), by collective:
        {"all_reduce": {"calls": n, "bytes": b, "routes": {"shm/one_shot": {"calls": n,
        "bytes": b}, ...}}, "all_gather": ..., "reduce_scatter": ..., "broadcast": ...,
        "barrier": ...}. A call counts once it completed here, under the backend that carried it
        (a fallback's where the plan's could not). Not collective; after close(), the last
        figures."""
        return stats_dict(self._native.stats())

    def reset_stats(self):
        """Starts stats() from zero on this rank (not collective)."""
        self._native.reset_stats()

    def route(self, op, nbytes, dtype="float32", mode="eager"):
        """(backend, algorithm) a call of `op` on an input of `nbytes` bytes uses; mode "graph":
        a call captured in a CUDA graph (a CUDA communicator's second size table)."""
        name = _buffers.dtype_name(dtype)
        if nbytes < 0 or nbytes % _buffers._ITEMSIZE[name]:
            raise ValueError(f"route: {nbytes} bytes is not a whole number of {name} elements")
        return self._native.route(op, int(nbytes), name, mode)

    # --- CUDA graphs (docs/gpu-graphs.md) ---------------------------------------------------------

    def register_graph_buffers(self):
        """Collective, after capturing CUDA graphs: every rank calls it, in the same order as
        its other calls. The input buffers of the calls captured since the last registration
        are shared with the peers, so that replays read them in place where the graph plan
        allows zero-copy (the others keep copying through the workspace, as captured). Returns
        how many buffers replays now read in place: 0 on a CPU communicator, which has no
        captured calls."""
        return self._native.register_graph_buffers()

    # --- lifetime ------------------------------------------------------------------------------

    def abort(self, reason="aborted from Python"):
        """Peers waiting on this rank fail promptly; later calls raise tpcomm.AbortedError."""
        self._native.abort(reason)

    def close(self):
        """Ends the communicator (its shared memory, sockets, threads; the library's
        Communicator::close). A call in flight in another thread is aborted first (it raises a
        tpcomm.Error) and waited for, with the GIL released; later calls raise ValueError "this
        communicator was closed"; rank, size, plan() and stats() stay readable. Twice is fine."""
        self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self._native.closed:
            return "<tpcomm.Communicator closed>"
        return f"<tpcomm.Communicator rank {self.rank} of {self.size} ({self.device})>"


class Request:
    """A message isend or irecv started: wait() completes it (once) and returns its buffer;
    done() says whether it was waited for. A wait progresses every message the rank started,
    so ranks that both send first do not wait for each other."""

    __slots__ = ("_comm", "_id", "_buffer", "_done", "source")

    def __init__(self, comm, request_id, buffer):
        self._comm, self._id, self._buffer, self._done = comm, request_id, buffer, False
        self.source = None  # the peer, once waited for (the sender of a receive from any rank)

    def wait(self):
        if not self._done:
            self.source = self._comm._native.wait(self._id)
            self._done = True
        return self._buffer

    def done(self):
        return self._done
