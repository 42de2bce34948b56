"""The device communicator vLLM builds per process group when tpcomm's plugin is loaded
(vllm_plugin.py): a subclass of the platform's own class (CudaCommunicator on CUDA,
CpuCommunicator on CPU, ...), made when vLLM first asks the platform for it, that serves a TP
group's all_reduce, all_gather and reduce_scatter through a tpcomm.Communicator and leaves
everything else (broadcast, gather, send/recv, the v-variants, all-to-all, other groups, other
devices and dtypes) to the class it derives from.

vLLM constructs it as `cls(cpu_group=..., device=..., device_group=..., unique_name=...,
use_all2all=...)` inside GroupCoordinator, collectively on every rank of the group. On a CUDA
platform it also takes the custom all-reduce slot (`ca_comm`) with a TpcommCustomAllreduce on
the same communicator, so that vLLM's graph_capture() enters its capture(), which registers the
captured buffers with tpcomm afterwards."""

import inspect

from ..communicator import Communicator
from .custom_all_reduce import TpcommCustomAllreduce, _device

# The groups tpcomm serves, by the first part of vLLM's unique name ("tp:0"): the tensor-parallel
# group, as for vLLM's own custom all-reduce. The others keep vLLM's own collectives.
SERVED_GROUPS = ("tp",)

# The name vLLM resolves (resolve_obj_by_qualname): the class made for this process's platform.
QUALNAME = __name__ + ".TpcommDeviceCommunicator"

_classes = {}  # base class -> its subclass


def _check_dim(what, input_, dim):
    if isinstance(dim, bool) or not isinstance(dim, int) or not -input_.dim() <= dim < input_.dim():
        raise ValueError(f"{what}: dim {dim!r} is not a dimension of a tensor of shape "
                         f"{tuple(input_.shape)}")
    return dim % input_.dim()


def _stateless(group):
    """A vLLM StatelessProcessGroup (elastic EP's), unknown to torch.distributed: tpcomm's
    rendezvous goes through torch.distributed's store, so such a group keeps vLLM's own."""
    from torch.distributed.distributed_c10d import _world

    return _world.pg_map.get(group) is None


class _TpcommServed:
    """The methods the subclass adds to vLLM's class (mixed in first)."""

    def _setup_tpcomm(self):
        self.tpcomm = None  # the Communicator, where this group is served
        self.tpcomm_ar = None
        name = self.unique_name.split(":")[0]
        if self.world_size < 2 or name not in SERVED_GROUPS or _stateless(self.cpu_group):
            return
        device, kind, index = _device(self.device)
        self.tpcomm = Communicator.from_torch(self.cpu_group, device=kind, cuda_device=index)
        self.tpcomm_ar = TpcommCustomAllreduce(self.cpu_group, device, comm=self.tpcomm)
        if kind == "cuda" and hasattr(self, "ca_comm"):
            own = self.ca_comm
            if own is not None and hasattr(own, "close"):
                own.close()  # vLLM's IPC buffers: tpcomm serves the all-reduces now
            self.ca_comm = self.tpcomm_ar

    def _served(self, input_):
        """Whether tpcomm takes this tensor: on the group's device, of a dtype tpcomm carries."""
        return (self.tpcomm is not None and not self.tpcomm_ar.disabled
                and input_.device == self.tpcomm_ar.device
                and input_.dtype in self.tpcomm_ar._dtypes)

    def all_reduce(self, input_):
        """The sum over the group, as a new tensor (vLLM's custom op is out of place)."""
        if not self._served(input_):
            return super().all_reduce(input_)
        src = input_.contiguous()
        out = src.new_empty(src.shape)
        self.tpcomm.all_reduce(src, out=out)
        return out

    def all_gather(self, input_, dim=-1):
        """The ranks' tensors concatenated along `dim`, in rank order."""
        d = _check_dim("all_gather", input_, dim)
        if not self._served(input_):
            return super().all_gather(input_, dim)
        return self.tpcomm.all_gather(input_.contiguous(), dim=d)

    def reduce_scatter(self, input_, dim=-1):
        """This rank's part of the sum, `dim` split in rank order into world_size parts."""
        d = _check_dim("reduce_scatter", input_, dim)
        if input_.shape[d] % self.world_size:
            raise ValueError(f"reduce_scatter: dimension {d} of shape {tuple(input_.shape)} does "
                             f"not divide among {self.world_size} ranks")
        if not self._served(input_):
            return super().reduce_scatter(input_, dim)
        return self.tpcomm.reduce_scatter(input_.contiguous(), dim=d)

    def destroy(self):
        if self.tpcomm is not None:
            self.tpcomm_ar.close()
            self.tpcomm.close()
        super().destroy()


def communicator_class(base):
    """The subclass of vLLM device communicator class `base` that tpcomm serves (made once)."""
    cls = _classes.get(base)
    if cls is not None:
        return cls

    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        self._setup_tpcomm()

    # The constructor takes what the base's does (vLLM passes keywords); inspect sees that.
    __init__.__signature__ = inspect.signature(base.__init__)
    cls = type("TpcommDeviceCommunicator", (_TpcommServed, base),
               {"__init__": __init__, "__module__": __name__,
                "__doc__": f"{base.__name__} whose TP group's all_reduce, all_gather and "
                           "reduce_scatter tpcomm serves (tpcomm.engines.vllm_communicator)."})
    _classes[base] = cls
    return cls


def install(base_qualname):
    """Makes the subclass of the class vLLM names `base_qualname` this module's
    TpcommDeviceCommunicator, and returns its qualified name for vLLM to resolve."""
    from vllm.utils.import_utils import resolve_obj_by_qualname

    global TpcommDeviceCommunicator
    TpcommDeviceCommunicator = communicator_class(resolve_obj_by_qualname(base_qualname))
    return QUALNAME


TpcommDeviceCommunicator = None  # set by install()
