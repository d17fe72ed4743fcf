#include "supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <utility>

#include "error_file.h"
#include "signals.h"
#include "worker.h"

extern char** environ;

namespace tdistrun {
namespace {

long long now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

enum class ReadResult { kData, kAgain, kEof };

constexpr size_t kReadChunk = 64 * 1024;
// After a worker exits, what is left in its pipes is read out, up to this much
// (a process it left behind could otherwise keep the pipe busy forever).
constexpr size_t kDrainLimit = 16 * 1024 * 1024;

// Reads what the worker wrote: raw to its log file, in lines to the console.
ReadResult read_once(int fd, int file_fd, LinePrefixer* lines) {
  char buf[kReadChunk];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      const std::string_view data(buf, static_cast<size_t>(n));
      if (file_fd >= 0) FdSink(file_fd).write(data);
      if (lines != nullptr) lines->feed(data);
      return ReadResult::kData;
    }
    if (n == 0) return ReadResult::kEof;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ReadResult::kAgain;
    return ReadResult::kEof;  // EIO and friends: treat as the end of the stream
  }
}

}  // namespace

Supervisor::Supervisor(const Options& opt, std::string program_path, const WorkerPlacement& placement,
                       const LogLayout& logs, int attempt, Monitor monitor)
    : opt_(opt),
      path_(std::move(program_path)),
      placement_(placement),
      logs_(logs),
      attempt_(attempt),
      monitor_(std::move(monitor)) {}

Supervisor::~Supervisor() {
  for (auto& w : workers_) {
    close_stream(w.out);
    close_stream(w.err);
  }
  if (devnull_ >= 0) close(devnull_);
  if (devnull_out_ >= 0) close(devnull_out_);
}

