"""The calls an engine object hands to the engine's own path instead of tpcomm (another dtype,
a size the gate declines, a group tpcomm does not serve), counted so that the object's stats()
accounts for every call it was given: tpcomm's own routes plus the route "engine"."""

import threading

from ..communicator import add_stats, stats_dict

ENGINE_ROUTE = "engine"


class PassedOn:
    def __init__(self):
        self._lock = threading.Lock()
        self._counts = {}  # collective -> [calls, bytes]

    def add(self, collective, nbytes):
        with self._lock:
            entry = self._counts.setdefault(collective, [0, 0])
            entry[0] += 1
            entry[1] += int(nbytes)

    def reset(self):
        with self._lock:
            self._counts.clear()

    def stats(self, comm=None):
        """stats_dict of `comm`'s calls (none if comm is None) and of the calls passed on."""
        out = comm.stats() if comm is not None else stats_dict([])
        with self._lock:
            rows = [(c, ENGINE_ROUTE, calls, nbytes) for c, (calls, nbytes) in self._counts.items()]
        return add_stats(out, rows)


def nbytes(t):
    return t.numel() * t.element_size()
