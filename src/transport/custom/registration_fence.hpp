// The barriers around a graph buffer registration (docs/gpu-graphs.md, "Registration against queued
// replays"). A replay enqueued before register_graph_buffers() may still run while the slots
// change: reading the flag set on one rank and not yet on another, the ranks would run different
// protocols (in place with an end barrier against copying without one) and one would read a buffer
// the other never filled. So every rank first drains its device (no replay queued before the call
// is still running) and the ranks meet, then the registration runs (its slot writes finish before
// it returns), and the ranks meet again, so that no rank's replay after the call starts before
// every rank's slots are written.
#pragma once

#include <cstddef>
#include <utility>

#include "tpcomm/bootstrap.hpp"
#include "tpcomm/deadline.hpp"

namespace tpcomm::transport::cuda {

// `drain()` waits for the device's queued work; `reg()` exchanges, votes and writes the slots
// and returns how many it registered. Both barriers have the registration's deadline.
template <class Drain, class Register>
std::size_t register_between_barriers(Bootstrap& bootstrap, const Deadline& deadline, Drain&& drain,
                                      Register&& reg) {
  std::forward<Drain>(drain)();
  bootstrap.barrier("graph buffer registration: every rank's queued replays finished", deadline);
  const std::size_t registered = std::forward<Register>(reg)();
  bootstrap.barrier("graph buffer registration: every rank's slots written", deadline);
  return registered;
}

}  // namespace tpcomm::transport::cuda
