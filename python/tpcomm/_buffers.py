"""Tensors and arrays as tpcomm's C++ library takes them: an address, an element count, a dtype
(named here, passed to the library as its code) and, for CUDA tensors, the current stream's handle. Nothing here needs PyTorch's C++ ABI,
and neither torch nor numpy is imported unless the caller already has (a tensor of a module that
was never imported cannot exist)."""

import sys

from . import _tpcomm

DTYPE_NAMES = ("float32", "float16", "bfloat16", "int32", "int64", "uint8")
CODES = _tpcomm.DTYPE_CODES  # name -> the library's value of the dtype
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8, "uint8": 1}


class View:
    """What one buffer argument is, checked. Built on every call, so it reads only what every
    call needs (the shape, wanted by few, is read when asked for)."""

    __slots__ = ("obj", "ptr", "numel", "dtype", "device", "kind", "gpu", "logical")

    def __init__(self, obj, ptr, numel, dtype, device, kind, gpu=-1, logical=False):
        self.obj, self.ptr, self.numel, self.dtype = obj, ptr, numel, dtype
        self.device, self.kind, self.gpu = device, kind, gpu  # gpu: a CUDA tensor's device index
        self.logical = logical  # a bool buffer, travelling as uint8 bytes of 0 and 1

    @property
    def type_name(self):
        """The dtype as the caller knows it: "bool" for a bool buffer, else its name."""
        return "bool" if self.logical else self.dtype

    @property
    def code(self):
        """The dtype as the library takes it."""
        return CODES[self.dtype]

    @property
    def where(self):
        """ "cpu", or "cuda:1": the device as torch writes it."""
        return f"cuda:{self.gpu}" if self.device == "cuda" else self.device

    @property
    def shape(self):
        return tuple(self.obj.shape)

    @property
    def nbytes(self):
        return self.numel * _ITEMSIZE[self.dtype]


TORCH_DTYPES = {}  # torch dtype -> name, filled on first use (torch is imported by then)
TORCH_CODES = {}  # torch dtype -> the library's code, likewise: Communicator.all_reduce's fast path
TENSOR = None  # torch.Tensor once a tensor has been seen: Communicator.all_reduce's fast path
_STRIDED = [None]  # torch.strided, likewise


def _torch_view(t, what):
    global TENSOR
    if not TORCH_DTYPES:
        torch = sys.modules["torch"]
        TORCH_DTYPES.update({getattr(torch, name): name for name in DTYPE_NAMES})
        TORCH_CODES.update({getattr(torch, name): CODES[name] for name in DTYPE_NAMES})
        TENSOR = torch.Tensor
        _STRIDED[0] = torch.strided
    dtype = TORCH_DTYPES.get(t.dtype)
    logical = dtype is None and t.dtype == sys.modules["torch"].bool
    if logical:
        dtype = "uint8"
    elif dtype is None:
        raise ValueError(
            f"{what}: dtype {t.dtype} is not one of "
            + ", ".join(f"torch.{name}" for name in DTYPE_NAMES + ("bool",))
        )
    if t.layout is not _STRIDED[0]:
        # Sparse and other layouts have no one buffer of numel elements to send.
        raise ValueError(
            f"{what}: a tensor of layout {t.layout}; tpcomm takes dense tensors "
            f"(layout torch.strided): pass t.to_dense()"
        )
    if not t.is_contiguous():
        raise ValueError(f"{what}: the tensor is not contiguous (pass t.contiguous())")
    # is_cuda / is_cpu are plain flags; t.device builds an object (a quarter of a microsecond).
    if t.is_cuda:
        return View(t, t.data_ptr(), t.numel(), dtype, "cuda", "torch", t.get_device(), logical)
    device = "cpu" if t.is_cpu else t.device.type
    return View(t, t.data_ptr(), t.numel(), dtype, device, "torch", logical=logical)


_NUMPY_DTYPES = {}  # numpy dtype -> name, filled on first use


