// tpcomm::Error: the one exception type of the C++ API (see docs/errors.md).
#pragma once

#include <stdexcept>
#include <string>

namespace tpcomm {

// What kind of failure, so callers (and the CLI's exit status) can react without parsing text.
enum class ErrorCode {
  kInvalidInput,  // a malformed file, a bad argument or environment value: fix the input
  kUnavailable,   // a library, device or resource is missing on this machine
  kTimeout,       // a wait passed its deadline
  kMismatch,      // ranks disagree (plan digest, call signature)
  kAborted,       // the communicator was aborted earlier; the message carries the first cause
  kInternal,      // a bug in tpcomm: please report it
};

const char* to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// Shorthand for the most common kind: bad input that the user can fix.
inline Error invalid_input(const std::string& message) {
  return Error(ErrorCode::kInvalidInput, message);
}

}  // namespace tpcomm
