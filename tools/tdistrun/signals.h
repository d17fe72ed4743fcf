// Signals seen by the launcher, turned into poll()-able events (self-pipe):
// those of --signals-to-handle (torchrun's default: SIGINT, SIGTERM, SIGHUP,
// SIGQUIT) are to be forwarded to the workers, which then stop; SIGUSR1, when
// not among them, is forwarded without stopping anything (a tdist worker dumps
// its flight recorder on it: docs/tracing.md); SIGCHLD says a worker may have
// exited. SIGPIPE is ignored (a closed stdout must not kill the launcher while
// workers still run). Signals not listed keep their default action.
#pragma once

#include <signal.h>

#include <string>
#include <vector>

namespace tdistrun {

// "SIGKILL" style name, or "signal N" for one without a name here.
std::string signal_name(int sig);

class SignalEvents {
 public:
  // Creates the pipe and installs the handlers; `forwarded`: the signals to
  // pass to the workers and stop them (Options::signals_to_handle). Call
  // once, before starting workers.
  static void install(const std::vector<int>& forwarded);
  // Read end of the self-pipe: readable when a signal arrived.
  static int fd();
  // Empties the pipe (call when fd() is readable).
  static void drain();
  // Forwarded signals received since the last call, in the order install() was given them.
  static std::vector<int> take_termination_signals();
  // True once after one or more SIGCHLD.
  static bool take_child_exited();
  // True once after one or more SIGUSR1.
  static bool take_usr1();

  // The signals the launcher handles; block them around fork() so a child
  // never runs the launcher's handlers, then restore the old mask.
  static sigset_t handled_set();
  // In a forked child, before exec: default dispositions for every handled
  // signal and SIGPIPE (ignored dispositions survive exec; handled ones do not,
  // but could run between fork and exec), except SIGUSR1 when it is passed on
  // without stopping: ignored, so that it never kills a worker (tdist
  // replaces SIG_IGN with its dump at init).
  // Async-signal-safe.
  static void reset_in_child();
};

}  // namespace tdistrun
