"""The custom all-reduce SGLang builds under TPCOMM_SGLANG_TAKEOVER=1 (sglang_plugin.TakeOver;
docs/engines.md, "SGLang"): a TpcommCustomAllreduce over a communicator of its own, created
with caller_serves_fallback=True. SGLang runs NCCL (its PyNccl) and Gloo itself, so tpcomm sets
up neither, and the gate sends the calls its plan gives them to SGLang's next all-reduce method.
close() (SGLang's teardown, through the plugin's hook on GroupCoordinator.destroy) closes that
communicator too."""

from ..communicator import Communicator
from .custom_all_reduce import TpcommCustomAllreduce


def _kind_and_index(device):
    """("cpu" or "cuda" or another type, CUDA index or -1) of what SGLang passes as `device`."""
    import torch

    device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if device.type != "cuda":
        return device.type, -1
    return "cuda", torch.cuda.current_device() if device.index is None else device.index


class SglangCustomAllreduce(TpcommCustomAllreduce):
    """TpcommCustomAllreduce(group, device) as SGLang constructs its own class, over a
    communicator it creates (caller_serves_fallback=True) and closes. Collective: every rank of
    the group creates it, in the same order (the plugin does so through create_agreed)."""

    def __init__(self, group, device, max_size=None, *, timeout=None, register_graph_buffers=True):
        if group is None:
            raise ValueError(
                "group: the TP group's CPU (Gloo) process group is needed to "
                "create the communicator"
            )
        kind, index = _kind_and_index(device)
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"device {device}: tpcomm serves cpu and cuda devices, not {kind}")
        comm = Communicator.from_torch(
            group, timeout=timeout, device=kind, cuda_device=index, caller_serves_fallback=True
        )
        try:
            super().__init__(
                group, device, max_size, comm=comm, register_graph_buffers=register_graph_buffers
            )
        except BaseException:
            comm.close()
            raise

    # --- counting what SGLang hands elsewhere -------------------------------------------------

    served = 0  # the calls custom_all_reduce() carried

    def custom_all_reduce(self, input):
        out = super().custom_all_reduce(input)
        if out is not None:
            self.served += 1
        return out

    def count_call(self, original, group, *args, **kwargs):
        """Runs SGLang's GroupCoordinator.all_reduce (`original`) for the group whose ca_comm
        this is (the plugin's hook on it), and counts the call under the route "engine" in
        stats() where SGLang's own path carried it (the gate said no, or SGLang chose a method
        before asking it: symmetric memory, FlashInfer's fusion): every call the group was
        given is then in stats(), tpcomm's own counting the ones custom_all_reduce carried."""
        before = self.served
        out = original(group, *args, **kwargs)
        t = args[0] if args else kwargs.get("input_")
        if self.served == before and hasattr(t, "element_size"):
            self.passed_on.add("all_reduce", t.numel() * t.element_size())
        return out

    def close(self):
        """Disables the gate and closes the communicator. Twice is fine."""
        super().close()
        if self.comm is not None:
            self.comm.close()
