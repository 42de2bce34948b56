// Which backends serve which device type, and which algorithms each backend implements.
#include <fmt/format.h>

#include "tpcomm/error.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm {

const std::vector<Backend>& backends_of(DeviceType type) {
  static const std::vector<Backend> cuda = {Backend::kLocal, Backend::kCustom, Backend::kMultimem,
                                            Backend::kNccl};
  static const std::vector<Backend> cpu = {Backend::kLocal, Backend::kShm, Backend::kHier,
                                           Backend::kHierMpi, Backend::kGloo};
  return type == DeviceType::kCuda ? cuda : cpu;
}

std::optional<Backend> backend_for_type(Backend planned, DataType type) {
  const bool floating_only = planned == Backend::kCustom || planned == Backend::kMultimem;
  if (floating_only && !is_floating(type)) return Backend::kNccl;
  return std::nullopt;
}

Backend fallback_backend(DeviceType type) {
  return type == DeviceType::kCuda ? Backend::kNccl : Backend::kGloo;
}

const std::vector<Algorithm>& algorithms_of(Backend backend, Op op) {
  using A = Algorithm;
  static const std::vector<A> copy = {A::kCopy};
  static const std::vector<A> one_two = {A::kOneShot, A::kTwoShot};
  static const std::vector<A> one = {A::kOneShot};
  // shm: through the lanes, or each peer's input read where it lies (process_vm_readv).
  static const std::vector<A> one_two_single = {A::kOneShot, A::kTwoShot, A::kSingleCopy};
  static const std::vector<A> one_single = {A::kOneShot, A::kSingleCopy};
  static const std::vector<A> ld_reduce = {A::kLdReduce};
  static const std::vector<A> st = {A::kSt};
  static const std::vector<A> nccl = {A::kNccl};
  static const std::vector<A> gloo = {A::kGloo};
  static const std::vector<A> hierarchical = {A::kHierarchical};
  switch (backend) {
    case Backend::kLocal:
      return copy;
    case Backend::kCustom:
      return op == Op::kAllReduce || op == Op::kAllReduceRmsNorm ? one_two : one;
    case Backend::kShm:
      return op == Op::kAllReduce                          ? one_two_single
             : op == Op::kAllGather || op == Op::kAllToAll ? one_single
             : op == Op::kAllReduceRmsNorm                 ? one_two
                                                           : one;
    case Backend::kMultimem:
      return op == Op::kAllGather ? st : ld_reduce;
    case Backend::kNccl:
      return nccl;
    case Backend::kGloo:
      return gloo;
    case Backend::kHier:
    case Backend::kHierMpi:
      return hierarchical;
  }
  throw Error(ErrorCode::kInternal, "algorithms_of: unknown backend");
}

std::optional<std::string> why_not_serving(Backend backend, Op op) {
  const bool staged_three =
      op == Op::kAllReduce || op == Op::kAllGather || op == Op::kReduceScatter;
  if (staged_three) return std::nullopt;
  switch (backend) {
    case Backend::kHier:
    case Backend::kHierMpi:
      // A message crosses between its two ranks once whatever the route, and the lanes join
      // only ranks of one local index: gloo's pairs join every two ranks.
      if (op != Op::kSendRecv) return std::nullopt;
      return fmt::format(
          "{} stages collectives only; gloo's direct pairs carry point-to-point messages",
          to_string(backend));
    case Backend::kCustom:
      if (op == Op::kAllReduceRmsNorm) return std::nullopt;
      return fmt::format(
          "custom's kernels serve all_reduce, all_gather, reduce_scatter and all_reduce_rmsnorm "
          "only; nccl carries the others");
    case Backend::kMultimem:
      return fmt::format(
          "multimem's kernels serve all_reduce, all_gather and reduce_scatter only; nccl carries "
          "the others");
    default:
      return std::nullopt;
  }
}

bool takes_counts(Backend backend) {
  return backend != Backend::kCustom && backend != Backend::kMultimem;
}

bool takes_blocks(Backend backend) {
  return backend == Backend::kCustom || backend == Backend::kMultimem;
}

bool takes_step(Backend backend) {
  return backend == Backend::kShm;
}

bool keeps_rank_order(Backend backend) {
  return backend == Backend::kShm || backend == Backend::kLocal || backend == Backend::kCustom;
}

bool fuses_rmsnorm(Backend backend) {
  return backend == Backend::kShm || backend == Backend::kCustom;
}

}  // namespace tpcomm
