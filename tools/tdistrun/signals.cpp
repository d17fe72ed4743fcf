#include "signals.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tdistrun {
namespace {

// What install() was given, written before any handler runs.
int g_forwarded[NSIG];
int g_forwarded_count = 0;
bool g_usr1_passed_on = true;  // SIGUSR1 is not among them: passed on without stopping

int g_pipe[2] = {-1, -1};
volatile sig_atomic_t g_pending[NSIG] = {};
volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_usr1 = 0;

void on_signal(int sig) {
  int saved = errno;
  if (sig == SIGCHLD) {
    g_child = 1;
  } else if (sig == SIGUSR1 && g_usr1_passed_on) {
    g_usr1 = 1;
  } else if (sig > 0 && sig < NSIG) {
    g_pending[sig] = 1;
  }
  char byte = static_cast<char>(sig);
  // Non-blocking: if the pipe is full a wake-up is already pending.
  ssize_t ignored = write(g_pipe[1], &byte, 1);
  (void)ignored;
  errno = saved;
}

}  // namespace

std::string signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGCHLD: return "SIGCHLD";
    case SIGCONT: return "SIGCONT";
    case SIGSTOP: return "SIGSTOP";
    case SIGTSTP: return "SIGTSTP";
    case SIGTTIN: return "SIGTTIN";
    case SIGTTOU: return "SIGTTOU";
    case SIGURG: return "SIGURG";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGVTALRM: return "SIGVTALRM";
    case SIGPROF: return "SIGPROF";
    case SIGWINCH: return "SIGWINCH";
    case SIGIO: return "SIGIO";
    case SIGSYS: return "SIGSYS";
#ifdef SIGPWR
    case SIGPWR: return "SIGPWR";
#endif
    default: return "signal " + std::to_string(sig);
  }
}

void SignalEvents::install(const std::vector<int>& forwarded) {
  g_forwarded_count = 0;
  g_usr1_passed_on = true;
  for (int sig : forwarded) {
    if (sig <= 0 || sig >= NSIG || g_forwarded_count == NSIG) continue;
    g_forwarded[g_forwarded_count++] = sig;
    if (sig == SIGUSR1) g_usr1_passed_on = false;
  }
  if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(std::string("cannot create the signal pipe: ") + std::strerror(errno));
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < g_forwarded_count; ++i) sigaction(g_forwarded[i], &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, nullptr);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGPIPE, &ign, nullptr);
  // A parent may have started us with some of them blocked.
  sigset_t handled = handled_set();
  sigprocmask(SIG_UNBLOCK, &handled, nullptr);
}

int SignalEvents::fd() { return g_pipe[0]; }

void SignalEvents::drain() {
  char buf[256];
  while (read(g_pipe[0], buf, sizeof buf) > 0) {
  }
}

std::vector<int> SignalEvents::take_termination_signals() {
  std::vector<int> out;
  for (int i = 0; i < g_forwarded_count; ++i) {
    const int sig = g_forwarded[i];
    if (g_pending[sig]) {
      g_pending[sig] = 0;
      out.push_back(sig);
    }
  }
  return out;
}

bool SignalEvents::take_usr1() {
  if (!g_usr1) return false;
  g_usr1 = 0;
  return true;
}

bool SignalEvents::take_child_exited() {
  if (!g_child) return false;
  g_child = 0;
  return true;
}

sigset_t SignalEvents::handled_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int i = 0; i < g_forwarded_count; ++i) sigaddset(&set, g_forwarded[i]);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGUSR1);
  return set;
}

void SignalEvents::reset_in_child() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int i = 0; i < g_forwarded_count; ++i) sigaction(g_forwarded[i], &dfl, nullptr);
  sigaction(SIGCHLD, &dfl, nullptr);
  sigaction(SIGPIPE, &dfl, nullptr);
  if (!g_usr1_passed_on) return;  // listed: it stops the workers, as any signal listed
  // Ignored, and so across exec: a worker that has no handler yet (before
  // init_process_group, or a program that is not tdist's) lives through the
  // SIGUSR1 that tdistrun passes on; tdist takes it over at init (it replaces
  // SIG_IGN, never a program's own handler) and dumps its flight recorder.
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGUSR1, &ign, nullptr);
}

}  // namespace tdistrun
