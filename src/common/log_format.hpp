// TPCOMM_LOG(level, subsystem, format, args...): the library's logging statement. Internal, so the
// public headers need no fmt; the message is formatted only when the line will be written.
#pragma once

#include <fmt/format.h>

#include "tpcomm/log.hpp"

#define TPCOMM_LOG(level, subsystem, ...)                                                          \
  do {                                                                                             \
    if (::tpcomm::log_enabled(::tpcomm::LogLevel::level, subsystem))                               \
      ::tpcomm::common::log_write(::tpcomm::LogLevel::level, subsystem, fmt::format(__VA_ARGS__)); \
  } while (0)
