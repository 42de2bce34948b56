// What every call of the public Communicator API goes through (docs/communicator.md, "Threads"
// and "fork()"): refused in a fork() child, run one at a time in arrival order, and no exception
// but tpcomm::Error leaves it.
#pragma once

#include <string_view>

#include "communicator_impl.hpp"

namespace tpcomm::runtime {

template <typename Body>
auto guarded_call(detail::CommunicatorState& c, std::string_view what, Body&& body)
    -> decltype(body()) {
  c.refuse_in_forked_child(what);
  CallQueue::Turn turn(c.calls);
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw c.foreign_failure(what, e);
  }
}

}  // namespace tpcomm::runtime
