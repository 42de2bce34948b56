// Reading a whole text file with an error that names it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tpcomm::detail {

// Facts and tuning documents are a few KiB to a few MiB; anything larger is a mistake.
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{64} << 20;

// The whole file; throws kInvalidInput naming `what`, the path and the reason: the system's, or
// not a regular file (a FIFO or a device), or larger than kMaxTextFileBytes.
std::string read_text_file(const std::string& path, std::string_view what);

}  // namespace tpcomm::detail
