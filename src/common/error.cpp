// Names of error codes, as printed in logs and by the CLI.
#include "tpcomm/error.hpp"

namespace tpcomm {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidInput:
      return "invalid input";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kMismatch:
      return "mismatch";
    case ErrorCode::kAborted:
      return "aborted";
    case ErrorCode::kInternal:
      return "internal error";
  }
  return "unknown error";
}

}  // namespace tpcomm
