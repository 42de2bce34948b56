// The semantics of a store's keys, written once: the in-memory store and the TCP store server
// both keep their data in a StoreTable and differ only in how requests reach it (a call under a
// mutex, a frame on a socket). Not thread-safe: its owner locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tpcomm/store.hpp"

namespace tpcomm::control {

class StoreTable {
 public:
  // A value above max_value_bytes, or one that would make the keys and values held exceed
  // max_total_bytes, is refused with a kInvalidInput error that says which limit.
  explicit StoreTable(std::size_t max_value_bytes = SIZE_MAX,
                      std::size_t max_total_bytes = SIZE_MAX)
      : max_value_(max_value_bytes), max_total_(max_total_bytes) {}

  void set(const std::string& key, Bytes value);
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
  bool remove(const std::string& key);
  std::size_t size() const { return data_.size(); }
  // Bytes of keys and values held.
  std::size_t bytes() const { return bytes_; }

 private:
  void check_fits(const std::string& key, std::size_t value_size) const;

  std::map<std::string, Bytes> data_;
  std::size_t max_value_;
  std::size_t max_total_;
  std::size_t bytes_ = 0;
};

}  // namespace tpcomm::control
