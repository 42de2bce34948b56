"""tpcomm's `sglang.srt.plugins` entry point (python/engines-plugin; docs/engines.md).

SGLang runs every general plugin in each of its processes (sglang.srt.plugins.load_plugins: the
engine, the schedulers that own the TP workers, ...) and then applies the hooks they registered.
register() puts an AROUND hook on SGLang's custom all-reduce dispatch, so that the
GroupCoordinator of every group that uses a custom all-reduce builds a TpcommCustomAllreduce
(`CAClass(group=cpu_group, device=device)`) instead of SGLang's own; devices other than cpu and
cuda keep SGLang's choice. SGLang's allowlist, SGLANG_PLUGINS, leaves it out."""

DISPATCH = ("sglang.srt.distributed.device_communicators.custom_all_reduce."
            "dispatch_custom_allreduce")


def dispatch_custom_allreduce(original, *args, **kwargs):
    """The AROUND hook: SGLang's dispatch(group, device) -> the class it instantiates."""
    import torch

    from .custom_all_reduce import TpcommCustomAllreduce

    device = kwargs["device"] if "device" in kwargs else args[1]
    kind = "cuda" if isinstance(device, int) else torch.device(device).type
    if kind in ("cpu", "cuda"):
        return TpcommCustomAllreduce
    return original(*args, **kwargs)


def register():
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(DISPATCH, dispatch_custom_allreduce, HookType.AROUND)
