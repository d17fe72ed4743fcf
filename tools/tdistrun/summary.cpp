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

std::string exit_sentence(const WorkerEnd& end) {
  std::string what;
  if (WIFEXITED(end.status)) {
    what = "exited with code " + std::to_string(WEXITSTATUS(end.status));
  } else if (WIFSIGNALED(end.status)) {
    what = "was " + describe_status(end.status);
  } else {
    what = describe_status(end.status);
  }
  return worker_label(end) + " " + what;
}

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// At most `keep` lines of `lines`, from its start or its end, saying how many were left out.
void add_bounded(std::vector<std::string>& out, std::vector<std::string> lines, size_t keep, bool from_end,
                 const std::string& indent) {
  if (lines.size() > keep) {
    const std::string note = indent + "... (" + std::to_string(lines.size() - keep) + " more lines in the error file)";
    if (from_end) {
      lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(keep));
      out.push_back(note);
    } else {
      lines.resize(keep);
    }
    for (auto& l : lines) out.push_back(indent + l);
    if (!from_end) out.push_back(note);
    return;
  }
  for (auto& l : lines) out.push_back(indent + l);
}

}  // namespace

std::vector<std::string> error_lines(const WorkerError& error, const std::string& path) {
  std::vector<std::string> out{path.empty() ? std::string("  error:") : "  error (" + path + "):"};
  add_bounded(out, split_lines(error.message), 20, false, "    ");
  if (!error.traceback.empty()) add_bounded(out, split_lines(error.traceback), 30, true, "    | ");
  return out;
}

std::vector<std::string> summary_lines(const std::vector<WorkerEnd>& ends, int first_failure, int received_signal,
                                       double kill_timeout_s, int exit_code,
                                       const std::vector<std::string>& first_failure_error) {
  std::vector<std::string> lines;
  if (first_failure >= 0) {
    const WorkerEnd& f = ends[static_cast<size_t>(first_failure)];
    lines.push_back("tdistrun: " + worker_label(f) + " failed first: " + describe_status(f.status));
    for (const auto& l : first_failure_error) lines.push_back("tdistrun: " + l);
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
  if (exit_code >= 0) lines.push_back("tdistrun: exiting with status " + std::to_string(exit_code));
  return lines;
}

std::vector<std::string> shrink_summary_lines(const std::vector<WorkerEnd>& ends, const std::vector<int>& failed,
                                              const std::vector<std::vector<std::string>>& errors,
                                              double kill_timeout_s, int exit_code) {
  std::vector<std::string> lines{"tdistrun: " + std::to_string(failed.size()) + " of " + std::to_string(ends.size()) +
                                 " worker(s) failed and the others ran on (--on-failure shrink):"};
  for (size_t k = 0; k < failed.size(); ++k) {
    const WorkerEnd& f = ends[static_cast<size_t>(failed[k])];
    char when[48];
    std::snprintf(when, sizeof when, "%.3fs", f.ended_after_s);
    lines.push_back("tdistrun:   " + worker_label(f) + ": " + describe_status(f.status) + ", " + when +
                    " after the workers started");
    if (k < errors.size()) {
      for (const auto& l : errors[k]) lines.push_back("tdistrun:   " + l);
    }
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < ends.size(); ++i) {
    if (std::find(failed.begin(), failed.end(), static_cast<int>(i)) == failed.end()) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ends[a].rank < ends[b].rank; });
  for (size_t i : order) {
    lines.push_back("tdistrun:   " + worker_label(ends[i]) + ": " + describe_end(ends[i], kill_timeout_s));
  }
  if (exit_code >= 0) lines.push_back("tdistrun: exiting with status " + std::to_string(exit_code));
  return lines;
}

}  // namespace tdistrun
