"""tpcomm's `vllm.general_plugins` entry point (python/engines-plugin; docs/engines.md).

vLLM runs every general plugin in each of its processes (vllm.plugins.load_general_plugins:
the API process, the engine core, every worker) before it builds its process groups. register()
overrides the current platform's get_device_communicator_cls() so that it names tpcomm's
subclass of the platform's own device communicator (vllm_communicator.py). It patches no vLLM
file and replaces no platform: it works on whichever platform vLLM detected (built-in or an
out-of-tree platform plugin's), and vLLM's own allowlist, VLLM_PLUGINS, leaves it out."""

from . import vllm_communicator


def register():
    """Idempotent: a second call in the same process changes nothing."""
    from vllm.platforms import current_platform

    platform = type(current_platform)
    own = platform.get_device_communicator_cls  # bound to the platform class (a classmethod)
    if getattr(own, "tpcomm_base", None) is not None:
        return

    def get_device_communicator_cls(cls):
        return vllm_communicator.install(own())

    get_device_communicator_cls.tpcomm_base = own
    platform.get_device_communicator_cls = classmethod(get_device_communicator_cls)