// Decides how one stream of a worker travels: straight to the console
// (inherited), straight to its file or nowhere (the worker writes the fd), or
// through a pipe that the launcher copies to the file and/or, in lines, to
// the console. Returns false (errno set) when the file cannot be opened.
bool Supervisor::open_stream(const StreamTarget& target, FdSink& console, const std::string& prefix, Stream* stream,
                             StreamSetup* setup) {
  using Mode = StreamSetup::Mode;
  if (!target.file.empty()) {
    stream->file_fd = open(target.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (stream->file_fd < 0) return false;
  }
  if (target.console && target.file.empty() && !opt_.prefix_output) {
    setup->mode = Mode::kInherit;
  } else if (!target.console) {
    setup->mode = Mode::kFd;
    setup->fd = stream->file_fd >= 0 ? stream->file_fd : devnull_out_;
  } else {
    setup->mode = Mode::kPipe;
    stream->lines = std::make_unique<LinePrefixer>(opt_.prefix_output ? prefix : std::string(),
                                                   [&console](std::string_view d) { console.write(d); });
  }
  return true;
}

bool Supervisor::start_workers() {
  devnull_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  devnull_out_ = open("/dev/null", O_WRONLY | O_CLOEXEC);
  workers_.reserve(static_cast<size_t>(opt_.nproc_per_node));
  started_ms_ = now_ms();
  for (int local_rank = 0; local_rank < opt_.nproc_per_node; ++local_rank) {
    if (!start_worker(local_rank)) return false;
  }
  return true;
}

bool Supervisor::start_worker(int local_rank, int replacement) {
  sigset_t block = SignalEvents::handled_set();
  sigset_t old;
  sigprocmask(SIG_BLOCK, &block, &old);
  bool ok = true;
  const long long rank = placement_.rank_offset + local_rank;
  const std::string label = "rank " + std::to_string(rank) + " (local_rank " + std::to_string(local_rank) + ")";
  Worker w;
  w.end.rank = static_cast<int>(rank);
  w.end.local_rank = local_rank;
  w.end.launch_id = rank + static_cast<long long>(replacement) * placement_.world_size;
  SpawnRequest req;
  try {
    WorkerLogs logs = logs_.for_worker(attempt_, local_rank, replacement);
    w.error_file = logs.error_file;
    std::remove(w.error_file.c_str());  // a stale one would be taken for this attempt's
    const std::string prefix =
        opt_.line_prefix_template.empty()
            ? "[rank" + std::to_string(rank) + "]: "
            : render_line_prefix(opt_.line_prefix_template, {opt_.role, rank, local_rank, host_name()});
    if (!open_stream(logs.out, stdout_sink_, prefix, &w.out, &req.out) ||
        !open_stream(logs.err, stderr_sink_, prefix, &w.err, &req.err)) {
      throw std::system_error(errno, std::generic_category(), "cannot open a log file in " + logs_.dir());
    }
    req.path = path_;
    req.argv = worker_argv(opt_, local_rank);
    req.env = worker_environment(opt_, placement_, local_rank, w.error_file, environ);
    if (replacement > 0) req.env.push_back("TDIST_JOIN_RUNNING_JOB=" + std::to_string(replacement));
    req.stdin_fd = devnull_;
    req.child_mask = old;
    req.label = "rank " + std::to_string(rank);
    Spawned s = spawn_worker(req);
    w.end.pid = s.pid;
    w.out.fd = s.out_fd;
    w.err.fd = s.err_fd;
  } catch (const std::exception& e) {
    stderr_sink_.write("tdistrun: cannot start " + label + ": " + e.what() + "\n");
    close_stream(w.out);
    close_stream(w.err);
    ok = false;
  }
  if (ok) {
    w.running = true;
    workers_.push_back(std::move(w));
  }
  sigprocmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

void Supervisor::signal_worker(Worker& w, int sig) {
  // The worker leads its own process group, so this reaches what it started too.
  // If it moved itself elsewhere (setsid), signal it directly as well.
  if (getpgid(w.end.pid) != w.end.pid) kill(w.end.pid, sig);
  kill(-w.end.pid, sig);
}

void Supervisor::stop_all(int sig, bool forwarded) {
  if (!stopping_) {
    stopping_ = true;
    kill_deadline_ms_ = now_ms() + static_cast<long long>(std::ceil(opt_.kill_timeout_s * 1000.0));
  }
  for (auto& w : workers_) {
    if (!w.running) continue;
    signal_worker(w, sig);
    w.end.signal_sent = sig;
    w.end.forwarded = forwarded;
  }
}

void Supervisor::escalate() {
  escalated_ = true;
  int left = 0;
  for (auto& w : workers_) {
    if (!w.running) continue;
    ++left;
    signal_worker(w, SIGKILL);
    w.end.escalated = true;
  }
  if (left > 0) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", opt_.kill_timeout_s);
    stderr_sink_.write("tdistrun: " + std::to_string(left) + " worker(s) still running after " + secs +
                       "s; sending SIGKILL\n");
  }
}

void Supervisor::monitor() {
  if (!monitor_ || stopping_) return;
  const long long now = now_ms();
  if (now < next_monitor_ms_) return;
  next_monitor_ms_ = now + static_cast<long long>(std::ceil(opt_.monitor_interval_s * 1000.0));
  if (auto reason = monitor_()) {
    stop_reason_ = *reason;
    stderr_sink_.write("tdistrun: stopping this node's workers: " + stop_reason_ + "\n");
    stop_all(SIGTERM, false);
  }
}

void Supervisor::handle_signals() {
  if (SignalEvents::take_usr1()) {
    int passed = 0;
    for (const auto& w : workers_)
      if (w.running && kill(w.end.pid, SIGUSR1) == 0) ++passed;
    stderr_sink_.write("tdistrun: received SIGUSR1; passed it to " + std::to_string(passed) +
                       " running worker(s) (tdist workers dump their flight recorders to "
                       "TDIST_FLIGHT_RECORDER_DIR, else to tdist-flight-recorder-<uid> in TMPDIR or /tmp; the others "
                       "ignore it)\n");
  }
  for (int sig : SignalEvents::take_termination_signals()) {
    int running = 0;
    for (const auto& w : workers_) running += w.running ? 1 : 0;
    if (received_signal_ == 0) received_signal_ = sig;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", opt_.kill_timeout_s);
    stderr_sink_.write("tdistrun: received " + signal_name(sig) + "; passing it to " + std::to_string(running) +
                       " running worker(s)" + (escalated_ ? std::string() : std::string(" (SIGKILL after ") + secs + "s)") +
                       "\n");
    stop_all(sig, true);
  }
}

void Supervisor::reap() {
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    if (!w.running) continue;
    int status = 0;
    pid_t r;
    do {
      r = waitpid(w.end.pid, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == w.end.pid) {
      on_exit(w, status);
      bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && !stopping_) on_failure(i);
    } else if (r < 0 && errno == ECHILD) {
      // Not our child any more (cannot happen unless someone else reaped it).
      on_exit(w, 0);
    } else {
      continue;
    }
    // Its pipes hold everything it wrote before exiting: forward that, then close.
    drain(w.out);
    drain(w.err);
  }
  // After the loop: a new worker may move workers_ in memory.
  for (int local_rank : std::exchange(to_replace_, {})) {
    ++replacements_;
    stderr_sink_.write("tdistrun: starting a replacement for rank " +
                       std::to_string(placement_.rank_offset + local_rank) + " (replacement " +
                       std::to_string(replacements_) + " of at most " + std::to_string(opt_.max_restarts) +
                       "); it joins the running job when the others call admit_new_ranks()\n");
    start_worker(local_rank, replacements_);
  }
}

