#include "util/process_identity.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

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

// The "Threads:" count of /proc/<pid>/status; -1 when it cannot be read.
long thread_count(int32_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Threads:", 0) == 0) {
      try {
        return std::stol(line.substr(8));
      } catch (const std::exception&) {
        return -1;
      }
    }
  }
  return -1;
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

bool provably_exited(const ProcessIdentity& process) {
  static const uint64_t own_ns = own_pid_namespace();
  if (process.pid <= 0 || process.pid_ns == 0 || process.pid_ns != own_ns) return false;
  if (::kill(process.pid, 0) != 0 && errno == ESRCH) return true;
  char state = 0;
  uint64_t started = 0;
  if (!read_stat(process.pid, state, started)) return false;  // gone since, or hidden: the next look decides
  if (process.started != 0 && started != process.started) return true;  // the pid was reused
  // A zombie keeps counting its threads until it is reaped: one left means
  // the whole process exited; more, that only its main thread did.
  return (state == 'Z' || state == 'X') && thread_count(process.pid) == 1;
}

}  // namespace tdist
