"""Creating an engine's tpcomm communicator so that the group agrees on the outcome: every rank
ends with a Communicator, or every rank ends with None and the engine's own communicator, within
a moment of the first rank's failure (docs/engines.md, "When tpcomm's set-up fails").

A rank can fail before it reaches tpcomm's rendezvous (a build without CUDA on a GPU host, ROCm,
a bad TPCOMM_* variable), while its peers wait inside theirs until TPCOMM_TIMEOUT_MS. So each
rank creates its communicator on a thread of its own and publishes its outcome in the group's
torch.distributed store (which every engine's group has); the calling thread watches its own
creation and its peers' outcomes, and gives up as soon as any peer failed. A creation left
waiting for a failed peer ends at its own deadline on its thread, and nothing of it is used."""

import atexit
import logging
import threading
import time

from .._rendezvous import _group_ranks

log = logging.getLogger("tpcomm.engines")

# How often the outcome keys are read while a creation runs.
POLL_S = 0.02

_rounds = {}  # ranks -> how many agreed set-ups this process ran for them
_abandoned = []  # creation threads still waiting for a failed peer when the group gave up


@atexit.register
def _wait_for_abandoned():
    """A creation left waiting in tpcomm's rendezvous ends at its own deadline; the process must
    not end under it (the C++ library's teardown would run beside a thread still inside it), so
    exit waits for it, saying so."""
    for worker in _abandoned:
        if worker.is_alive():
            log.warning(
                "tpcomm: waiting for an abandoned set-up (%s) to reach its deadline before exit",
                worker.name,
            )
            worker.join()


class SetupRefused(RuntimeError):
    """The group's tpcomm set-up failed on at least one rank (the message names it): every rank
    gets it, and keeps the engine's own communicator."""


def _store_and_ranks(group):
    import torch.distributed as dist

    return (
        dist.distributed_c10d._get_default_store(),
        _group_ranks(dist, group),
        dist.get_rank(group),
    )


def create_agreed(group, create, what, timeout_s=None):
    """Runs create() (a collective creation over `group`, such as Communicator.from_torch) on
    every rank; returns its result where every rank succeeded, else closes what this rank made
    and raises SetupRefused on every rank, naming the first failure. `what` names the engine's
    object in the message. timeout_s bounds the wait for the peers' outcomes once this rank's
    creation has ended (default: TPCOMM_TIMEOUT_MS)."""
    import os

    store, ranks, rank = _store_and_ranks(group)
    key = tuple(ranks)
    n = _rounds.get(key, 0)
    _rounds[key] = n + 1
    prefix = f"tpcomm/engine-setup/{','.join(map(str, ranks))}/{n}/"
    outcome = {}
    lock = threading.Lock()

    def run():
        try:
            comm = create()
        except BaseException as e:
            outcome["error"] = e
            return
        with lock:
            if outcome.get("abandoned"):  # the group gave up meanwhile: nobody will use it
                comm.close()
            else:
                outcome["comm"] = comm

    worker = threading.Thread(target=run, name=f"tpcomm set-up of {what}", daemon=True)
    worker.start()
    published = False
    pending = [r for r in range(len(ranks)) if r != rank]
    wait_s = timeout_s or float(os.environ.get("TPCOMM_TIMEOUT_MS", "60000")) / 1000
    give_up = None
    failure = None
    while True:
        if not published and not worker.is_alive():
            mine = (
                "ok"
                if "comm" in outcome
                else f"rank {rank}: {type(outcome['error']).__name__}: {outcome['error']}"
            )
            store.set(prefix + str(rank), mine)
            published = True
            give_up = time.monotonic() + wait_s
            if "error" in outcome:
                failure = mine
                break
        for r in list(pending):
            if store.check([prefix + str(r)]):
                pending.remove(r)
                value = store.get(prefix + str(r)).decode()
                if value != "ok":
                    failure = value
        if failure is not None or (published and not pending):
            break
        if give_up is not None and time.monotonic() > give_up:
            failure = (
                f"ranks {pending} of the group did not report their set-up within {wait_s:g} s"
            )
            break
        time.sleep(POLL_S)
    if failure is None:
        return outcome["comm"]
    if not published:  # this rank's creation is still waiting for the failed peer
        store.set(prefix + str(rank), f"rank {rank}: gave up: {failure}")
        _abandoned.append(worker)
    with lock:
        outcome["abandoned"] = True
        comm = outcome.pop("comm", None)
    if comm is not None:
        comm.close()
    raise SetupRefused(f"{what}: tpcomm's set-up failed on the group ({failure})")
