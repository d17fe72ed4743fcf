#include "summary.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>

#include "signals.h"

namespace tdistrun {
namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gs", s);
  return buf;
}

}  // namespace

std::string describe_status(int status) {
  if (WIFEXITED(status)) {
    int code = WEXITSTATUS(status);
    return code == 0 ? "exited 0" : "exit code " + std::to_string(code);
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    std::string s = "killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
#ifdef WCOREDUMP
    if (WCOREDUMP(status)) s += ", core dumped";
#endif
    return s;
  }
  return "ended with wait status " + std::to_string(status);
}

std::string describe_end(const WorkerEnd& end, double kill_timeout_s) {
  if (WIFSIGNALED(end.status) && end.signal_sent != 0) {
    int sig = WTERMSIG(end.status);
    if (sig == SIGKILL && end.escalated) {
      return "killed by the launcher with SIGKILL after the " + seconds(kill_timeout_s) + " grace period";
    }
    if (sig == end.signal_sent) {
      return end.forwarded ? "terminated by " + signal_name(sig) + " (forwarded by the launcher)"
                           : "terminated by the launcher (" + signal_name(sig) + ")";
    }
  }
  std::string s = describe_status(end.status);
  if (end.signal_sent != 0) s += " (after the launcher sent " + signal_name(end.signal_sent) + ")";
  return s;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string worker_label(const WorkerEnd& end) {
  return "rank " + std::to_string(end.rank) + " (local_rank " + std::to_string(end.local_rank) + ", pid " +
         std::to_string(end.pid) + ")";
}

std::vector<std::string> summary_lines(const std::vector<WorkerEnd>& ends, int first_failure, int received_signal,
                                       double kill_timeout_s, int exit_code) {
  std::vector<std::string> lines;
  if (first_failure >= 0) {
    const WorkerEnd& f = ends[static_cast<size_t>(first_failure)];
    lines.push_back("tdistrun: " + worker_label(f) + " failed first: " + describe_status(f.status));
  }
  if (received_signal != 0) {
    lines.push_back("tdistrun: " + std::string(first_failure >= 0 ? "then received " : "received ") +
                    signal_name(received_signal) + " and passed it to the workers");
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < ends.size(); ++i) {
    if (static_cast<int>(i) != first_failure) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ends[a].rank < ends[b].rank; });
  for (size_t i : order) {
    lines.push_back("tdistrun:   " + worker_label(ends[i]) + ": " + describe_end(ends[i], kill_timeout_s));
  }
  lines.push_back("tdistrun: exiting with status " + std::to_string(exit_code));
  return lines;
}

}  // namespace tdistrun
