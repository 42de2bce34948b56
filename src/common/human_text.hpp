// Text for people: byte counts with their unit, and padded table columns (the plan's text,
// the tpcomm command's tables).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tpcomm::common {

// 262144 -> "256 KiB", 8388608 -> "8 MiB", 1000 -> "1000 B".
std::string format_bytes(std::uint64_t bytes);

// Left-aligns text in a column of `width` characters.
std::string pad(std::string_view text, std::size_t width);

}  // namespace tpcomm::common
