// NCCL (libnccl.so.2) loaded with dlopen: its types come from the toolkit's nccl.h, its code
// from whatever NCCL the machine has, so a build runs where NCCL is missing and says so.
#pragma once

#include <nccl.h>

#include <memory>
#include <string>

#include "common/shared_library.hpp"

namespace tpcomm::transport {

struct NcclLibrary {
  std::unique_ptr<common::SharedLibrary> library;
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommFinalize) comm_finalize = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&::ncclReduce) reduce = nullptr;
  decltype(&::ncclSend) send = nullptr;
  decltype(&::ncclRecv) recv = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
  decltype(&::ncclGetErrorString) get_error_string = nullptr;
  int version = 0;  // e.g. 22703 for 2.27.3
};

// The process's NCCL, or throws kUnavailable naming the library and what was missing.
const NcclLibrary& nccl_library();

// "2.27.3" from NCCL's version code.
std::string nccl_version_text(int code);

}  // namespace tpcomm::transport
