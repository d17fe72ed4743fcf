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

enum class ReadResult { kData, kAgain, kEof };

constexpr size_t kReadChunk = 64 * 1024;
// After a worker exits, what is left in its pipes is read out, up to this much
// (a process it left behind could otherwise keep the pipe busy forever).
constexpr size_t kDrainLimit = 16 * 1024 * 1024;

ReadResult read_once(int fd, LinePrefixer& lines) {
  char buf[kReadChunk];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      lines.feed(std::string_view(buf, static_cast<size_t>(n)));
      return ReadResult::kData;
    }
    if (n == 0) return ReadResult::kEof;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ReadResult::kAgain;
    return ReadResult::kEof;  // EIO and friends: treat as the end of the stream
  }
}

}  // namespace

Supervisor::Supervisor(const Options& opt, std::string program_path) : opt_(opt), path_(std::move(program_path)) {}

Supervisor::~Supervisor() {
  for (auto& w : workers_) {
    close_stream(w.out);
    close_stream(w.err);
  }
  if (devnull_ >= 0) close(devnull_);
}

bool Supervisor::start_workers() {
  devnull_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  workers_.reserve(static_cast<size_t>(opt_.nproc_per_node));

  sigset_t block = SignalEvents::handled_set();
  sigset_t old;
  sigprocmask(SIG_BLOCK, &block, &old);
  bool ok = true;
  for (int local_rank = 0; local_rank < opt_.nproc_per_node; ++local_rank) {
    const int rank = opt_.node_rank * opt_.nproc_per_node + local_rank;
    SpawnRequest req;
    req.path = path_;
    req.argv = worker_argv(opt_, local_rank);
    req.env = worker_environment(opt_, local_rank, environ);
    req.capture_output = opt_.prefix_output;
    req.stdin_fd = devnull_;
    req.child_mask = old;
    req.label = "rank " + std::to_string(rank);
    Spawned s;
    try {
      s = spawn_worker(req);
    } catch (const std::system_error& e) {
      stderr_sink_.write("tdistrun: cannot start rank " + std::to_string(rank) + " (local_rank " +
                         std::to_string(local_rank) + "): " + e.what() + "\n");
      ok = false;
      break;
    }
    Worker w;
    w.end.rank = rank;
    w.end.local_rank = local_rank;
    w.end.pid = s.pid;
    w.running = true;
    const std::string prefix = "[rank" + std::to_string(rank) + "]: ";
    if (s.out_fd >= 0) {
      w.out.fd = s.out_fd;
      w.out.lines = std::make_unique<LinePrefixer>(prefix, [this](std::string_view d) { stdout_sink_.write(d); });
    }
    if (s.err_fd >= 0) {
      w.err.fd = s.err_fd;
      w.err.lines = std::make_unique<LinePrefixer>(prefix, [this](std::string_view d) { stderr_sink_.write(d); });
    }
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

void Supervisor::handle_signals() {
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
      if (failed && !stopping_) {
        first_failure_ = static_cast<int>(i);
        stop_all(SIGTERM, false);
      }
    } else if (r < 0 && errno == ECHILD) {
      // Not our child any more (cannot happen unless someone else reaped it).
      on_exit(w, 0);
    }
  }
}

void Supervisor::on_exit(Worker& w, int status) {
  w.running = false;
  w.end.status = status;
  // Its pipes hold everything it wrote before exiting: forward that, then close.
  drain(w.out);
  drain(w.err);
}

bool Supervisor::read_stream(Stream& s) {
  if (s.fd < 0) return false;
  if (read_once(s.fd, *s.lines) == ReadResult::kEof) {
    close_stream(s);
    return false;
  }
  return true;
}

void Supervisor::drain(Stream& s) {
  if (s.fd < 0) return;
  size_t total = 0;
  while (total < kDrainLimit && read_once(s.fd, *s.lines) == ReadResult::kData) total += kReadChunk;
  close_stream(s);
}

void Supervisor::close_stream(Stream& s) {
  if (s.fd < 0) return;
  s.lines->finish();
  close(s.fd);
  s.fd = -1;
}

bool Supervisor::anything_left() const {
  for (const auto& w : workers_) {
    if (w.running || w.out.fd >= 0 || w.err.fd >= 0) return true;
  }
  return false;
}

int Supervisor::run() {
  const bool started = start_workers();
  if (!started) stop_all(SIGTERM, false);

  std::vector<pollfd> fds;
  std::vector<Stream*> streams;
  while (true) {
    handle_signals();
    if (SignalEvents::take_child_exited()) reap();
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
    stderr_sink_.write("tdistrun: stopped the workers already started; exiting with status 1\n");
    return 1;
  }
  return finish();
}

int Supervisor::finish() {
  int code = 0;
  if (first_failure_ >= 0) {
    code = exit_code_of(workers_[static_cast<size_t>(first_failure_)].end.status);
  } else if (received_signal_ != 0) {
    code = 128 + received_signal_;
  }
  if (code != 0) {
    std::vector<WorkerEnd> ends;
    for (const auto& w : workers_) ends.push_back(w.end);
    std::string text;
    for (const auto& line : summary_lines(ends, first_failure_, received_signal_, opt_.kill_timeout_s, code)) {
      text += line + "\n";
    }
    stderr_sink_.write(text);
  }
  return code;
}

}  // namespace tdistrun
