#include "backend_set.hpp"

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::runtime {

BackendSet::~BackendSet() {
  close_all();
}

void BackendSet::add(Backend kind, std::unique_ptr<transport::CollectiveBackend> backend) {
  std::lock_guard<std::mutex> lock(mutex_);
  map_[kind] = std::move(backend);
}

bool BackendSet::has(Backend kind) const {
  return map_.contains(kind);
}

transport::CollectiveBackend& BackendSet::at(Backend kind) const {
  const auto found = map_.find(kind);
  if (found == map_.end()) {
    throw Error(ErrorCode::kInternal, fmt::format("{} is not set up here", to_string(kind)));
  }
  return *found->second;
}

void BackendSet::abort_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [kind, backend] : map_) backend->abort();
}

void BackendSet::announce_close_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [kind, backend] : map_) backend->announce_close();
}

std::vector<StageTime> BackendSet::stage_times() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<StageTime> out;
  for (const auto& [kind, backend] : map_) {
    for (auto& s : backend->stage_times()) out.push_back(std::move(s));
  }
  return out;
}

void BackendSet::close_all() {
  Map closing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing.swap(map_);
  }
  closing.clear();
}

}  // namespace tpcomm::runtime
