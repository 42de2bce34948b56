// Reading a whole text file with an error that names it.
#pragma once

#include <string>
#include <string_view>

namespace tpcomm::detail {

// The whole file; throws kInvalidInput naming `what`, the path and the system's reason.
std::string read_text_file(const std::string& path, std::string_view what);

}  // namespace tpcomm::detail
