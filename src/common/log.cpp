// Log filters and destinations. The level, subsystem list and TPCOMM_LOG_FILE are read once
// from the environment; a program's sink or file replaces the destination at any time.
#include "tpcomm/log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

int level_from_env() {
  const char* value = std::getenv("TPCOMM_LOG");
  if (value == nullptr || *value == '\0') return static_cast<int>(LogLevel::kWarn);
  const std::string_view v(value);
  if (v == "error") return static_cast<int>(LogLevel::kError);
  if (v == "warn") return static_cast<int>(LogLevel::kWarn);
  if (v == "info") return static_cast<int>(LogLevel::kInfo);
  if (v == "debug") return static_cast<int>(LogLevel::kDebug);
  std::fprintf(stderr,
               "[tpcomm warn log] TPCOMM_LOG=%s is not one of error, warn, info, debug; "
               "using warn\n",
               value);
  return static_cast<int>(LogLevel::kWarn);
}

std::vector<std::string> subsystems_from_env() {
  std::vector<std::string> out;
  const char* value = std::getenv("TPCOMM_LOG_SUBSYS");
  if (value == nullptr) return out;
  std::string item;
  for (const char* p = value;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!item.empty()) out.push_back(item);
      item.clear();
      if (*p == '\0') break;
    } else if (*p != ' ') {
      item.push_back(*p);
    }
  }
  return out;
}

const std::vector<std::string>& subsystem_filter() {
  static const std::vector<std::string> filter = subsystems_from_env();
  return filter;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using LogFile = std::unique_ptr<std::FILE, FileCloser>;

LogFile open_log_file(const std::string& path) {
  LogFile file(std::fopen(path.c_str(), "a"));
  if (!file) {
    throw invalid_input(
        fmt::format("cannot open the log file {} for appending: {}", path, std::strerror(errno)));
  }
  std::setvbuf(file.get(), nullptr, _IOLBF, 0);  // whole lines, as they happen
  return file;
}

// Where lines go. Guarded by its mutex, which also keeps lines whole.
struct Destination {
  std::mutex mutex;
  LogSink sink;
  LogFile file;
  Destination() {
    const char* path = std::getenv("TPCOMM_LOG_FILE");
    if (path == nullptr || *path == '\0') return;
    try {
      file = open_log_file(path);
    } catch (const Error& e) {
      std::fprintf(stderr, "[tpcomm warn log] TPCOMM_LOG_FILE: %s; logging to stderr\n", e.what());
    }
  }
};

Destination& destination() {
  static Destination d;
  return d;
}

}  // namespace

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "?";
}

namespace common {

std::atomic<int> g_log_level{level_from_env()};

bool log_subsystem_enabled(std::string_view subsystem) {
  const auto& filter = subsystem_filter();
  if (filter.empty()) return true;
  return std::ranges::any_of(filter, [&](const auto& s) { return s == subsystem || s == "all"; });
}

void log_write(LogLevel level, std::string_view subsystem, std::string_view message) {
  auto& d = destination();
  std::lock_guard<std::mutex> lock(d.mutex);
  if (d.sink) {
    // A sink that throws must not turn a log line into a failed collective.
    try {
      d.sink(level, subsystem, message);
    } catch (...) {
    }
    return;
  }
  std::fprintf(d.file ? d.file.get() : stderr, "[tpcomm %s %.*s] %.*s\n", log_level_name(level),
               static_cast<int>(subsystem.size()), subsystem.data(),
               static_cast<int>(message.size()), message.data());
}

}  // namespace common

void set_log_level(LogLevel level) {
  common::g_log_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

void set_log_sink(LogSink sink) {
  auto& d = destination();
  std::lock_guard<std::mutex> lock(d.mutex);
  d.sink = std::move(sink);
}

void set_log_file(const std::string& path) {
  LogFile file = path.empty() ? nullptr : open_log_file(path);
  auto& d = destination();
  std::lock_guard<std::mutex> lock(d.mutex);
  d.file = std::move(file);
}

}  // namespace tpcomm
