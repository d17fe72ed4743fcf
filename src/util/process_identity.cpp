#include "util/process_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace tdist {

namespace {

uint64_t own_pid_namespace() {
  struct stat st{};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// The state letter and start time of /proc/<pid>/stat; false when it cannot be read.
bool read_stat(int32_t pid, char& state, uint64_t& started) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(f, text)) return false;
  // The command name (field 2) may hold spaces and parentheses: fields count from the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(text.substr(close + 1));
  rest >> state;
  std::string field;
  for (int i = 4; i < 22 && rest >> field; ++i) {
  }
  return static_cast<bool>(rest >> started);
}

}  // namespace

ProcessIdentity this_process() {
  ProcessIdentity me;
  me.pid = static_cast<int32_t>(::getpid());
  me.pid_ns = own_pid_namespace();
  char state = 0;
  if (!read_stat(me.pid, state, me.started)) me.started = 0;
  return me;
}

Liveness liveness(const ProcessIdentity& process) {
  static const uint64_t own_ns = own_pid_namespace();
  if (process.pid <= 0 || process.pid_ns == 0 || process.pid_ns != own_ns) return Liveness::Unknown;
  char state = 0;
  uint64_t started = 0;
  if (!read_stat(process.pid, state, started)) return Liveness::Gone;
  if (state == 'Z' || state == 'X') return Liveness::Gone;
  if (process.started != 0 && started != process.started) return Liveness::Gone;
  return Liveness::Alive;
}

}  // namespace tdist
