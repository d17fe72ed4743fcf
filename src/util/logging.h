// Minimal leveled logging to stderr, controlled by TDIST_LOG_LEVEL
// (ERROR, WARN, INFO, DEBUG) and TDIST_DEBUG (OFF, INFO, DETAIL).
#pragma once

#include <sstream>
#include <string>

namespace tdist {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

LogLevel log_level();
void log_line(LogLevel level, const std::string& message);

#define TDIST_LOG(level, expr)                                      \
  do {                                                              \
    if (static_cast<int>(level) <= static_cast<int>(::tdist::log_level())) { \
      std::ostringstream tdist_log_os_;                             \
      tdist_log_os_ << expr;                                        \
      ::tdist::log_line(level, tdist_log_os_.str());                \
    }                                                               \
  } while (0)

}  // namespace tdist
