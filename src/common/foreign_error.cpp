#include "foreign_error.hpp"

#include <new>
#include <system_error>
#include <typeinfo>

#include <fmt/format.h>

namespace tpcomm::common {

Error as_error(std::string_view context, const std::exception& e) {
  if (const auto* ours = dynamic_cast<const Error*>(&e)) return *ours;
  if (dynamic_cast<const std::bad_alloc*>(&e)) {
    return Error(ErrorCode::kUnavailable,
                 fmt::format("{} failed: out of memory ({})", context, e.what()));
  }
  if (const auto* s = dynamic_cast<const std::system_error*>(&e)) {
    return Error(ErrorCode::kUnavailable,
                 fmt::format("{} failed: {} ({})", context, s->what(), s->code().message()));
  }
  return Error(ErrorCode::kInternal,
               fmt::format("{} failed: {}: {}", context, typeid(e).name(), e.what()));
}

}  // namespace tpcomm::common
