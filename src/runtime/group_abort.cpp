// GroupAbort (group_abort.hpp): the first cause, its publication, close notices, and what a
// failed call's error adds about the peers.
#include "group_abort.hpp"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "common/rank_list.hpp"
#include "control/store_request_deadline.hpp"

namespace tpcomm::runtime {

void GroupAbort::identify(std::uint64_t comm_id, std::optional<int> store_served_by) {
  comm_id_ = comm_id;
  store_served_by_ = store_served_by;
}

std::string GroupAbort::presence_key(int r) const {
  return fmt::format("tpcomm/c{:016x}/alive/{}", comm_id_, r);
}

std::string GroupAbort::abort_key() const {
  return fmt::format("tpcomm/c{:016x}/abort", comm_id_);
}

std::string GroupAbort::closed_key(int r) const {
  return fmt::format("tpcomm/c{:016x}/closed/{}", comm_id_, r);
}

void GroupAbort::abort_with(const Error& cause) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cause_) return;
    cause_ = cause;
  }
  // Outside the mutex (aborted() and a fork() child never wait on store I/O), and briefly: the
  // first cause, for the peers' messages (peer_report), is published before the backends close
  // the connections whose end the peers notice first; a store that does not answer at once
  // delays the abort by at most this.
  if (bootstrap_) {  // released by close(): nobody is left to tell through the store
    try {
      const control::ScopedStoreDeadline bound(Deadline::after(std::chrono::milliseconds(250)));
      const std::string text = cause.what();
      bootstrap_->store()->compare_set(abort_key(), std::nullopt, Bytes(text.begin(), text.end()));
    } catch (const std::exception&) {
      // Best effort: the peers still fail when the connections close, or at their deadlines.
    }
  }
  // The backends tell the peers (on CUDA: the group's failure word in every workspace) before
  // this communicator refuses a call.
  backends_.abort_all();
  aborted_.store(true, std::memory_order_release);
}

