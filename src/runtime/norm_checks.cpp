// all_reduce_rmsnorm's checks on the calling rank (call_checks.hpp): its shape and its five
// buffers. Messages are formatted only on a refusal.
#include <array>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "call_checks.hpp"
#include "tpcomm/error.hpp"
#include "transport/common/call_text.hpp"

namespace tpcomm::runtime {
namespace {

struct Buffer {
  const char* role;
  std::uintptr_t begin;
  std::size_t bytes;
  bool written;
};

bool overlap(const Buffer& a, const Buffer& b) {
  return a.bytes > 0 && b.bytes > 0 && a.begin < b.begin + b.bytes && b.begin < a.begin + a.bytes;
}

// The two in-place forms: the norm written over the input, the residual updated where it lies.
bool exact_in_place(const Buffer& a, const Buffer& b) {
  const std::string_view x = a.role;
  const std::string_view y = b.role;
  const bool pair = (x == "input" && y == "output") || (x == "output" && y == "input") ||
                    (x == "residual" && y == "residual_out") ||
                    (x == "residual_out" && y == "residual");
  return pair && a.begin == b.begin && a.bytes == b.bytes;
}

}  // namespace

void check_norm(const transport::Call& call, int rank) {
  const auto refuse = [&](const std::string& why) {
    throw invalid_input(fmt::format(
        "rank {}: {}: {}", rank,
        call.norm ? transport::call_signature(call) : std::string("all_reduce_rmsnorm"), why));
  };
  if (call.norm == nullptr) refuse("no norm arguments (internal: Call::norm is null)");
  const RmsNorm& norm = *call.norm;
  if (!is_floating(call.type)) {
    refuse(
        fmt::format("{} is not a floating-point type: RMSNorm takes float32, bfloat16 or "
                    "float16",
                    to_string(call.type)));
  }
  constexpr std::size_t kMaxHidden = (std::size_t{1} << 30) - 1;
  if (norm.hidden == 0 || norm.hidden > kMaxHidden) {
    refuse(fmt::format("the row length (hidden) must be 1 to {}", kMaxHidden));
  }
  if (call.count % norm.hidden != 0) {
    refuse(
        fmt::format("{} elements are not whole rows of {}: the input, the residual and the "
                    "output hold rows x hidden elements",
                    call.count, norm.hidden));
  }
  if (norm.residual != nullptr && norm.residual_out == nullptr) {
    refuse("a residual without a residual_out (pass the residual itself to update it in place)");
  }
  if (norm.weight == nullptr && call.count > 0) refuse("no weight");
  // The sizes fit: check_call_buffers has checked count x element size.
  const std::size_t rows_bytes = call.count * size_of(call.type);
  const std::size_t weight_bytes = call.count > 0 ? norm.hidden * size_of(call.type) : 0;
  const auto at = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  const std::size_t residual_bytes = norm.residual ? rows_bytes : 0;
  const std::size_t residual_out_bytes = norm.residual_out ? rows_bytes : 0;
  const std::array<Buffer, 5> buffers = {{
      {"input", at(call.input), rows_bytes, false},
      {"output", at(call.output), rows_bytes, true},
      {"residual", at(norm.residual), residual_bytes, false},
      {"residual_out", at(norm.residual_out), residual_out_bytes, true},
      {"weight", at(norm.weight), weight_bytes, false},
  }};
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    for (std::size_t j = i + 1; j < buffers.size(); ++j) {
      const Buffer& a = buffers[i];
      const Buffer& b = buffers[j];
      if ((!a.written && !b.written) || !overlap(a, b) || exact_in_place(a, b)) continue;
      refuse(
          fmt::format("the {} [{:#x}, {:#x}) and the {} [{:#x}, {:#x}) overlap; the only "
                      "overlaps allowed are output == input and residual_out == residual "
                      "(the in-place forms)",
                      a.role, a.begin, a.begin + a.bytes, b.role, b.begin, b.begin + b.bytes));
    }
  }
}

}  // namespace tpcomm::runtime
