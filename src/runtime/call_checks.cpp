// Buffer checks of a call on its own rank (call_checks.hpp): sizes, the address space, overlap.
// Messages are formatted only on a refusal: these run on every call.
#include "call_checks.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "tpcomm/error.hpp"
#include "transport/common/call_text.hpp"

namespace tpcomm::runtime {
namespace {

// A buffer's place: [begin, begin + bytes).
struct Range {
  std::uintptr_t begin = 0;
  std::size_t bytes = 0;
};

std::string text(Range r) {
  return fmt::format("[{:#x}, {:#x})", r.begin, r.begin + r.bytes);
}

// count x element size x ranks, or kInvalidInput: no buffer holds more bytes than size_t counts,
// and the backends' own size arithmetic would wrap around (shm and hier crashed, a Gloo
// all-gather returned success on the wrapped size). `call` names the call in the message.
template <typename Name>
std::size_t bytes_of(const Name& call, const char* buffer, std::size_t count, DataType type,
                     std::size_t ranks, int rank) {
  std::size_t bytes = 0;
  if (!__builtin_mul_overflow(count, size_of(type), &bytes) &&
      !__builtin_mul_overflow(bytes, ranks, &bytes)) {
    return bytes;
  }
  const std::string per_rank = ranks > 1 ? fmt::format(" x {} ranks", ranks) : "";
  throw invalid_input(fmt::format(
      "rank {}: {}: the {}'s size, {} elements x {} bytes{}, does not fit in size_t (at most {} "
      "bytes), so no buffer can hold it; the count is in elements (per rank for all_gather and "
      "reduce_scatter), not bytes",
      rank, call(), buffer, count, size_of(type), per_rank,
      std::numeric_limits<std::size_t>::max()));
}

template <typename Name>
void check_address_space(const Name& call, const char* buffer, Range r, int rank) {
  if (r.bytes <= std::numeric_limits<std::uintptr_t>::max() - r.begin) return;
  throw invalid_input(
      fmt::format("rank {}: {}: the {} at {:#x} with {} bytes runs past the end of the address "
                  "space",
                  rank, call(), buffer, r.begin, r.bytes));
}

}  // namespace

void check_call_buffers(const transport::Call& call, int rank, int size) {
  const auto name = [&] { return transport::call_signature(call); };
  const auto ranks = static_cast<std::size_t>(size);
  const bool scatter = call.op == Op::kReduceScatter;
  const bool gather = call.op == Op::kAllGather;
  const std::size_t block = bytes_of(name, "input", call.count, call.type, 1, rank);
  const Range in{reinterpret_cast<std::uintptr_t>(call.input),
                 scatter ? bytes_of(name, "input", call.count, call.type, ranks, rank) : block};
  const Range out{reinterpret_cast<std::uintptr_t>(call.output),
                  gather ? bytes_of(name, "output", call.count, call.type, ranks, rank) : block};
  // A null buffer (of a call with elements) is the communicator's own check, with its message.
  if (block == 0 || call.input == nullptr || call.output == nullptr) return;
  check_address_space(name, "input", in, rank);
  check_address_space(name, "output", out, rank);
  if (in.begin >= out.begin + out.bytes || out.begin >= in.begin + in.bytes) return;
  // The one exact in-place form of each op (the ones NCCL allows): the smaller buffer is block
  // `rank` of the larger one (the offset fits: it is below the larger buffer's size).
  const std::uintptr_t at = static_cast<std::uintptr_t>(rank) * block;
  if (gather    ? in.begin == out.begin + at
      : scatter ? out.begin == in.begin + at
                : in.begin == out.begin) {
    return;
  }
  const std::string form =
      gather ? fmt::format("input == output + rank * count elements (here {:#x})", out.begin + at)
      : scatter ? fmt::format("output == input + rank * count elements (here {:#x})", in.begin + at)
                : std::string("input == output");
  throw invalid_input(fmt::format(
      "rank {}: {}: the input {} and the output {} overlap, which only {}'s exact in-place form "
      "may: {}; pass buffers that do not overlap, or that form",
      rank, name(), text(in), text(out), to_string(call.op), form));
}

void check_broadcast_buffer(const void* buffer, std::size_t count, DataType type, int rank) {
  const auto name = [&] { return fmt::format("broadcast({} x {})", to_string(type), count); };
  const Range r{reinterpret_cast<std::uintptr_t>(buffer),
                bytes_of(name, "buffer", count, type, 1, rank)};
  if (buffer != nullptr) check_address_space(name, "buffer", r, rank);
}

}  // namespace tpcomm::runtime
