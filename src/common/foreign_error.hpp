// A failure that is not a tpcomm::Error (std::bad_alloc, std::system_error, a bug's
// std::logic_error) as one, so that only tpcomm::Error leaves the API (docs/errors.md).
#pragma once

#include <exception>
#include <string_view>

#include "tpcomm/error.hpp"

namespace tpcomm::common {

// kUnavailable for memory and system resources, kInternal for anything else; the message starts
// with `context` ("rank 1: all_gather") and names what was thrown. A tpcomm::Error is returned
// as it is.
Error as_error(std::string_view context, const std::exception& e);

// Runs body(); anything it throws that is not a tpcomm::Error is rethrown as one (as_error).
template <typename Body>
auto only_tpcomm_errors(std::string_view context, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw as_error(context, e);
  }
}

}  // namespace tpcomm::common
