// Names of backends, operations, modes and algorithms, and which belong together.
#include <fmt/format.h>

#include "tpcomm/error.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm {

std::string_view to_string(Backend backend) {
  switch (backend) {
    case Backend::kLocal:
      return "local";
    case Backend::kCustom:
      return "custom";
    case Backend::kMultimem:
      return "multimem";
    case Backend::kNccl:
      return "nccl";
    case Backend::kShm:
      return "shm";
    case Backend::kGloo:
      return "gloo";
    case Backend::kHier:
      return "hier";
  }
  return "unknown";
}

std::string_view to_string(Op op) {
  switch (op) {
    case Op::kAllReduce:
      return "all_reduce";
    case Op::kAllGather:
      return "all_gather";
    case Op::kReduceScatter:
      return "reduce_scatter";
  }
  return "unknown";
}

std::string_view to_string(Mode mode) {
  return mode == Mode::kGraph ? "graph" : "eager";
}

std::optional<Backend> backend_from_string(std::string_view name) {
  for (Backend b : {Backend::kLocal, Backend::kCustom, Backend::kMultimem, Backend::kNccl,
                    Backend::kShm, Backend::kGloo, Backend::kHier}) {
    if (to_string(b) == name) return b;
  }
  return std::nullopt;
}

const std::vector<Backend>& backends_of(DeviceType type) {
  static const std::vector<Backend> cuda = {Backend::kLocal, Backend::kCustom, Backend::kMultimem,
                                            Backend::kNccl};
  static const std::vector<Backend> cpu = {Backend::kLocal, Backend::kShm, Backend::kHier,
                                           Backend::kGloo};
  return type == DeviceType::kCuda ? cuda : cpu;
}

Backend fallback_backend(DeviceType type) {
  return type == DeviceType::kCuda ? Backend::kNccl : Backend::kGloo;
}

const std::vector<std::string_view>& algorithms_of(Backend backend, Op op) {
  static const std::vector<std::string_view> copy = {"copy"};
  static const std::vector<std::string_view> one_two = {"one_shot", "two_shot"};
  static const std::vector<std::string_view> one = {"one_shot"};
  static const std::vector<std::string_view> ld_reduce = {"ld_reduce"};
  static const std::vector<std::string_view> st = {"st"};
  static const std::vector<std::string_view> nccl = {"nccl"};
  static const std::vector<std::string_view> gloo = {"gloo"};
  static const std::vector<std::string_view> hierarchical = {"hierarchical"};
  switch (backend) {
    case Backend::kLocal:
      return copy;
    case Backend::kCustom:
    case Backend::kShm:
      return op == Op::kAllReduce ? one_two : one;
    case Backend::kMultimem:
      return op == Op::kAllGather ? st : ld_reduce;
    case Backend::kNccl:
      return nccl;
    case Backend::kGloo:
      return gloo;
    case Backend::kHier:
      return hierarchical;
  }
  throw Error(ErrorCode::kInternal, "algorithms_of: unknown backend");
}

bool takes_blocks(Backend backend) {
  return backend == Backend::kCustom || backend == Backend::kMultimem;
}

}  // namespace tpcomm
