// Logging by level and subsystem (TPCOMM_LOG, TPCOMM_LOG_SUBSYS). A disabled statement costs one
// branch: the level is a cached integer, and the message is only formatted when it will be written.
#pragma once

#include <atomic>
#include <string_view>

#include <fmt/format.h>

namespace tpcomm {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

namespace detail {
extern std::atomic<int> g_log_level;
bool log_subsystem_enabled(std::string_view subsystem);
void log_write(LogLevel level, std::string_view subsystem, std::string_view message);
}  // namespace detail

inline bool log_enabled(LogLevel level, std::string_view subsystem) {
  return static_cast<int>(level) <= detail::g_log_level.load(std::memory_order_relaxed) &&
         detail::log_subsystem_enabled(subsystem);
}

// Overrides TPCOMM_LOG for this process (the CLI's --verbose uses it).
void set_log_level(LogLevel level);

}  // namespace tpcomm

#define TPCOMM_LOG(level, subsystem, ...)                                                          \
  do {                                                                                             \
    if (::tpcomm::log_enabled(::tpcomm::LogLevel::level, subsystem))                               \
      ::tpcomm::detail::log_write(::tpcomm::LogLevel::level, subsystem, fmt::format(__VA_ARGS__)); \
  } while (0)
