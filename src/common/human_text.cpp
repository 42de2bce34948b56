// Byte counts and table columns as text (human_text.hpp).
#include "common/human_text.hpp"

#include <fmt/format.h>

namespace tpcomm::common {

std::string format_bytes(std::uint64_t bytes) {
  constexpr std::uint64_t KiB = 1024;
  constexpr std::uint64_t MiB = KiB * 1024;
  constexpr std::uint64_t GiB = MiB * 1024;
  if (bytes >= GiB && bytes % GiB == 0) return fmt::format("{} GiB", bytes / GiB);
  if (bytes >= MiB && bytes % MiB == 0) return fmt::format("{} MiB", bytes / MiB);
  if (bytes >= KiB && bytes % KiB == 0) return fmt::format("{} KiB", bytes / KiB);
  return fmt::format("{} B", bytes);
}

std::string pad(std::string_view text, std::size_t width) {
  std::string out(text);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

}  // namespace tpcomm::common
