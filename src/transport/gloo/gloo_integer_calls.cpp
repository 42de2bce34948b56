// Integer calls over Gloo (gloo_integer_calls.hpp): Gloo's allreduce in the call's own type,
// reduced exactly by int_reduce.hpp.
#include "gloo_integer_calls.hpp"

#include <gloo/allreduce.h>

#include <cstring>

#include "kernels/cpu/int_reduce.hpp"

namespace tpcomm::transport {
namespace {

template <typename T>
void gloo_allreduce_as(const GlooGroup& g, void* data, std::size_t count, DataType type,
                       ReduceOp op, std::uint64_t sequence) {
  gloo::AllreduceOptions opts(g.context);
  opts.setOutput(static_cast<T*>(data), count);
  opts.setReduceFunction([type, op](void* out, const void* a, const void* b, std::size_t n) {
    const void* both[] = {a, b};
    kernels::cpu::reduce_ints(both, 2, n, type, op, out);
  });
  opts.setTag(data_tag(sequence));
  opts.setTimeout(g.timeout);
  gloo::allreduce(opts);
}

// Reduces `count` integers of `type` in place across ranks: Gloo's allreduce in the call's own
// type, exact (int_reduce.hpp).
void reduce_ints_across(const GlooGroup& g, void* data, std::size_t count, DataType type,
                        ReduceOp op, std::uint64_t sequence) {
  if (count == 0) return;
  switch (type) {
    case DataType::kInt32:
      return gloo_allreduce_as<std::int32_t>(g, data, count, type, op, sequence);
    case DataType::kInt64:
      return gloo_allreduce_as<std::int64_t>(g, data, count, type, op, sequence);
    default:
      return gloo_allreduce_as<std::uint8_t>(g, data, count, type, op, sequence);
  }
}

}  // namespace

// Integers, larger than the opening exchange carries: an all-reduce in place in the job's copy
// (staged in `output`); a reduce-scatter all-reduces the job's copy of its whole input and keeps
// its block (W times the bytes of a ring, for calls that carry indices and counts, not
// activations).
void reduce_integer_call(const GlooGroup& g, const Call& c) {
  if (c.op == Op::kAllReduce) {
    return reduce_ints_across(g, c.output, c.count, c.type, c.reduce, c.sequence);
  }
  const std::size_t block = c.count * size_of(c.type);
  auto* all = static_cast<std::uint8_t*>(const_cast<void*>(c.input));  // the job's copy
  reduce_ints_across(g, all, c.count * static_cast<std::size_t>(g.size), c.type, c.reduce,
                     c.sequence);
  std::memcpy(c.output, all + static_cast<std::size_t>(g.rank) * block, block);
}

}  // namespace tpcomm::transport
