// gloo::rendezvous::Store over tpcomm's store.
#include "gloo_store_adapter.hpp"

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_->set(prefix_ + key, Bytes(data.begin(), data.end()));
  written_.push_back(prefix_ + key);
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  wait({key}, timeout_);
  auto v = store_->get(prefix_ + key);
  if (!v) throw Error(ErrorCode::kInternal, "gloo rendezvous key vanished: " + key);
  return std::vector<char>(v->begin(), v->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(prefix_ + k);
  auto missing = store_->wait_for(full, Deadline::after(timeout));
  if (!missing.empty()) {
    throw Error(ErrorCode::kTimeout,
                fmt::format("gloo rendezvous: keys {} did not appear within {} ms",
                            fmt::join(missing, ", "), timeout.count()));
  }
}

void GlooStoreAdapter::remove_own_keys() {
  for (const auto& k : written_) store_->remove(k);
  written_.clear();
}

}  // namespace tpcomm::transport
