#include "trace/signal_dump.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "trace/folders.h"
#include "trace/recorder_registry.h"
#include "trace/timeline.h"
#include "util/logging.h"
#include "util/thread_name.h"

namespace tdist::trace {

namespace {

constexpr char kUsr1 = 'U';
constexpr char kTerm = 'T';

// The pipe's write end and the process whose thread reads it: a forked child
// inherits the handlers but not the thread, and must never wake its parent's
// (a DataLoader worker stopped with SIGTERM would end its parent).
std::atomic<int> g_signal_fd{-1};
std::atomic<pid_t> g_owner{0};
volatile sig_atomic_t g_term_seen = 0;

bool wake(char byte) {
  if (getpid() != g_owner.load(std::memory_order_relaxed)) return false;
  return write(g_signal_fd.load(std::memory_order_relaxed), &byte, 1) == 1;
}

void on_sigusr1(int) {
  const int saved = errno;
  wake(kUsr1);  // with no thread to wake (a forked child), nothing: it lives on either way
  errno = saved;
}

void on_sigterm(int) {
  const int saved = errno;
  if (!g_term_seen) {
    g_term_seen = 1;
    if (wake(kTerm)) {  // the thread dumps, then ends the process
      errno = saved;
      return;
    }
  }
  // A second SIGTERM, or no thread to dump: the signal's own ending, now
  // (blocked inside this handler, it is delivered as the handler returns).
  signal(SIGTERM, SIG_DFL);
  raise(SIGTERM);
  errno = saved;
}

// SIGUSR1: where the dump went, in words for the log.
std::string dump_on_request() {
  const Identity who = identity();
  std::string path = dump_destination(who.rank);
  if (!path.empty()) {
    write_dump(path, "signal", "SIGUSR1");
    return path;
  }
  const std::string dir = default_dump_folder();
  // Before init knows the rank, a rank's name would be a guess: the pid's, which tdist-trace skips.
  path = dir + (identity_set() ? "/tdist_fr_" + std::to_string(who.rank) : "/tdist_fr_pid" + std::to_string(getpid())) +
         ".json";
  write_dump(path, "signal", "SIGUSR1");
  return path + " (TDIST_FLIGHT_RECORDER_DIR is unset, so the default folder; `tdist-trace " + dir +
         "` reads it; a later job's dump of the same rank replaces it)";
}

// SIGTERM: this rank's record where its failure's dump did not already write
// it, the timeline's last lines, then the ending the signal would have had.
void dump_then_terminate() {
  const std::string path = dump_destination(identity().rank);
  if (!path.empty()) {
    try {
      if (write_dump_unless_failure_dumped(path, "signal", "SIGTERM: stopped from outside (launchers stop every rank "
                                                           "when one fails)"))
        TDIST_LOG(LogLevel::Warn, "flight recorder: dumped on SIGTERM to " << path);
    } catch (const std::exception& e) {
      TDIST_LOG(LogLevel::Error, "flight recorder: the dump on SIGTERM failed: " << e.what());
    }
  }
  flush_timeline();
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGTERM, &dfl, nullptr);
  kill(getpid(), SIGTERM);
}

void signal_thread(int fd) {
  for (;;) {
    char byte;
    ssize_t n = read(fd, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    if (byte == kTerm) {
      dump_then_terminate();
      continue;
    }
    try {
      const std::string where = dump_on_request();
      TDIST_LOG(LogLevel::Warn, "flight recorder: dumped on SIGUSR1 to " << where);
    } catch (const std::exception& e) {
      TDIST_LOG(LogLevel::Error, "flight recorder: the dump on SIGUSR1 failed: " << e.what());
    }
  }
}

// Installs `handler` for `sig` where its disposition is the default one (or,
// with `from_ignored`, SIG_IGN); never over a handler of the program's own.
void take_over(int sig, void (*handler)(int), bool from_ignored) {
  struct sigaction old {};
  if (sigaction(sig, nullptr, &old) != 0) return;
  if (old.sa_flags & SA_SIGINFO) return;  // the program's own
  if (old.sa_handler == handler) return;
  if (old.sa_handler != SIG_DFL && !(from_ignored && old.sa_handler == SIG_IGN)) return;
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, nullptr);
}

}  // namespace

void install_signal_dumps() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const pid_t me = getpid();
  if (g_owner.load() != me) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      TDIST_LOG(LogLevel::Error, "flight recorder: no dumps on signals (cannot make a pipe: " << std::strerror(errno)
                                                                                             << ")");
      return;
    }
    fcntl(fds[0], F_SETFL, 0);  // the thread blocks; the handlers must not
    std::thread signals(signal_thread, fds[0]);
    name_thread(signals, "tdist-signals");
    signals.detach();
    const int inherited = g_signal_fd.exchange(fds[1]);
    if (inherited >= 0) close(inherited);  // the parent's, in a forked child
    g_term_seen = 0;
    g_owner.store(me);
  }
  take_over(SIGUSR1, on_sigusr1, /*from_ignored=*/true);
  // Failures dump only where a destination is set: so does a rank stopped because of one.
  if (!dump_destination(0).empty()) take_over(SIGTERM, on_sigterm, /*from_ignored=*/false);
}

}  // namespace tdist::trace
