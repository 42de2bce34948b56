// The one implementation of the store's key semantics (store_table.hpp).
#include "store_table.hpp"

#include <charconv>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::control {

void StoreTable::check_fits(const std::string& key, std::size_t value_size) const {
  if (value_size > max_value_) {
    throw invalid_input(
        fmt::format("a value of {} bytes for {} is above the store's limit of {} "
                    "bytes per value",
                    value_size, key, max_value_));
  }
  auto it = data_.find(key);
  const std::size_t held = it == data_.end() ? 0 : key.size() + it->second.size();
  if (bytes_ - held + key.size() + value_size > max_total_) {
    throw invalid_input(
        fmt::format("the store is full: it holds {} bytes and {} more for {} would "
                    "pass its limit of {}",
                    bytes_, key.size() + value_size, key, max_total_));
  }
}

void StoreTable::set(const std::string& key, Bytes value) {
  check_fits(key, value.size());
  auto [it, inserted] = data_.try_emplace(key);
  bytes_ -= inserted ? 0 : key.size() + it->second.size();
  bytes_ += key.size() + value.size();
  it->second = std::move(value);
}

bool StoreTable::remove(const std::string& key) {
  auto it = data_.find(key);
  if (it == data_.end()) return false;
  bytes_ -= key.size() + it->second.size();
  data_.erase(it);
  return true;
}

const Bytes* StoreTable::get(const std::string& key) const {
  auto it = data_.find(key);
  return it == data_.end() ? nullptr : &it->second;
}

std::vector<std::string> StoreTable::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (data_.find(k) == data_.end()) out.push_back(k);
  }
  return out;
}

std::int64_t StoreTable::add(const std::string& key, std::int64_t delta) {
  std::int64_t value = 0;
  if (const Bytes* held = get(key)) {
    const char* begin = reinterpret_cast<const char*>(held->data());
    const char* end = begin + held->size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr != end || held->empty()) {
      throw invalid_input(fmt::format("add: the value of {} is not an integer", key));
    }
  }
  if (__builtin_add_overflow(value, delta, &value)) {
    throw invalid_input(fmt::format("add: {} plus {} overflows a 64-bit integer", key, delta));
  }
  const std::string text = std::to_string(value);
  set(key, Bytes(text.begin(), text.end()));
  return value;
}

Bytes StoreTable::compare_set(const std::string& key, const std::optional<Bytes>& expected,
                              Bytes desired) {
  auto it = data_.find(key);
  const bool matches =
      expected ? (it != data_.end() && it->second == *expected) : it == data_.end();
  if (matches) {
    set(key, desired);
    return desired;
  }
  return it == data_.end() ? Bytes{} : it->second;
}

}  // namespace tpcomm::control
