// Loading NCCL once per process.
#include "nccl_library.hpp"

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {
namespace {

struct Loaded {
  NcclLibrary lib;
  std::string error;
};

Loaded load() {
  Loaded l;
  std::string why;
  l.lib.library = common::SharedLibrary::open("libnccl.so.2", &why);
  if (!l.lib.library) {
    l.error = fmt::format(
        "libnccl.so.2 cannot be loaded: {} (install NCCL or add its directory "
        "to LD_LIBRARY_PATH)",
        why);
    return l;
  }
  auto& s = *l.lib.library;
  s.bind(l.lib.get_version, "ncclGetVersion");
  s.bind(l.lib.get_unique_id, "ncclGetUniqueId");
  s.bind(l.lib.comm_init_rank_config, "ncclCommInitRankConfig");
  s.bind(l.lib.comm_get_async_error, "ncclCommGetAsyncError");
  s.bind(l.lib.comm_abort, "ncclCommAbort");
  s.bind(l.lib.comm_destroy, "ncclCommDestroy");
  s.bind(l.lib.comm_finalize, "ncclCommFinalize");
  s.bind(l.lib.all_reduce, "ncclAllReduce");
  s.bind(l.lib.all_gather, "ncclAllGather");
  s.bind(l.lib.reduce_scatter, "ncclReduceScatter");
  s.bind(l.lib.reduce, "ncclReduce");
  s.bind(l.lib.send, "ncclSend");
  s.bind(l.lib.recv, "ncclRecv");
  s.bind(l.lib.group_start, "ncclGroupStart");
  s.bind(l.lib.group_end, "ncclGroupEnd");
  s.bind(l.lib.get_error_string, "ncclGetErrorString");
  if (!s.missing().empty()) {
    l.error = fmt::format("libnccl.so.2 lacks {} (NCCL older than 2.14?)", s.missing());
    return l;
  }
  l.lib.get_version(&l.lib.version);
  return l;
}

}  // namespace

const NcclLibrary& nccl_library() {
  // Never destroyed: a static's destructor would dlclose NCCL at exit while the watchdog
  // thread of a communicator the program never destroyed may still call into it
  // (docs/gpu-graphs.md, "Teardown and exit races").
  static const Loaded& l = *new Loaded(load());
  if (!l.error.empty()) throw Error(ErrorCode::kUnavailable, l.error);
  return l.lib;
}

std::string nccl_version_text(int code) {
  // Since 2.9: major * 10000 + minor * 100 + patch.
  return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
}

}  // namespace tpcomm::transport