void Supervisor::on_exit(Worker& w, int status) {
  w.running = false;
  w.end.status = status;
  w.end.ended_after_s = static_cast<double>(now_ms() - started_ms_) / 1000.0;
}

void Supervisor::on_failure(size_t index) {
  if (first_failure_ < 0) first_failure_ = static_cast<int>(index);
  if (opt_.on_failure == OnFailure::kRestart) {
    stop_all(SIGTERM, false);
    return;
  }
  const WorkerEnd& end = workers_[index].end;
  tolerated_.push_back(static_cast<int>(index));
  // First, before its output is drained: the others may be waiting for it.
  if (failure_report_) failure_report_(end);
  stderr_sink_.write("tdistrun: " + worker_label(end) + " failed: " + describe_status(end.status) +
                     "; the other workers run on (--on-failure " +
                     (opt_.on_failure == OnFailure::kShrink ? "shrink" : "shrink-and-replace") + ")\n");
  if (opt_.on_failure != OnFailure::kShrinkAndReplace) return;
  if (replacements_ + static_cast<int>(to_replace_.size()) >= opt_.max_restarts) {
    stderr_sink_.write("tdistrun: no replacement for rank " + std::to_string(end.rank) + ": " +
                       std::to_string(opt_.max_restarts) + " replacement(s) allowed (--max-restarts)\n");
    return;
  }
  to_replace_.push_back(end.local_rank);
}

bool Supervisor::read_stream(Stream& s) {
  if (s.fd < 0) return false;
  if (read_once(s.fd, s.file_fd, s.lines.get()) == ReadResult::kEof) {
    close_stream(s);
    return false;
  }
  return true;
}

void Supervisor::drain(Stream& s) {
  if (s.fd < 0) {
    close_stream(s);
    return;
  }
  size_t total = 0;
  while (total < kDrainLimit && read_once(s.fd, s.file_fd, s.lines.get()) == ReadResult::kData) total += kReadChunk;
  close_stream(s);
}

void Supervisor::close_stream(Stream& s) {
  if (s.fd >= 0) {
    if (s.lines) s.lines->finish();
    close(s.fd);
    s.fd = -1;
  }
  if (s.file_fd >= 0) {
    close(s.file_fd);
    s.file_fd = -1;
  }
}

bool Supervisor::anything_left() const {
  for (const auto& w : workers_) {
    if (w.running || w.out.fd >= 0 || w.err.fd >= 0) return true;
  }
  return false;
}

AttemptResult Supervisor::run() {
  const bool started = start_workers();
  if (!started) stop_all(SIGTERM, false);

  std::vector<pollfd> fds;
  std::vector<Stream*> streams;
  while (true) {
    handle_signals();
    if (SignalEvents::take_child_exited()) reap();
    monitor();
    if (stopping_ && !escalated_ && now_ms() >= kill_deadline_ms_) escalate();
    if (!anything_left()) break;

    fds.clear();
    streams.clear();
    fds.push_back(pollfd{SignalEvents::fd(), POLLIN, 0});
    for (auto& w : workers_) {
      for (Stream* s : {&w.out, &w.err}) {
        if (s->fd < 0) continue;
        fds.push_back(pollfd{s->fd, POLLIN, 0});
        streams.push_back(s);
      }
    }
    int timeout = -1;
    if (stopping_ && !escalated_) timeout = static_cast<int>(std::max(0LL, kill_deadline_ms_ - now_ms()));
    if (monitor_ && !stopping_) timeout = static_cast<int>(std::max(0LL, next_monitor_ms_ - now_ms()));
    int n = poll(fds.data(), fds.size(), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      stderr_sink_.write(std::string("tdistrun: poll failed: ") + std::strerror(errno) + "\n");
      // Keep supervising without output forwarding rather than abandoning workers.
      for (Stream* s : streams) close_stream(*s);
      continue;
    }
    if (fds[0].revents != 0) SignalEvents::drain();
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_stream(*streams[i - 1]);
    }
  }
  if (!started) {
    stderr_sink_.write("tdistrun: stopped the workers already started\n");
    AttemptResult r;
    r.kind = AttemptResult::Kind::kStartFailed;
    r.exit_code = 1;
    return r;
  }
  return finish();
}

