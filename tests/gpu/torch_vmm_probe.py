"""The experiment E2 (docs/gpu-check.md, "The GPU check"): what the CUDA driver says about a torch
tensor on expandable segments, the memory tpcomm's zero-copy graph registration must export.

For 1 MiB and 64 MiB tensors: the allocation range (cuMemGetAddressRange) against data_ptr,
whether the allocation is a VMM one (cuMemRetainAllocationHandle), the handle types torch
requested for it (cuMemGetAllocationPropertiesFromHandle), and whether it exports as a POSIX fd
(cuMemExportToShareableHandle). Prints the facts; exit 0 when the probe ran (the answer is a
finding, not a pass or fail), 77 without torch or a GPU torch sees, 1 when a driver call that
must work failed.

Run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (scripts/gpu-check.sh sets it).
"""
import ctypes
import os
import sys

POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR


class Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("loc_type", ctypes.c_int), ("loc_id", ctypes.c_int),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", ctypes.c_ubyte * 8)]


def main():
    try:
        import torch
    except ImportError as e:
        print(f"E2: torch not importable ({e}); skipped")
        return 77
    if not torch.cuda.is_available():
        print("E2: torch sees no GPU; skipped")
        return 77
    print("E2: torch", torch.__version__, "PYTORCH_CUDA_ALLOC_CONF =",
          os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "(unset)"), flush=True)
    cu = ctypes.CDLL("libcuda.so.1")
    if cu.cuInit(0) != 0:
        print("E2: cuInit failed")
        return 1
    keep = []
    for mib in (1, 64):
        t = torch.empty(mib << 20, dtype=torch.uint8, device="cuda")
        keep.append(t)
        ptr = ctypes.c_uint64(t.data_ptr())
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        rc = cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr)
        print(f"E2: {mib} MiB tensor at {ptr.value:#x}: cuMemGetAddressRange rc={rc} base="
              f"{base.value:#x} size={size.value} (offset {ptr.value - base.value})", flush=True)
        handle = ctypes.c_uint64()
        rc = cu.cuMemRetainAllocationHandle(ctypes.byref(handle), ctypes.c_void_p(ptr.value))
        if rc != 0:
            print(f"E2: {mib} MiB: cuMemRetainAllocationHandle rc={rc}: not a VMM allocation "
                  "(expandable segments off?): zero-copy would take the IPC-handle path")
            continue
        prop = Prop()
        rc = cu.cuMemGetAllocationPropertiesFromHandle(ctypes.byref(prop), handle)
        print(f"E2: {mib} MiB: VMM allocation; properties rc={rc} requestedHandleTypes="
              f"{prop.requestedHandleTypes:#x} (1 POSIX fd, 8 fabric)", flush=True)
        fd = ctypes.c_int(-1)
        rc = cu.cuMemExportToShareableHandle(ctypes.byref(fd), handle, POSIX_FD, ctypes.c_ulonglong(0))
        if rc == 0:
            print(f"E2: {mib} MiB: exported as POSIX fd {fd.value}: tpcomm can register it")
            os.close(fd.value)
        else:
            print(f"E2: {mib} MiB: POSIX fd export rc={rc}: tpcomm cannot register this "
                  "tensor by fd (graph calls on it keep copying)")
        cu.cuMemRelease(handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
