// The thread's store deadline scope (store_request_deadline.hpp).
#include "store_request_deadline.hpp"

namespace tpcomm::control {
namespace {

thread_local std::optional<Deadline> scope_deadline;

}  // namespace

ScopedStoreDeadline::ScopedStoreDeadline(const Deadline& deadline) : outer_(scope_deadline) {
  scope_deadline = within_store_scope(deadline);
}

ScopedStoreDeadline::~ScopedStoreDeadline() {
  scope_deadline = outer_;
}

Deadline within_store_scope(const Deadline& deadline) {
  if (scope_deadline && scope_deadline->at() < deadline.at()) return *scope_deadline;
  return deadline;
}

}  // namespace tpcomm::control