def _numpy_view(a, what):
    if not _NUMPY_DTYPES:
        np = sys.modules["numpy"]
        _NUMPY_DTYPES.update({np.dtype(name): name for name in DTYPE_NAMES if name != "bfloat16"})
    dtype = _NUMPY_DTYPES.get(a.dtype)
    logical = dtype is None and a.dtype == sys.modules["numpy"].bool_
    if logical:
        dtype = "uint8"
    elif dtype is None:
        raise ValueError(
            f"{what}: dtype {a.dtype} is not one of "
            + ", ".join(f"numpy.{name}" for name in DTYPE_NAMES if name != "bfloat16")
            + ", numpy.bool_ (numpy has no bfloat16: use a torch tensor)"
        )
    if not a.flags.c_contiguous:
        raise ValueError(f"{what}: the array is not C-contiguous (pass numpy.ascontiguousarray(a))")
    return View(a, _tpcomm.buffer_address(a), a.size, dtype, "cpu", "numpy", logical=logical)


def view(obj, what, writable=False):
    """The View of a torch.Tensor or numpy.ndarray; ValueError/TypeError saying what is wrong."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch_view(obj, what)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        v = _numpy_view(obj, what)
        if writable and not obj.flags.writeable:
            raise ValueError(f"{what}: the array is read-only")
        return v
    raise TypeError(f"{what}: expected a torch.Tensor or numpy.ndarray, got {type(obj).__name__}")


def registered_empty(native, shape, dtype):
    """A tensor or array of `shape` over memory native.allocate returns (see Communicator.empty).
    allocate's RegisteredMemory holds the memory's mapping, and torch.frombuffer and
    numpy.frombuffer keep it referenced: the memory lives as long as the tensor or array does,
    after free(), close() or the communicator's garbage collection too."""
    import math

    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    name = dtype_name(dtype)
    numel = math.prod(shape)
    nbytes = max(numel * _ITEMSIZE[name], 1)
    torch = sys.modules.get("torch")
    np = sys.modules.get("numpy")
    # A torch dtype, or a name while torch is imported: a tensor; a numpy dtype: an array.
    as_tensor = torch is not None and isinstance(dtype, (str, torch.dtype))
    if not as_tensor and (np is None or name == "bfloat16"):
        raise ValueError(
            f"empty: a {name} buffer needs torch imported"
            + ("" if np is None else " (numpy has no bfloat16)")
        )
    memory = native.allocate(nbytes)
    if as_tensor:
        return torch.frombuffer(memory, dtype=getattr(torch, name), count=numel).view(shape)
    return np.frombuffer(memory, dtype=name, count=numel).reshape(shape)


def empty_like(v, shape):
    """A new buffer of `shape` with v's dtype, on v's device."""
    if v.kind == "torch":
        return sys.modules["torch"].empty(shape, dtype=v.obj.dtype, device=v.obj.device)
    return sys.modules["numpy"].empty(shape, dtype=v.obj.dtype)


def moved(v, source, destination):
    """v's tensor or array with dimension `source` moved to `destination` (a view)."""
    if v.kind == "torch":
        return v.obj.movedim(source, destination)
    return sys.modules["numpy"].moveaxis(v.obj, source, destination)


def copy_into(o, shape, x):
    """Copies x into o's buffer seen with `shape` (o is contiguous, so that is a view of it)."""
    if o.kind == "torch":
        o.obj.view(shape).copy_(x)
    else:
        sys.modules["numpy"].copyto(o.obj.reshape(shape), x)


def contiguous_moved(v, split, d, what):
    """A new contiguous buffer holding v seen with shape `split` (dimension d split into
    (parts, part size)), the parts dimension moved to the front: part q is block q."""
    if v.kind == "torch":
        x = v.obj.view(split).movedim(d, 0).contiguous()
    else:
        np = sys.modules["numpy"]
        x = np.ascontiguousarray(np.moveaxis(v.obj.reshape(split), d, 0))
    return view(x, what)


def stream_of(v):
    """The handle of the current CUDA stream of v's device, or None for host memory."""
    return cuda_stream(v.obj) if v.device == "cuda" else None


def cuda_stream(t):
    """The handle of the current CUDA stream of CUDA tensor t's device."""
    return sys.modules["torch"].cuda.current_stream(t.device).cuda_stream


def dtype_name(dtype):
    """'float32' for 'float32', torch.float32 or numpy.float32."""
    if isinstance(dtype, str):
        if dtype in DTYPE_NAMES:
            return dtype
        raise ValueError(f"dtype '{dtype}' is not one of {', '.join(DTYPE_NAMES)}")
    name = str(dtype).replace("torch.", "")
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            pass
    if name in DTYPE_NAMES:
        return name
    raise ValueError(f"dtype {dtype} is not one of {', '.join(DTYPE_NAMES)}")
