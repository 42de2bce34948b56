// Helpers shared by the tpcomm subcommands: reading files, sizes for humans, padding.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tpcomm::cli {

// The whole file; throws kInvalidInput naming the path and the system's reason.
std::string read_text_file(const std::string& path, std::string_view what);

// 262144 -> "256 KiB", 8388608 -> "8 MiB", 1000 -> "1000 B".
std::string format_bytes(std::uint64_t bytes);

// Left-aligns text in a column of `width` characters.
std::string pad(std::string_view text, std::size_t width);

}  // namespace tpcomm::cli
