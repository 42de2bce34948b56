// Logging by level and subsystem (TPCOMM_LOG, TPCOMM_LOG_SUBSYS). Lines go to stderr, to the file
// TPCOMM_LOG_FILE names, or to a sink the program installs (an engine's own logger). A disabled
// statement costs one branch: the level is a cached integer, and the message is only formatted
// when it will be written (the formatting macro is internal to the library).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>

namespace tpcomm {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// The name TPCOMM_LOG uses for a level ("error", "warn", "info", "debug").
const char* log_level_name(LogLevel level);

// Receives every line that passes the level and subsystem filters, without the trailing newline.
// Called from whichever thread logs (a backend's worker thread too), one call at a time.
using LogSink =
    std::function<void(LogLevel level, std::string_view subsystem, std::string_view message)>;

// Overrides TPCOMM_LOG for this process (the CLI's --verbose uses it).
void set_log_level(LogLevel level);
// Sends lines to `sink` instead of stderr or TPCOMM_LOG_FILE; an empty sink restores them.
void set_log_sink(LogSink sink);
// Appends lines to `path` (as TPCOMM_LOG_FILE does); an empty path restores stderr. Throws
// tpcomm::Error (kInvalidInput) when the file cannot be opened for appending.
void set_log_file(const std::string& path);

namespace common {
extern std::atomic<int> g_log_level;
bool log_subsystem_enabled(std::string_view subsystem);
void log_write(LogLevel level, std::string_view subsystem, std::string_view message);
}  // namespace common

inline bool log_enabled(LogLevel level, std::string_view subsystem) {
  return static_cast<int>(level) <= common::g_log_level.load(std::memory_order_relaxed) &&
         common::log_subsystem_enabled(subsystem);
}

}  // namespace tpcomm
