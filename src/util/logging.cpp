#include "util/logging.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "util/env.h"

namespace tdist {

namespace {
LogLevel parse_level() {
  auto debug = get_env("TDIST_DEBUG");
  if (debug && (*debug == "INFO" || *debug == "DETAIL")) return *debug == "DETAIL" ? LogLevel::Debug : LogLevel::Info;
  auto v = get_env("TDIST_LOG_LEVEL");
  if (!v) return LogLevel::Warn;
  if (*v == "ERROR" || *v == "FATAL") return LogLevel::Error;
  if (*v == "INFO") return LogLevel::Info;
  if (*v == "DEBUG" || *v == "DETAIL") return LogLevel::Debug;
  return LogLevel::Warn;
}
const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::Error: return "E";
    case LogLevel::Warn: return "W";
    case LogLevel::Info: return "I";
    case LogLevel::Debug: return "D";
  }
  return "?";
}
}  // namespace

LogLevel log_level() {
  static const LogLevel level = parse_level();
  return level;
}

void log_line(LogLevel level, const std::string& message) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[tdist %s pid %d] %s\n", level_name(level), static_cast<int>(getpid()), message.c_str());
}

}  // namespace tdist
