"""from_torch's rendezvous: the group's rank 0 serves tpcomm's store on a port the kernel picks
and publishes its address (with a fresh secret) in torch.distributed's store; the other ranks
read it there. The key is deleted once every rank has joined."""

import datetime
import os
import socket

from . import _tpcomm

_calls = {}  # (ranks) -> how many from_torch calls this process made for that group


class PublishedAddress:
    def __init__(self, store, key, text):
        self.store, self.key, self.text = store, key, text

    def done(self, rank):
        if rank == 0:
            try:
                self.store.delete_key(self.key)
            except Exception:  # an older store without delete_key: the key stays, harmless
                pass


def _group_ranks(dist, group):
    if group is None:
        return list(range(dist.get_world_size()))
    if hasattr(dist, "get_process_group_ranks"):
        return list(dist.get_process_group_ranks(group))
    mapping = dist.distributed_c10d._pg_group_ranks[group]  # torch 1.13: global -> group rank
    return [g for g, _ in sorted(mapping.items(), key=lambda item: item[1])]


def _host_for_store(first_global_rank):
    """The address the group's other ranks reach rank 0's store at."""
    if os.environ.get("TPCOMM_SOCKET_ADDRESS"):
        return os.environ["TPCOMM_SOCKET_ADDRESS"]
    if first_global_rank == 0 and os.environ.get("MASTER_ADDR"):
        return os.environ["MASTER_ADDR"]
    local, world = os.environ.get("LOCAL_WORLD_SIZE"), os.environ.get("WORLD_SIZE")
    if local and world and local == world:
        return "127.0.0.1"
    return socket.gethostname()


def torch_group_address(group, timeout_s):
    """(address, rank, size, StoreHost or None, backend name) of `group` for Comm.from_address."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise ValueError(
            "from_torch: call torch.distributed.init_process_group first "
            "(or use tpcomm.Communicator.from_env)"
        )
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError("from_torch: this process is not a member of the group")
    size = dist.get_world_size(group)
    ranks = _group_ranks(dist, group)
    backend = str(dist.get_backend(group))
    store = dist.distributed_c10d._get_default_store()
    n = _calls.get(tuple(ranks), 0)
    _calls[tuple(ranks)] = n + 1
    key = f"tpcomm/from_torch/{','.join(map(str, ranks))}/{n}"
    if rank == 0:
        host = _tpcomm.StoreHost(_host_for_store(ranks[0]))
        store.set(key, host.address)
        return PublishedAddress(store, key, host.address), rank, size, host, backend
    wait_s = timeout_s or float(os.environ.get("TPCOMM_TIMEOUT_MS", "60000")) / 1000
    try:
        store.wait([key], datetime.timedelta(seconds=wait_s))
    except RuntimeError as e:
        raise _tpcomm.TimeoutError(
            f"from_torch: rank 0 of the group (global rank {ranks[0]}) did not publish tpcomm's "
            f"store address in torch.distributed's store within {wait_s:g} s: {e}"
        ) from None
    text = store.get(key).decode()
    return PublishedAddress(store, key, text), rank, size, None, backend
