// Helpers of the in-process integration tests: one thread per rank, scoped environment variables.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tpcomm/bootstrap.hpp"

namespace tpcomm::test {

// Writes `text` to a fresh file under /tmp (a tuning file, mostly) and removes it when done.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/tpcomm_test_XXXXXX";
    const int fd = mkstemp(name);
    path_ = name;
    EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
  }
  ~TempFile() { unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Sets an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

// Runs fn(rank, bootstrap) on one thread per rank, expecting it to fail: each rank's error
// message (empty where it did not throw).
template <typename Fn>
std::vector<std::string> errors_on_ranks(const std::vector<std::shared_ptr<Bootstrap>>& group,
                                         Fn fn) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(group.size());
  for (std::size_t r = 0; r < group.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(static_cast<int>(r), group[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Runs fn(rank, bootstrap) on one thread per rank; an exception on any rank fails the test.
template <typename Fn>
void on_ranks(const std::vector<std::shared_ptr<Bootstrap>>& group, Fn fn) {
  const auto errors = errors_on_ranks(group, fn);
  for (std::size_t r = 0; r < group.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace tpcomm::test
