#include "util/logging.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "util/settings.h"

namespace tdist {

namespace {
// The values come in the registry's spelling (util/settings_table.h: aliases
// such as torch's WARNING and FATAL are mapped there).
LogLevel parse_level() {
  const settings::Debug debug = settings::debug_level();
  if (debug != settings::Debug::Off) return debug == settings::Debug::Detail ? LogLevel::Debug : LogLevel::Info;
  const std::string_view v = settings::get<"TDIST_LOG_LEVEL">();
  if (v == "WARN") return LogLevel::Warn;
  if (v == "ERROR") return LogLevel::Error;
  return v == "INFO" ? LogLevel::Info : LogLevel::Debug;
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

// A log line may be written where nothing can throw (a destructor, a thread's
// last words): a bad level is said here, once, as an error line, and the
// default kept. init_process_group reads the settings first (check_environment)
// and raises the same DistValueError to the caller. Kept for the process's
// life: every log line asks for it, and a process logs at one level.
LogLevel log_level() {
  static const LogLevel level = [] {
    try {
      return parse_level();
    } catch (const std::exception& e) {
      log_line(LogLevel::Error, e.what());
      return LogLevel::Warn;
    }
  }();
  return level;
}

void log_line(LogLevel level, const std::string& message) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[tdist %s pid %d] %s\n", level_name(level), static_cast<int>(getpid()), message.c_str());
}

}  // namespace tdist