void GroupAbort::throw_if_aborted() const {
  if (!aborted()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  throw Error(ErrorCode::kAborted,
              fmt::format("the communicator was aborted earlier: {}", cause_->what()));
}

void GroupAbort::announce_close() {
  if (aborted() || !bootstrap_) return;
  try {
    const control::ScopedStoreDeadline bound(Deadline::after(std::chrono::milliseconds(250)));
    auto store = bootstrap_->store();
    store->set(closed_key(bootstrap_->rank()), Bytes{1});
    // The last rank to close takes the keys away: nobody is left to read them.
    const std::string count = fmt::format("tpcomm/c{:016x}/closed/count", comm_id_);
    if (store->add(count, 1) == bootstrap_->size()) {
      for (int r = 0; r < bootstrap_->size(); ++r) store->remove(closed_key(r));
      store->remove(count);
    }
  } catch (const std::exception&) {
    // Best effort: the store's host closed first; the peers still learn it from shm.
  }
  backends_.announce_close_all();
}

std::string GroupAbort::timeout_report(Store& store, std::uint64_t call) {
  // Ranks that time out in the same call say so; the ones that do not within a moment are the
  // ones everybody waited for (stopped, or stuck outside tpcomm).
  const std::string prefix = fmt::format("tpcomm/c{:016x}/timeout/{}/", comm_id_, call);
  store.set(prefix + std::to_string(bootstrap_->rank()), Bytes{1});
  std::vector<std::string> keys;
  for (int r = 0; r < bootstrap_->size(); ++r) keys.push_back(prefix + std::to_string(r));
  const auto missing = store.wait_for(keys, Deadline::after(std::chrono::milliseconds(300)));
  // Then the ranks that reported leave together: the first to return may end its process (with
  // it the store, where that rank serves it) and a launcher such as mpirun ends the whole job on
  // that exit, so a rank still waiting above would lose its report, or be stopped before it
  // prints its error.
  const std::string read_prefix = prefix + "read/";
  store.set(read_prefix + std::to_string(bootstrap_->rank()), Bytes{1});
  std::vector<std::string> readers;
  for (int r = 0; r < bootstrap_->size(); ++r) {
    if (std::find(missing.begin(), missing.end(), prefix + std::to_string(r)) == missing.end())
      readers.push_back(read_prefix + std::to_string(r));
  }
  store.wait_for(readers, Deadline::after(std::chrono::milliseconds(300)));
  if (missing.empty()) return "";
  std::vector<int> silent;
  for (const auto& key : missing) silent.push_back(std::stoi(key.substr(prefix.size())));
  return fmt::format(
      "; {} did not time out in call #{} as the others did: {} the one{} they waited for "
      "(stopped, or cut off from the store)",
      common::rank_set_text(silent), call, silent.size() == 1 ? "it is" : "they are",
      silent.size() == 1 ? "" : "s");
}

std::string GroupAbort::peer_report(bool timed_out, std::uint64_t call) {
  // However the store fails, the report adds at most this to the call's own deadline.
  const control::ScopedStoreDeadline bound(Deadline::after(std::chrono::milliseconds(1000)));
  try {
    auto store = bootstrap_->store();
    // A rank that closed the communicator said so; it is not gone, whatever its process does.
    std::vector<int> closed;
    for (int r = 0; r < bootstrap_->size(); ++r) {
      if (r != bootstrap_->rank() && store->get(closed_key(r))) closed.push_back(r);
    }
    if (!closed.empty()) {
      return fmt::format("; {} closed the communicator", common::rank_set_text(closed));
    }
    // A dead process's store connection closes a moment after its sockets do: look twice.
    std::vector<int> gone;
    for (int attempt = 0; attempt < 4 && gone.empty(); ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      for (int r = 0; r < bootstrap_->size(); ++r) {
        if (r != bootstrap_->rank() && !store->get(presence_key(r))) gone.push_back(r);
      }
    }
    std::string report;
    if (!gone.empty()) {
      report += fmt::format("; {} gone (the process ended: its store connection closed)",
                            common::rank_set_text(gone));
    } else if (timed_out) {
      report += timeout_report(*store, call);
    }
    // After a timeout report the ranks left it together, and the store's host may be ending its
    // process already: what this read finds is extra, and its failure takes nothing away from
    // the report (it used to replace it with "the store is unreachable").
    try {
      if (auto cause = store->get(abort_key())) {
        report +=
            fmt::format("; a peer aborted first: {}", std::string(cause->begin(), cause->end()));
      }
    } catch (const std::exception&) {
      if (report.empty()) throw;
    }
    return report;
  } catch (const std::exception& failure) {
    return unreachable_store_report(failure);
  }
}

// Why the store could not say: no answer (the network to it is cut, or its host stopped), or
// its connection closed (the rank serving it is gone).
std::string GroupAbort::unreachable_store_report(const std::exception& failure) const {
  const auto* e = dynamic_cast<const Error*>(&failure);
  if (e != nullptr && e->code() == ErrorCode::kTimeout) {
    // No answer (not a closed connection): the network to the store is cut, or its host
    // stopped; nothing was heard from the other ranks through it.
    std::vector<int> others;
    for (int r = 0; r < bootstrap_->size(); ++r) {
      if (r != bootstrap_->rank()) others.push_back(r);
    }
    const std::string served =
        store_served_by_ ? fmt::format(", served by rank {},", *store_served_by_) : "";
    return fmt::format("; the store{} is unreachable too: {}; not heard from: {}", served,
                       e->what(), common::rank_set_text(others));
  }
  if (store_served_by_ && *store_served_by_ != bootstrap_->rank()) {
    return fmt::format(
        "; the store, served by rank {}, is unreachable too: rank {} is gone, or "
        "its store stopped",
        *store_served_by_, *store_served_by_);
  }
  return "; the store is unreachable too";
}

}  // namespace tpcomm::runtime
