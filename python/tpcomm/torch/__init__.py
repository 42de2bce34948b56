"""tpcomm for PyTorch programs: `import tpcomm.torch` registers the torch.distributed backend
"tpcomm" for cpu and cuda (docs/torch-backend.md):

    import tpcomm.torch
    torch.distributed.init_process_group("tpcomm")            # or "cpu:gloo,cuda:tpcomm"
    torch.distributed.all_reduce(t)

It needs a torch whose torch.distributed Backend takes Python subclasses (2.15 is tested)."""

import torch
import torch.distributed as dist

if (
    not hasattr(torch._C, "_distributed_c10d")
    or not hasattr(torch._C._distributed_c10d, "Backend")
    or not hasattr(dist, "Work")
):
    raise ImportError(
        f"tpcomm.torch: torch {torch.__version__} has no torch.distributed Backend "
        "that Python can subclass (the backend needs torch 2.x; docs/python.md)"
    )

from . import _recv_any, _registry  # noqa: F401 (_registry: imported for its registrations)
from ._backend import TpcommBackend, create

BACKEND_NAME = "tpcomm"


def _register():
    if "TPCOMM" in getattr(dist.Backend, "_plugins", {}):
        return
    dist.Backend.register_backend(BACKEND_NAME, create, extended_api=True, devices=["cpu", "cuda"])


_register()
_recv_any.install()


def communicator(group=None, device="cpu"):
    """The tpcomm Communicator under a torch.distributed group of backend tpcomm (default: the
    world) for `device`; made on first use, so every rank of the group calls it."""
    pg = group if group is not None else dist.group.WORLD
    backend = pg._get_backend(torch.device(device))
    if not isinstance(backend, TpcommBackend):
        raise ValueError(f"the group's backend for {device} is {backend.name()}, not tpcomm")
    return backend.communicator(device)


def rmsnorm_into_new_tensors(comm, input, residual, weight, eps):
    """(out, residual_out) of comm.all_reduce_rmsnorm into new contiguous tensors (any strides
    in; residual_out the sum alone without a residual): the functional form of
    tpcomm.torch.all_reduce_rmsnorm and of the op tpcomm::all_reduce_rmsnorm."""
    src = input.contiguous()
    return comm.all_reduce_rmsnorm(
        src,
        residual.contiguous() if residual is not None else None,
        weight.contiguous(),
        eps,
        out=torch.empty_like(src),
        residual_out=torch.empty_like(src),
    )


def all_reduce_rmsnorm(input, residual, weight, eps, group=None):
    """(out, residual_out) of Communicator.all_reduce_rmsnorm on the tpcomm Communicator under a
    torch.distributed group of backend tpcomm (default: the world): input summed over the group
    plus residual, then RMS-normalised by rows and scaled by weight. New tensors; inside
    torch.compile use torch.ops.tpcomm.all_reduce_rmsnorm (tpcomm.torch.ops)."""
    comm = communicator(group, input.device.type)
    return rmsnorm_into_new_tensors(comm, input, residual, weight, eps)


__all__ = ["BACKEND_NAME", "TpcommBackend", "all_reduce_rmsnorm", "communicator"]
