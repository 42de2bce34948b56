"""Communicators by name, for code that can carry only a string to the call: torch.library custom
ops (a compiled graph holds the name, not the object) and the torch.distributed backend. A name
is registered by whoever made the communicator and dropped when it is closed."""

import itertools
import weakref

_by_name = weakref.WeakValueDictionary()
_serial = itertools.count()


def register(comm, name=None):
    """Registers `comm` under `name` (default: a fresh "tpcomm:N") and returns the name."""
    if name is None:
        name = f"tpcomm:{next(_serial)}"
    existing = _by_name.get(name)
    if existing is not None and existing is not comm:
        raise ValueError(f"a communicator is already registered as {name!r}")
    _by_name[name] = comm
    return name


def unregister(name):
    _by_name.pop(name, None)


def lookup(name):
    """The communicator registered as `name`; ValueError naming it when there is none (closed,
    garbage-collected, or never registered in this process)."""
    comm = _by_name.get(name)
    if comm is None or comm._native.closed:
        raise ValueError(
            f"no open tpcomm communicator is registered as {name!r} in this process "
            f"(closed, or created under another name)"
        )
    return comm
