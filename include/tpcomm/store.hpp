// A key-value store for rendezvous: the TCP store (one server, many clients) and an in-memory
// store for tests. Every wait takes a deadline and reports the keys still missing.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tpcomm/deadline.hpp"

namespace tpcomm {

using Bytes = std::vector<std::uint8_t>;

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // The value, or nullopt when the key is absent (does not wait).
  virtual std::optional<Bytes> get(const std::string& key) = 0;
  // Waits until every key exists or the deadline passes; returns the keys still missing
  // (empty: all present).
  virtual std::vector<std::string> wait_for(const std::vector<std::string>& keys,
                                            const Deadline& deadline) = 0;
  // wait_for that looks for at most `look` and returns the keys still missing then, for a caller
  // that checks something else between looks. `deadline` is the caller's own: an answer that the
  // network delays (a lost packet waits for TCP's retry, 200 ms or more) may arrive until then
  // and still counts. A look with a deadline of its own would call a late answer a lost store.
  virtual std::vector<std::string> wait_briefly(const std::vector<std::string>& keys,
                                                std::chrono::milliseconds look,
                                                const Deadline& deadline) {
    return wait_for(keys, Deadline::after(std::min(look, deadline.remaining())));
  }
  // Adds delta to the integer stored at key (absent: 0) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  // Stores `desired` when the current value equals `expected` (nullopt: the key is absent).
  // Returns the value stored afterwards.
  virtual Bytes compare_set(const std::string& key, const std::optional<Bytes>& expected,
                            const Bytes& desired) = 0;
  // Deletes a key; false when it was absent.
  virtual bool remove(const std::string& key) = 0;
  // Number of keys held (for diagnostics and leak tests).
  virtual std::size_t size() = 0;
  // A key that the TCP store deletes when this client's connection closes, so peers can tell
  // that a process is gone (kill -9 included). Other stores keep it as an ordinary key.
  virtual void set_ephemeral(const std::string& key, const Bytes& value) { set(key, value); }
  // Stores `value` at key when the key is absent, ephemeral like set_ephemeral; returns the value
  // held afterwards (`value` itself when this client claimed the key). How a rank takes its slot
  // in a group so that a second process with the same rank is noticed.
  virtual Bytes claim_ephemeral(const std::string& key, const Bytes& value) {
    return compare_set(key, std::nullopt, value);
  }

  // The longest a request without a deadline of its own (all but wait_for) waits for its answer;
  // a communicator sets its timeout here at creation. The TCP store starts with the budget of the
  // deadline it was connected with; others answer at once and ignore it.
  virtual void set_request_timeout(std::chrono::milliseconds /*timeout*/) {}

  // wait_for that throws kTimeout naming the missing keys.
  void wait(const std::vector<std::string>& keys, const Deadline& deadline);
};

// A thread-safe store in this process.
std::shared_ptr<Store> make_memory_store();

}  // namespace tpcomm
