// In-memory store (tests, threads of one process) and Store::wait.
#include <condition_variable>
#include <mutex>

#include <fmt/format.h>

#include "store_table.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/store.hpp"

namespace tpcomm {

void Store::wait(const std::vector<std::string>& keys, const Deadline& deadline) {
  auto missing = wait_for(keys, deadline);
  if (!missing.empty()) {
    throw Error(ErrorCode::kTimeout,
                fmt::format("store wait timed out after {} ms; keys still missing: {}",
                            deadline.budget().count(), fmt::join(missing, ", ")));
  }
}

namespace {

class MemoryStore final : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    table_.set(key, value);
    changed_.notify_all();
  }
  std::optional<Bytes> get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const Bytes* value = table_.get(key);
    return value ? std::optional<Bytes>(*value) : std::nullopt;
  }
  std::vector<std::string> wait_for(const std::vector<std::string>& keys,
                                    const Deadline& deadline) override {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_until(lock, deadline.at(), [&] { return table_.missing(keys).empty(); });
    return table_.missing(keys);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::int64_t value = table_.add(key, delta);
    changed_.notify_all();
    return value;
  }
  Bytes compare_set(const std::string& key, const std::optional<Bytes>& expected,
                    const Bytes& desired) override {
    std::lock_guard<std::mutex> lock(mutex_);
    Bytes held = table_.compare_set(key, expected, desired);
    changed_.notify_all();
    return held;
  }
  bool remove(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return table_.remove(key);
  }
  std::size_t size() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return table_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  control::StoreTable table_;
};

}  // namespace

std::shared_ptr<Store> make_memory_store() {
  return std::make_shared<MemoryStore>();
}

}  // namespace tpcomm
