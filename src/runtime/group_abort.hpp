// How a communicator fails as a group: the first cause is kept (later calls throw kAborted with
// it), published in the store for the peers' messages, and the backends tell the peers at once;
// a rank that closes normally says so. After a failed call, peer_report says which peers are
// gone, closed, aborted first, or were the ones everybody waited for.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "backend_set.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::runtime {

class GroupAbort {
 public:
  GroupAbort(std::shared_ptr<Bootstrap> bootstrap, BackendSet& backends)
      : bootstrap_(std::move(bootstrap)), backends_(backends) {}

  // Once the group has its id (the same on every rank) and knows which rank serves its store.
  void identify(std::uint64_t comm_id, std::optional<int> store_served_by);
  // Lets go of the bootstrap once the communicator is closed: a later abort is only recorded.
  void release() { bootstrap_.reset(); }

  // Records the first cause (later ones are dropped), publishes it, aborts every backend, and
  // only then lets calls see aborted(): a refused call followed by a graph replay would shift
  // this rank's steps against its peers' (docs/gpu-kernels.md,
  // "The signalling protocol, checked").
  void abort_with(const Error& cause);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  // Throws kAborted with the first cause once aborted.
  void throw_if_aborted() const;

  // Store keys: each rank's presence (deleted by the store when the rank's process dies), the
  // first abort's cause, and each rank that closed normally.
  std::string presence_key(int rank) const;
  std::string abort_key() const;
  std::string closed_key(int rank) const;
  // A rank that closes normally (not aborted) tells its peers: its closed key names it in their
  // errors, and the backends end their waits on it at once (docs/communicator.md, "Closing").
  void announce_close();

  // After a failed call: which peers are gone, closed or aborted first, for the error message.
  // After a timeout of call `call` (timed_out), also which peers did not time out in it: an
  // engine that cannot say who is missing (Gloo, NCCL) still gets the stalled rank named.
  std::string peer_report(bool timed_out = false, std::uint64_t call = 0);

 private:
  std::string timeout_report(Store& store, std::uint64_t call);
  std::string unreachable_store_report(const std::exception& failure) const;

  std::shared_ptr<Bootstrap> bootstrap_;
  BackendSet& backends_;
  std::uint64_t comm_id_ = 0;
  std::optional<int> store_served_by_;
  mutable std::mutex mutex_;
  std::optional<Error> cause_;
  // Set (release) after cause_ is and the backends have told the peers: a call reads it without
  // taking the mutex.
  std::atomic<bool> aborted_{false};
};

}  // namespace tpcomm::runtime
