"""torch.distributed.recv without a source on a tpcomm group. torch asks the Work its backend
returned for the sender (Work.sourceRank, a C++ method that a Python Work cannot override), so
for a tpcomm group's CPU tensor this wrapper asks tpcomm's request instead; every other call
goes to torch's own recv unchanged."""

import functools

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from ._backend import TpcommBackend

_torch_recv = c10d.recv


@functools.wraps(_torch_recv)
def recv(tensor, src=None, group=None, tag=0, group_src=None):
    if src is None and group_src is None and tensor.is_cpu:
        pg = group if group is not None else c10d._get_default_group()
        if not c10d._rank_not_in_group(pg):
            backend = pg._get_backend(tensor.device)
            if isinstance(backend, TpcommBackend):
                work = backend.recv_anysource([tensor], tag)
                work.wait()
                source = work._source_rank()
                return (
                    source if pg is c10d._get_default_group() else dist.get_global_rank(pg, source)
                )
    return _torch_recv(tensor, src=src, group=group, tag=tag, group_src=group_src)


def install():
    if c10d.recv is not recv:
        c10d.recv = recv
        dist.recv = recv
