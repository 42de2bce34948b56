"""The torch.distributed backend "tpcomm": a Python subclass of torch's C10D Backend (torch's
PyBackend trampoline), so it ties tpcomm to no PyTorch C++ ABI, and it stands beside another
backend in the mixed form ("cpu:gloo,cuda:tpcomm"). Each collective runs on a tpcomm
Communicator made for the group on its first call per device: one for CPU tensors, one per GPU.
Every rank of a group makes the same calls in the same order, so every rank makes it at the same
call."""

import datetime
import os
import threading

import torch
import torch.distributed as dist

from .. import _buffers, _tpcomm
from .._rendezvous import PublishedAddress, _host_for_store
from ..communicator import Communicator
from . import _registry
from ._work import DoneWork, MessageWork

_C10dBackend = torch._C._distributed_c10d.Backend
_C10dGloo = torch._C._distributed_c10d.ProcessGroupGloo
_STRIDED = torch.strided
_NATIVE_DTYPES = frozenset([getattr(torch, name) for name in _buffers.DTYPE_NAMES] + [torch.bool])

_OPS = (
    (dist.ReduceOp.SUM, "sum"),
    (dist.ReduceOp.AVG, "avg"),
    (dist.ReduceOp.MIN, "min"),
    (dist.ReduceOp.MAX, "max"),
)

# The c10d calls tpcomm has no native path for: each runs on the gloo backend the group makes
# beside tpcomm's at its creation (_delegate below), so a valid call is served, never refused.
_DELEGATED = (
    "gather_into_tensor",
    "gather_single",
    "allreduce_sparse",
)


# ReduceOp's type -> tpcomm's name: one dict lookup per call.
_OP_BY_TYPE = {getattr(known, "op", known): name for known, name in _OPS}


def _op_name(opts):
    """tpcomm's name of the call's reduction, or None for one tpcomm does not have (PRODUCT,
    PREMUL_SUM, the bitwise ones): such a call is delegated."""
    name = _OP_BY_TYPE.get(getattr(opts.reduceOp, "op", None))
    if name is not None:
        return name
    for known, name in _OPS:
        if opts.reduceOp == known:
            return name
    return None


def _native(tensors, op="sum"):
    """Whether tpcomm carries these tensors (dense, of a dtype it has) with reduction `op`."""
    if op is None:
        return False
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.layout is not _STRIDED:
            return False
        if t.dtype not in _NATIVE_DTYPES:
            return False
    return True


def _seconds(timeout):
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return None if timeout is None else float(timeout)


def _delegate(name):
    def method(self, *args):
        return self._delegated_call(name, *args)

    method.__name__ = name
    return method


