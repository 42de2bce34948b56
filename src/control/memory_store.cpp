// In-memory store (tests, threads of one process) and Store::wait.
#include <condition_variable>
#include <map>
#include <mutex>

#include <fmt/format.h>

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
    data_[key] = value;
    changed_.notify_all();
  }
  std::optional<Bytes> get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = data_.find(key);
    if (it == data_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> wait_for(const std::vector<std::string>& keys,
                                    const Deadline& deadline) override {
    std::unique_lock<std::mutex> lock(mutex_);
    auto missing = [&] {
      std::vector<std::string> out;
      for (const auto& k : keys) {
        if (data_.find(k) == data_.end()) out.push_back(k);
      }
      return out;
    };
    changed_.wait_until(lock, deadline.at(), [&] { return missing().empty(); });
    return missing();
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::int64_t value = 0;
    if (auto it = data_.find(key); it != data_.end()) {
      value = std::stoll(std::string(it->second.begin(), it->second.end()));
    }
    value += delta;
    std::string text = std::to_string(value);
    data_[key] = Bytes(text.begin(), text.end());
    changed_.notify_all();
    return value;
  }
  Bytes compare_set(const std::string& key, const std::optional<Bytes>& expected,
                    const Bytes& desired) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = data_.find(key);
    const bool matches =
        expected ? (it != data_.end() && it->second == *expected) : it == data_.end();
    if (matches) {
      data_[key] = desired;
      changed_.notify_all();
      return desired;
    }
    return it == data_.end() ? Bytes{} : it->second;
  }
  bool remove(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return data_.erase(key) > 0;
  }
  std::size_t size() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return data_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> data_;
};

}  // namespace

std::shared_ptr<Store> make_memory_store() {
  return std::make_shared<MemoryStore>();
}

}  // namespace tpcomm
