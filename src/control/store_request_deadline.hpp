// A deadline for every store request a thread makes while a scope lives: what keeps the report
// after a failed call short when the store cannot be reached (docs/errors.md, "In a running
// group").
#pragma once

#include <optional>

#include "tpcomm/deadline.hpp"

namespace tpcomm::control {

// While it lives, no store request of this thread waits past `deadline` (nested scopes: the
// earliest deadline wins).
class ScopedStoreDeadline {
 public:
  explicit ScopedStoreDeadline(const Deadline& deadline);
  ~ScopedStoreDeadline();
  ScopedStoreDeadline(const ScopedStoreDeadline&) = delete;
  ScopedStoreDeadline& operator=(const ScopedStoreDeadline&) = delete;

 private:
  std::optional<Deadline> outer_;
};

// `deadline`, or the innermost scope's of this thread where that comes first.
Deadline within_store_scope(const Deadline& deadline);

}  // namespace tpcomm::control