class TpcommBackend(_C10dBackend):
    """Created by torch.distributed for a group whose backend is "tpcomm" (register() below)."""

    def __init__(self, store, rank, size, timeout, group_id, global_ranks, deterministic=None):
        super().__init__(rank, size)
        # Deterministic mode: the option torch passes (init_process_group's pg_options with a
        # `deterministic` attribute), else TPCOMM_DETERMINISTIC. A floating-point reduction
        # tpcomm does not run itself is then refused, never handed to gloo (whose sum is not in
        # rank order).
        if deterministic is None:
            deterministic = os.environ.get("TPCOMM_DETERMINISTIC", "0") == "1"
        self._deterministic = bool(deterministic)
        self._store, self._rank, self._size = store, rank, size
        self._timeout_s = _seconds(timeout)
        self._group_id = group_id
        self._first_global = global_ranks[0] if global_ranks else 0
        self._comms = {}  # "cpu" / "cuda:N" -> Communicator
        self._lock = threading.Lock()
        # The gloo backend of the same ranks for the calls tpcomm has no native path for, made
        # now: every rank creates the group together, while a delegated call (send, recv) may be
        # made by some ranks only. Its keys live under a prefix of the group's store.
        self._gloo = _C10dGloo(dist.PrefixStore("tpcomm/gloo/", store), rank, size, timeout)
        self.delegated = {}  # c10d call -> calls delegated to gloo

    # --- torch's questions ------------------------------------------------------------------

    def getBackendName(self):
        return "tpcomm"

    def name(self):
        return "tpcomm"

    # torch's Backend reads these through the Python subclass (PyBackend looks the property up
    # by name; without them here the lookup finds the C++ property, which asks the subclass
    # again: a RecursionError in _abort_process_group and batch_isend_irecv).

    @property
    def supports_coalescing(self):
        return False  # the coalesced forms run one call per tensor, below

    @property
    def _supports_time_estimate(self):
        return False

    @property
    def supports_splitting(self):
        return False

    @property
    def supports_shrinking(self):
        return False

    @property
    def supports_reconfigure(self):
        return False

    @property
    def supports_window(self):
        return False

    @property
    def options(self):
        timeout = datetime.timedelta(seconds=self._timeout_s or 1800)
        return _C10dBackend.Options("tpcomm", timeout)

    # --- the group's communicators ----------------------------------------------------------

    def _comm(self, tensor, what):
        if tensor.__class__ is torch.Tensor and tensor.is_cpu and tensor.layout is _STRIDED:
            comm = self._comms.get("cpu")  # the common case, unlocked
            if comm is not None:
                return comm
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"tpcomm backend: {what} takes tensors, not {type(tensor).__name__}")
        if tensor.layout is not _STRIDED:
            raise ValueError(
                f"tpcomm backend: {what} of a tensor of layout {tensor.layout}: "
                "tpcomm serves dense tensors (layout torch.strided); pass "
                "t.to_dense(), or use a gloo group for sparse tensors"
            )
        device = tensor.device
        if device.type not in ("cpu", "cuda"):
            raise ValueError(
                f"tpcomm backend: {what} on a {device.type} tensor; tpcomm serves "
                "cpu and cuda tensors"
            )
        key = "cpu" if device.type == "cpu" else f"cuda:{device.index}"
        with self._lock:
            comm = self._comms.get(key)
            if comm is None:
                comm = self._create(key, device)
                self._comms[key] = comm
        return comm

    def _create(self, key, device):
        """The group's communicator for `device`: rank 0 serves tpcomm's store on a port the
        kernel picks and publishes its address in the group's torch store; the others read it."""
        store_key = f"tpcomm/backend/{key}"
        host = None
        if self._rank == 0:
            host = _tpcomm.StoreHost(_host_for_store(self._first_global))
            self._store.set(store_key, host.address)
            text = host.address
        else:
            wait = self._timeout_s or 60.0
            try:
                self._store.wait([store_key], datetime.timedelta(seconds=wait))
            except RuntimeError as e:
                raise _tpcomm.TimeoutError(
                    f"tpcomm backend: rank 0 of group {self._group_id} did not publish tpcomm's "
                    f"store address within {wait:g} s: {e}"
                ) from None
            text = self._store.get(store_key).decode()
        kind = device.type
        gpu = -1 if kind == "cpu" else device.index
        try:
            native = _tpcomm.Comm.from_address(
                text,
                self._rank,
                self._size,
                self._timeout_s,
                kind,
                gpu,
                host,
                deterministic=self._deterministic,
            )
        finally:
            PublishedAddress(self._store, store_key, text).done(self._rank)
        comm = Communicator(native, kind)
        _registry.register(comm, f"{self._group_id}/{key}")
        return comm

    def communicator(self, device="cpu"):
        """The tpcomm Communicator this group's calls on `device` run on (made on first use:
        collective)."""
        return self._comm(torch.empty(0, device=device), "communicator")

    # --- collectives ------------------------------------------------------------------------

    def _count_delegated(self, name):
        self.delegated[name] = self.delegated.get(name, 0) + 1

    def _delegated_call(self, name, *args):
        self._count_delegated(name)
        return getattr(self._gloo, name)(*args)

    def _delegated_reduction(self, name, tensors, opts, *args):
        """A reduction tpcomm does not run (its dtype or op), handed to gloo; in deterministic
        mode refused when its tensors are floating point (integers sum exactly in any order)."""
        if self._deterministic and any(t.is_floating_point() for t in tensors):
            dtypes = sorted({str(t.dtype) for t in tensors})
            raise ValueError(
                f"tpcomm backend in deterministic mode: {name} of {', '.join(dtypes)} with op "
                f"{opts.reduceOp} would go to gloo, whose sum is not in rank order; refused "
                f"(tpcomm itself reduces float32, bfloat16 and float16 with sum, avg, max, min)"
            )
        return self._delegated_call(name, *args)

    def allreduce(self, tensors, opts):
        op = _op_name(opts)
        if not _native(tensors, op):
            return self._delegated_reduction("allreduce", tensors, opts, tensors, opts)
        for t in tensors:
            self._comm(t, "all_reduce").all_reduce(t, op)
        return DoneWork(tensors)

    def allgather(self, output_lists, inputs, opts):
        if not _native(inputs) or any(
            o.shape != t.shape for outs, t in zip(output_lists, inputs) for o in outs
        ):
            return self._delegated_call("allgather", output_lists, inputs, opts)
        for outs, t in zip(output_lists, inputs):
            if len(outs) != self._size:
                raise ValueError(
                    f"tpcomm backend: all_gather into {len(outs)} tensors, the "
                    f"group has {self._size} ranks"
                )
            gathered = self._comm(t, "all_gather").all_gather(t.contiguous().reshape(-1))
            for out, part in zip(outs, gathered.chunk(self._size)):
                out.copy_(part.view(out.shape))
        return DoneWork(output_lists)

    def all_gather_single(self, output, input, opts):
        if not _native([output, input]):
            return self._delegated_call("all_gather_single", output, input, opts)
        self._comm(input, "all_gather_into_tensor").all_gather(input.contiguous(), out=output)
        return DoneWork([output])

    _allgather_base = all_gather_single

    def reduce_scatter_single(self, output, input, opts):
        op = _op_name(opts)
        if not _native([output, input], op):
            return self._delegated_reduction(
                "reduce_scatter_single", [output, input], opts, output, input, opts
            )
        self._comm(input, "reduce_scatter_tensor").reduce_scatter(
            input.contiguous(), op, out=output
        )
        return DoneWork([output])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter(self, outputs, input_lists, opts):
        op = _op_name(opts)
        if not _native(outputs, op):
            return self._delegated_reduction(
                "reduce_scatter", outputs, opts, outputs, input_lists, opts
            )
        for out, parts in zip(outputs, input_lists):
            whole = torch.cat([p.reshape(-1) for p in parts])
            self._comm(out, "reduce_scatter").reduce_scatter(whole, op, out=out)
        return DoneWork(outputs)

    # The coalesced forms (DTensor's full_tensor() of several shards, torch's coalescing
    # manager) run one call per tensor, in order.

    def allreduce_coalesced(self, tensors, opts):
        return self.allreduce(tensors, opts)

    def allgather_coalesced(self, output_lists, inputs, opts):
        return self.allgather(output_lists, inputs, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts):
        for out, t in zip(outputs, inputs):
            self.all_gather_single(out, t, opts)
        return DoneWork(outputs)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        for out, t in zip(outputs, inputs):
            self.reduce_scatter_single(out, t, opts)
        return DoneWork(outputs)

    def broadcast(self, tensors, opts):
        if not _native(tensors):
            return self._delegated_call("broadcast", tensors, opts)
        for t in tensors:
            comm = self._comm(t, "broadcast")
            if t.is_contiguous():
                comm.broadcast(t, opts.rootRank)
            else:
                t.copy_(comm.broadcast(t.contiguous(), opts.rootRank))
        return DoneWork(tensors)

    def scatter(self, outputs, input_lists, opts):
        if not _native(outputs) or (
            self._rank == opts.rootRank
            and any(p.shape != o.shape for o, ps in zip(outputs, input_lists) for p in ps)
        ):
            return self._delegated_call("scatter", outputs, input_lists, opts)
        root = opts.rootRank
        for i, out in enumerate(outputs):
            comm = self._comm(out, "scatter")
            whole = None
            if self._rank == root:
                whole = torch.cat([p.reshape(-1) for p in input_lists[i]])
            part = out if out.is_contiguous() else torch.empty_like(out)
            comm.scatter(whole, part.reshape(-1), root)
            if part is not out:
                out.copy_(part)
        return DoneWork(outputs)

    def gather(self, output_lists, inputs, opts):
        root = opts.rootRank
        if not _native(inputs) or (
            self._rank == root
            and any(o.shape != t.shape for outs, t in zip(output_lists, inputs) for o in outs)
        ):
            return self._delegated_call("gather", output_lists, inputs, opts)
        for i, t in enumerate(inputs):
            gathered = self._comm(t, "gather").gather(t.contiguous().reshape(-1), root=root)
            if self._rank == root:
                for out, part in zip(output_lists[i], gathered.chunk(self._size)):
                    out.copy_(part.view(out.shape))
        return DoneWork(output_lists)

    def reduce(self, tensors, opts):
        op = _op_name(opts)
        if not _native(tensors, op):
            return self._delegated_reduction("reduce", tensors, opts, tensors, opts)
        for t in tensors:
            comm = self._comm(t, "reduce")
            if t.is_contiguous():
                comm.reduce(t, op, opts.rootRank)
            else:
                result = comm.reduce(t.contiguous(), op, opts.rootRank)
                if result is not None:
                    t.copy_(result)
        return DoneWork(tensors)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts):
        """all_to_all_single: even (no split sizes) or uneven splits of dimension 0."""
        if not _native([output, input]) or output.dtype != input.dtype:
            return self._delegated_call(
                "alltoall_base", output, input, output_split_sizes, input_split_sizes, opts
            )
        comm = self._comm(input, "all_to_all_single")
        even = not output_split_sizes and not input_split_sizes
        out = output if output.is_contiguous() else torch.empty_like(output)
        comm.all_to_all(
            input.contiguous(),
            out=out,
            in_splits=None if even else list(input_split_sizes) or None,
            out_splits=None if even else list(output_split_sizes) or None,
        )
        if out is not output:
            output.copy_(out)
        return DoneWork([output])

    all_to_all_single = alltoall_base

    def alltoall(self, outputs, inputs, opts):
        """all_to_all of lists: tensor r to rank r, any sizes (the counts of each pair are
        checked on every rank)."""
        if not _native(list(outputs) + list(inputs)) or len({t.dtype for t in inputs}) > 1:
            return self._delegated_call("alltoall", outputs, inputs, opts)
        if len(inputs) != self._size or len(outputs) != self._size:
            raise ValueError(
                f"tpcomm backend: all_to_all of {len(inputs)} inputs and {len(outputs)} "
                f"outputs, the group has {self._size} ranks"
            )
        comm = self._comm(inputs[0], "all_to_all")
        whole = torch.cat([t.reshape(-1) for t in inputs])
        received = torch.empty(
            sum(o.numel() for o in outputs), dtype=whole.dtype, device=whole.device
        )
        comm.all_to_all(
            whole,
            out=received,
            in_splits=[t.numel() for t in inputs],
            out_splits=[o.numel() for o in outputs],
        )
        at = 0
        for o in outputs:
            o.copy_(received[at : at + o.numel()].view(o.shape))
            at += o.numel()
        return DoneWork(outputs)

    # Point-to-point: one message per tensor, in flight until the Work's wait (which progresses
    # every message this rank started, so batch_isend_irecv's ranks may all send first).

    def send(self, tensors, dst, tag):
        if not _native(tensors) or len(tensors) != 1:
            return self._delegated_call("send", tensors, dst, tag)
        t = tensors[0].contiguous()
        return MessageWork(self._comm(t, "send").isend(t, dst, tag), tensors)

    def recv(self, tensors, src, tag):
        if not _native(tensors) or len(tensors) != 1:
            return self._delegated_call("recv", tensors, src, tag)
        t = tensors[0]
        if not t.is_contiguous():
            return self._delegated_call("recv", tensors, src, tag)
        return MessageWork(self._comm(t, "recv").irecv(t, src, tag), tensors)

    def recv_anysource(self, tensors, tag):
        if not _native(tensors) or len(tensors) != 1 or not tensors[0].is_contiguous():
            return self._delegated_call("recv_anysource", tensors, tag)
        t = tensors[0]
        if not t.is_cpu:  # NCCL names the sender of every receive
            return self._delegated_call("recv_anysource", tensors, tag)
        return MessageWork(self._comm(t, "recv").irecv(t, None, tag), tensors)

    def barrier(self, opts=None):
        with self._lock:
            comms = list(self._comms.values())
        # A group that has run no collective yet makes its CPU communicator for the barrier.
        (comms[0] if comms else self.communicator("cpu")).barrier()
        return DoneWork([])

    def monitored_barrier(self, opts, wait_all_ranks):
        # torch hands the backend the options; gloo's Python method takes their timeout.
        self._count_delegated("monitored_barrier")
        self._gloo.monitored_barrier(opts.timeout, wait_all_ranks)

    # --- lifetime ---------------------------------------------------------------------------

    def shutdown(self):
        with self._lock:
            comms, self._comms = list(self._comms.items()), {}
        for key, comm in comms:
            _registry.unregister(f"{self._group_id}/{key}")
            comm.close()
        self._gloo.shutdown()

    def abort(self):
        with self._lock:
            comms = list(self._comms.values())
        for comm in comms:
            comm.abort("the torch.distributed group was aborted")
        self._gloo.abort()


for _name in _DELEGATED:
    setattr(TpcommBackend, _name, _delegate(_name))


def create(opts, backend_options):
    """torch.distributed's creator (extended form: it names the group and its global ranks).
    init_process_group(..., pg_options=o) reaches it as backend_options: an `o.deterministic`
    sets the mode for the group (docs/torch-backend.md)."""
    return TpcommBackend(
        opts.store,
        opts.group_rank,
        opts.group_size,
        opts.timeout,
        opts.group_id,
        list(opts.global_ranks_in_group),
        getattr(backend_options, "deterministic", None),
    )
