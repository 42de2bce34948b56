"""tpcomm's `vllm.general_plugins` entry point (python/engines-plugin; docs/engines.md).

vLLM runs every general plugin in each of its processes (vllm.plugins.load_general_plugins:
the API process, the engine core, every worker) before it builds its process groups. register()
overrides the current platform's get_device_communicator_cls() so that it names tpcomm's
subclass of the platform's own device communicator (vllm_communicator.py). It patches no vLLM
file and replaces no platform: it works on whichever platform vLLM detected (built-in or an
out-of-tree platform plugin's), and vLLM's own allowlist, VLLM_PLUGINS, leaves it out.

vLLM asks that method in two places: GroupCoordinator.__init__, which builds the class it names
for every process group (tpcomm's subclass serves the TP group), and elastic EP's
StatelessGroupCoordinator.__init__ (its DP, EP and EPLB groups), which asserts that the name
resolves to exactly CudaCommunicator and then builds CudaCommunicator itself, whatever the
answer. Asked from a StatelessGroupCoordinator, the override answers the platform's own name:
those groups are never tpcomm's (not TP; their process groups are unknown to torch.distributed,
whose store tpcomm's rendezvous uses), and the assertion holds. The TP group stays a normal
group under elastic EP, and tpcomm serves it as without."""

import logging
import sys

from . import vllm_communicator

log = logging.getLogger("tpcomm.engines.vllm")

# How many callers up the stack a StatelessGroupCoordinator may be (its __init__ asks directly).
_FRAMES = 8


def _asked_by_stateless_coordinator():
    """Whether a StatelessGroupCoordinator (vllm.distributed.stateless_coordinator) is being
    built up the stack: the only vLLM caller that must get the platform's own class."""
    module = sys.modules.get("vllm.distributed.stateless_coordinator")
    cls = getattr(module, "StatelessGroupCoordinator", None)
    if cls is None:  # not imported: nobody is building one
        return False
    frame = sys._getframe(2)
    for _ in range(_FRAMES):
        if frame is None:
            return False
        if isinstance(frame.f_locals.get("self"), cls):
            return True
        frame = frame.f_back
    return False


def register():
    """Idempotent: a second call in the same process changes nothing."""
    from vllm.platforms import current_platform

    platform = type(current_platform)
    own = platform.get_device_communicator_cls  # bound to the platform class (a classmethod)
    if getattr(own, "tpcomm_base", None) is not None:
        return

    def get_device_communicator_cls(cls):
        name = own()
        if _asked_by_stateless_coordinator():
            log.debug("tpcomm: elastic EP's stateless group gets the platform's own %s", name)
            return name
        return vllm_communicator.install(name)

    get_device_communicator_cls.tpcomm_base = own
    platform.get_device_communicator_cls = classmethod(get_device_communicator_cls)
