// What a failed call's error adds about its peers (CommunicatorState::peer_report): which ranks
// are gone, which one the others waited for, whether a peer aborted first, or why the store
// could not say.
#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "common/rank_list.hpp"
#include "communicator_impl.hpp"
#include "control/store_request_deadline.hpp"

namespace tpcomm::detail {

std::string CommunicatorState::timeout_report(Store& store, std::uint64_t call) {
  // Ranks that time out in the same call say so; the ones that do not within a moment are the
  // ones everybody waited for (stopped, or stuck outside tpcomm).
  const std::string prefix = fmt::format("tpcomm/c{:016x}/timeout/{}/", comm_id, call);
  store.set(prefix + std::to_string(bootstrap->rank()), Bytes{1});
  std::vector<std::string> keys;
  for (int r = 0; r < bootstrap->size(); ++r) keys.push_back(prefix + std::to_string(r));
  const auto missing = store.wait_for(keys, Deadline::after(std::chrono::milliseconds(300)));
  // Then the ranks that reported leave together: the first to return may end its process (with
  // it the store, where that rank serves it) and a launcher such as mpirun ends the whole job on
  // that exit, so a rank still waiting above would lose its report, or be stopped before it
  // prints its error.
  const std::string read_prefix = prefix + "read/";
  store.set(read_prefix + std::to_string(bootstrap->rank()), Bytes{1});
  std::vector<std::string> readers;
  for (int r = 0; r < bootstrap->size(); ++r) {
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
      detail::rank_set_text(silent), call, silent.size() == 1 ? "it is" : "they are",
      silent.size() == 1 ? "" : "s");
}

std::string CommunicatorState::peer_report(bool timed_out, std::uint64_t call) {
  // However the store fails, the report adds at most this to the call's own deadline.
  const control::ScopedStoreDeadline bound(Deadline::after(std::chrono::milliseconds(1000)));
  try {
    auto store = bootstrap->store();
    // A rank that closed the communicator said so; it is not gone, whatever its process does.
    std::vector<int> closed;
    for (int r = 0; r < bootstrap->size(); ++r) {
      if (r != bootstrap->rank() && store->get(closed_key(r))) closed.push_back(r);
    }
    if (!closed.empty()) {
      return fmt::format("; {} closed the communicator", detail::rank_set_text(closed));
    }
    // A dead process's store connection closes a moment after its sockets do: look twice.
    std::vector<int> gone;
    for (int attempt = 0; attempt < 4 && gone.empty(); ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      for (int r = 0; r < bootstrap->size(); ++r) {
        if (r != bootstrap->rank() && !store->get(presence_key(r))) gone.push_back(r);
      }
    }
    std::string report;
    if (!gone.empty()) {
      report += fmt::format("; {} gone (the process ended: its store connection closed)",
                            detail::rank_set_text(gone));
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
    const auto* e = dynamic_cast<const Error*>(&failure);
    if (e != nullptr && e->code() == ErrorCode::kTimeout) {
      // No answer (not a closed connection): the network to the store is cut, or its host
      // stopped; nothing was heard from the other ranks through it.
      std::vector<int> others;
      for (int r = 0; r < bootstrap->size(); ++r) {
        if (r != bootstrap->rank()) others.push_back(r);
      }
      const std::string served =
          store_served_by ? fmt::format(", served by rank {},", *store_served_by) : "";
      return fmt::format("; the store{} is unreachable too: {}; not heard from: {}", served,
                         e->what(), detail::rank_set_text(others));
    }
    if (store_served_by && *store_served_by != bootstrap->rank()) {
      return fmt::format(
          "; the store, served by rank {}, is unreachable too: rank {} is gone, or "
          "its store stopped",
          *store_served_by, *store_served_by);
    }
    return "; the store is unreachable too";
  }
}

}  // namespace tpcomm::detail
