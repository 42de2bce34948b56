"""tpcomm: collectives for tensor-parallel inference (all_reduce, all_gather, reduce_scatter,
broadcast, barrier, split) on torch tensors and numpy arrays, with a plan that says which path
each call takes and why. See docs/python.md.

    import tpcomm
    comm = tpcomm.Communicator.from_env(timeout=60.0)   # tpcomm run / torchrun / mpirun / srun
    comm.all_reduce(t)                                   # in place, returns t
"""

import atexit
import json

from . import _tpcomm
from ._tpcomm import (
    AbortedError,
    Error,
    InternalError,
    InvalidInputError,
    MismatchError,
    StoreHost,
    TimeoutError,
    UnavailableError,
    set_log_file,
    set_log_level,
    set_log_sink,
)
from .communicator import Communicator

__version__ = _tpcomm.__version__
cuda_build_status = _tpcomm.cuda_build_status

__all__ = [
    "Communicator",
    "Error",
    "InvalidInputError",
    "UnavailableError",
    "TimeoutError",
    "MismatchError",
    "AbortedError",
    "InternalError",
    "StoreHost",
    "plan_file",
    "set_log_level",
    "set_log_file",
    "set_log_sink",
    "__version__",
]


def plan_file(path, mode="eager", tuning=None):
    """The plan of the group a facts file describes (docs/facts.md), as a dict: what
    `tpcomm plan --json FILE` prints."""
    return json.loads(_tpcomm.plan_file(str(path), mode, "" if tuning is None else str(tuning)))


# A Python log sink must be gone before the interpreter is.
atexit.register(lambda: _tpcomm.set_log_sink(None))
