// Buffer checks of a call on its own rank (call_checks.hpp): sizes, the address space, overlap.
// Messages are formatted only on a refusal: these run on every call.
#include "call_checks.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "tpcomm/error.hpp"
#include "transport/common/call_sizes.hpp"
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

namespace {

// The root of a rooted call is a rank of the group (every rank checks the same value).
template <typename Name>
void check_root(const Name& call, const transport::Call& c, int rank, int size) {
  if (!is_rooted(c.op) || (c.root >= 0 && c.root < size)) return;
  throw invalid_input(fmt::format("rank {}: {}: root {} is not a rank of this group of {}", rank,
                                  call(), c.root, size));
}

// all_to_allv's counts: both given, and each buffer's sum fits in size_t.
template <typename Name>
std::size_t counts_sum(const Name& call, const std::size_t* counts, const char* which, int rank,
                       int size) {
  if (counts == nullptr) {
    throw invalid_input(fmt::format("rank {}: {}: no {} counts", rank, call(), which));
  }
  std::size_t sum = 0;
  for (int r = 0; r < size; ++r) {
    if (__builtin_add_overflow(sum, counts[r], &sum)) {
      throw invalid_input(
          fmt::format("rank {}: {}: the {} counts add up to more than size_t "
                      "holds",
                      rank, call(), which));
    }
  }
  return sum;
}

// How many blocks of `count` a call's input and its output hold on `rank` (0: no such buffer
// there, off a rooted call's root).
std::pair<std::size_t, std::size_t> block_multiples(const transport::Call& call, int rank,
                                                    int size) {
  const auto ranks = static_cast<std::size_t>(size);
  const bool root = rank == call.root;
  switch (call.op) {
    case Op::kReduceScatter:
      return {ranks, 1};
    case Op::kAllGather:
      return {1, ranks};
    case Op::kAllToAll:
      return {ranks, ranks};
    case Op::kGather:
      return {1, root ? ranks : 0};
    case Op::kScatter:
      return {root ? ranks : 0, 1};
    case Op::kReduce:
      return {1, root ? 1 : 0};
    default:
      return {1, 1};
  }
}

}  // namespace

void check_call_buffers(const transport::Call& call, int rank, int size) {
  const auto name = [&] { return transport::call_signature(call); };
  if (call.op == Op::kAllReduceRmsNorm) check_norm(call, rank);
  check_root(name, call, rank, size);
  const auto [in_ranks, out_ranks] = block_multiples(call, rank, size);
  const std::size_t block = bytes_of(name, "input", call.count, call.type, 1, rank);
  Range in{reinterpret_cast<std::uintptr_t>(call.input), 0};
  Range out{reinterpret_cast<std::uintptr_t>(call.output), 0};
  const bool per_rank = transport::per_rank_counts(call);
  if (per_rank) {
    counts_sum(name, call.recv_counts, "per-rank", rank, size);  // fits: `count` is their sum
    const std::size_t mine = call.recv_counts[static_cast<std::size_t>(rank)];
    const bool gathers = call.op == Op::kAllGather;
    in.bytes = bytes_of(name, "input", gathers ? mine : call.count, call.type, 1, rank);
    out.bytes = bytes_of(name, "output", gathers ? call.count : mine, call.type, 1, rank);
  } else if (call.op == Op::kAllToAll &&
             (call.send_counts != nullptr || call.recv_counts != nullptr)) {
    in.bytes = bytes_of(name, "input", counts_sum(name, call.send_counts, "send", rank, size),
                        call.type, 1, rank);
    out.bytes = bytes_of(name, "output", counts_sum(name, call.recv_counts, "receive", rank, size),
                         call.type, 1, rank);
  } else {
    in.bytes = bytes_of(name, "input", call.count, call.type, in_ranks, rank);
    out.bytes = bytes_of(name, "output", call.count, call.type, out_ranks, rank);
  }
  const auto null_buffer = [&](const char* buffer, std::size_t bytes) {
    throw invalid_input(fmt::format("rank {}: {}: null {} for {} elements", rank, name(), buffer,
                                    bytes / size_of(call.type)));
  };
  if (in.bytes > 0 && call.input == nullptr) null_buffer("input", in.bytes);
  if (out.bytes > 0 && call.output == nullptr) null_buffer("output", out.bytes);
  if (in.bytes == 0 || out.bytes == 0) return;
  check_address_space(name, "input", in, rank);
  check_address_space(name, "output", out, rank);
  if (in.begin >= out.begin + out.bytes || out.begin >= in.begin + in.bytes) return;
  // The one exact in-place form of each op (the ones NCCL allows): the smaller buffer is block
  // `rank` (the root's for gather and scatter) of the larger one (the offset fits: it is below
  // the larger buffer's size). all_to_all has none: every rank's block moves.
  const std::uintptr_t at = static_cast<std::uintptr_t>(rank) * block;
  const bool gather = call.op == Op::kAllGather || call.op == Op::kGather;
  const bool scatter = call.op == Op::kReduceScatter || call.op == Op::kScatter;
  if (call.op != Op::kAllToAll && !per_rank &&
      (gather    ? in.begin == out.begin + at
       : scatter ? out.begin == in.begin + at
                 : in.begin == out.begin)) {
    return;
  }
  const std::string form =
      call.op == Op::kAllToAll || per_rank ? std::string("none (every block moves)")
      : gather ? fmt::format("input == output + rank * count elements (here {:#x})", out.begin + at)
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