AttemptResult Supervisor::finish() {
  if (!tolerated_.empty() && received_signal_ == 0 && stop_reason_.empty()) return finish_shrunk();
  AttemptResult r;
  // With --on-failure shrink, what stopped everyone was a signal or the monitor, not the failure.
  if (first_failure_ >= 0 && tolerated_.empty()) {
    const Worker& f = workers_[static_cast<size_t>(first_failure_)];
    r.kind = AttemptResult::Kind::kWorkerFailed;
    r.exit_code = exit_code_of(f.end.status);
    r.failure = worker_label(f.end) + ": " + describe_status(f.end.status);
  } else if (received_signal_ != 0) {
    r.kind = AttemptResult::Kind::kSignaled;
    r.exit_code = 128 + received_signal_;
  } else if (!stop_reason_.empty()) {
    r.kind = AttemptResult::Kind::kStopped;
    r.exit_code = 1;
    return r;
  }
  if (r.exit_code != 0) {
    std::vector<WorkerEnd> ends;
    for (const auto& w : workers_) ends.push_back(w.end);
    // With restarts or other nodes, the agent says how the job ends (agent.cpp).
    const bool agent_reports_end = opt_.max_restarts > 0 || opt_.rdzv.dynamic || opt_.nnodes > 1;
    std::vector<std::string> error;
    if (first_failure_ >= 0) {
      const std::string& path = workers_[static_cast<size_t>(first_failure_)].error_file;
      // The path is worth showing only where the file stays (--log-dir).
      if (auto e = read_error_file(path)) error = error_lines(*e, logs_.kept() ? path : std::string());
    }
    std::string text;
    for (const auto& line : summary_lines(ends, first_failure_, received_signal_, opt_.kill_timeout_s,
                                           agent_reports_end ? -1 : r.exit_code, error)) {
      text += line + "\n";
    }
    stderr_sink_.write(text);
  }
  return r;
}

AttemptResult Supervisor::finish_shrunk() {
  AttemptResult r;
  const bool any_succeeded = std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) {
    return WIFEXITED(w.end.status) && WEXITSTATUS(w.end.status) == 0;
  });
  std::vector<WorkerEnd> ends;
  for (const auto& w : workers_) ends.push_back(w.end);
  if (!any_succeeded) {
    const Worker& f = workers_[static_cast<size_t>(first_failure_)];
    r.kind = AttemptResult::Kind::kWorkerFailed;
    r.exit_code = exit_code_of(f.end.status);
    r.failure = worker_label(f.end) + ": " + describe_status(f.end.status);
  }
  // With other nodes, the agent says how a node whose workers all failed ends (agent.cpp).
  const bool agent_reports_end = !any_succeeded && (opt_.rdzv.dynamic || opt_.nnodes > 1);
  std::vector<std::vector<std::string>> errors;
  for (int i : tolerated_) {
    const std::string& path = workers_[static_cast<size_t>(i)].error_file;
    const auto e = read_error_file(path);
    errors.push_back(e ? error_lines(*e, logs_.kept() ? path : std::string()) : std::vector<std::string>{});
  }
  std::string text;
  for (const auto& line :
       shrink_summary_lines(ends, tolerated_, errors, opt_.kill_timeout_s, agent_reports_end ? -1 : r.exit_code)) {
    text += line + "\n";
  }
  stderr_sink_.write(text);
  return r;
}

}  // namespace tdistrun
