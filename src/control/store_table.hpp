// The semantics of a store's keys, written once: the in-memory store and the TCP store server
// both keep their data in a StoreTable and differ only in how requests reach it (a call under a
// mutex, a frame on a socket). Not thread-safe: its owner locks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tpcomm/store.hpp"

namespace tpcomm::control {

class StoreTable {
 public:
  void set(const std::string& key, Bytes value) { data_[key] = std::move(value); }
  // The value, or null when the key is absent.
  const Bytes* get(const std::string& key) const;
  // The keys of `keys` that are absent, in their order.
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;
  // Adds delta to the decimal integer at key (absent: 0) and returns the sum; a value that is not
  // an integer is a kInvalidInput error naming the key.
  std::int64_t add(const std::string& key, std::int64_t delta);
  // Stores `desired` when the value equals `expected` (nullopt: the key is absent); returns the
  // value held afterwards (empty when absent).
  Bytes compare_set(const std::string& key, const std::optional<Bytes>& expected, Bytes desired);
  bool remove(const std::string& key) { return data_.erase(key) > 0; }
  std::size_t size() const { return data_.size(); }

 private:
  std::map<std::string, Bytes> data_;
};

}  // namespace tpcomm::control
