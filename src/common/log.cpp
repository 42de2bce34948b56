// Log sink and filters. The level and subsystem list are read once from the environment.
#include "tpcomm/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

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

const char* level_name(LogLevel level) {
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

}  // namespace

namespace detail {

std::atomic<int> g_log_level{level_from_env()};

bool log_subsystem_enabled(std::string_view subsystem) {
  const auto& filter = subsystem_filter();
  if (filter.empty()) return true;
  for (const auto& s : filter) {
    if (s == subsystem || s == "all") return true;
  }
  return false;
}

void log_write(LogLevel level, std::string_view subsystem, std::string_view message) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "[tpcomm %s %.*s] %.*s\n", level_name(level),
               static_cast<int>(subsystem.size()), subsystem.data(),
               static_cast<int>(message.size()), message.data());
}

}  // namespace detail

void set_log_level(LogLevel level) {
  detail::g_log_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

}  // namespace tpcomm
