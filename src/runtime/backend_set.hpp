// The backends a communicator set up, and the lock that keeps an abort (from any thread, such as
// a kernel watchdog's) away from a backend that close() is destroying.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "tpcomm/stage_time.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::runtime {

class BackendSet {
 public:
  using Map = std::map<Backend, std::unique_ptr<transport::CollectiveBackend>>;

  BackendSet() = default;
  ~BackendSet();
  BackendSet(const BackendSet&) = delete;
  BackendSet& operator=(const BackendSet&) = delete;

  // Set-up adds each backend once its steps passed every rank's vote.
  void add(Backend kind, std::unique_ptr<transport::CollectiveBackend> backend);
  bool has(Backend kind) const;
  // Calls read the backends without the lock: a call never overlaps close() (the call gate waits
  // for the calls in flight first).
  transport::CollectiveBackend& at(Backend kind) const;
  const Map& all() const { return map_; }

  // Each under the lock, in the (map) order every rank shares.
  void abort_all();
  void announce_close_all();
  std::vector<StageTime> stage_times() const;
  // Takes every backend out under the lock and destroys them outside it: destroying one joins
  // its watchdog thread, which may be waiting for the lock in abort_all.
  void close_all();

 private:
  mutable std::mutex mutex_;
  Map map_;
};

}  // namespace tpcomm::runtime
