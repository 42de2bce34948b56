// Reading a whole text file, and replacing one, with an error that names it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tpcomm::common {

// Facts and tuning documents are a few KiB to a few MiB; anything larger is a mistake.
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{64} << 20;

// The whole file; throws kInvalidInput naming `what`, the path and the reason: the system's, or
// not a regular file (a FIFO or a device), or larger than kMaxTextFileBytes.
std::string read_text_file(const std::string& path, std::string_view what);

// Replaces the file at `path` with `text`, or creates it: written to a fresh file beside it
// (mkstemp: never an existing name, never through a link someone left there) and renamed over it,
// so a reader sees the old or the new file. Only a regular file is replaced: a FIFO, a device
// node, a directory, a socket or a symbolic link at `path` stays as it was (renaming over /dev/full
// as root would make it a regular file). Throws kInvalidInput naming the path and the reason.
void replace_text_file(const std::string& path, std::string_view text);

}  // namespace tpcomm::common
