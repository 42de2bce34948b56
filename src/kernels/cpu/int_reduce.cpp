// Integer reductions (int_reduce.hpp).
#include "int_reduce.hpp"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tpcomm/error.hpp"

namespace tpcomm::kernels::cpu {
namespace {

template <typename T>
T apply(ReduceOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case ReduceOp::kMax:
      return a < b ? b : a;
    case ReduceOp::kMin:
      return b < a ? b : a;
    default:
      // Unsigned arithmetic wraps where signed overflow would be undefined.
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
}

// A pass per source, each a loop over three pointers the compiler vectorises. Integer results do
// not depend on the order of the ranks, so a source that is `out` itself (an in-place call) is
// taken first, before `out` is written.
template <typename T, ReduceOp Op>
void reduce_typed(const void* const* srcs, int ranks, std::size_t count, void* out) {
  auto* o = static_cast<T*>(out);
  int first = 0;
  for (int r = 0; r < ranks; ++r) {
    if (srcs[r] == out) first = r;
  }
  auto source = [&](int k) {  // the sources with `first` swapped to the front
    return static_cast<const T*>(srcs[k == 0 ? first : k == first ? 0 : k]);
  };
  const T* a = source(0);
  if (ranks == 1) {
    if (a != o) std::memcpy(o, a, count * sizeof(T));
    return;
  }
  const T* b = source(1);
  for (std::size_t i = 0; i < count; ++i) o[i] = apply(Op, a[i], b[i]);
  for (int r = 2; r < ranks; ++r) {
    const T* s = source(r);
    for (std::size_t i = 0; i < count; ++i) o[i] = apply(Op, o[i], s[i]);
  }
}

template <typename T>
void reduce_as(const void* const* srcs, int ranks, std::size_t count, ReduceOp op, void* out) {
  switch (op) {
    case ReduceOp::kMax:
      return reduce_typed<T, ReduceOp::kMax>(srcs, ranks, count, out);
    case ReduceOp::kMin:
      return reduce_typed<T, ReduceOp::kMin>(srcs, ranks, count, out);
    case ReduceOp::kSum:
      return reduce_typed<T, ReduceOp::kSum>(srcs, ranks, count, out);
    case ReduceOp::kAvg:
      break;
  }
  throw Error(ErrorCode::kInternal, "an integer reduction was asked for avg");
}

}  // namespace

void reduce_ints(const void* const* srcs, int ranks, std::size_t count, DataType type, ReduceOp op,
                 void* out) {
  if (count == 0) return;
  switch (type) {
    case DataType::kInt32:
      return reduce_as<std::int32_t>(srcs, ranks, count, op, out);
    case DataType::kInt64:
      return reduce_as<std::int64_t>(srcs, ranks, count, op, out);
    case DataType::kUInt8:
      return reduce_as<std::uint8_t>(srcs, ranks, count, op, out);
    default:
      break;
  }
  throw Error(ErrorCode::kInternal, "reduce_ints called with a floating-point type");
}

}  // namespace tpcomm::kernels::cpu
