// One attempt of the launcher's event loop: starts this node's workers,
// forwards their output (line by line to the console, raw to log files),
// forwards signals, stops everyone when one fails (--on-failure restart; with
// shrink the others run on) or the rendezvous asks, and reports.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "log_files.h"
#include "options.h"
#include "output.h"
#include "rendezvous.h"
#include "summary.h"
#include "worker.h"

namespace tdistrun {

// How an attempt ended.
struct AttemptResult {
  enum class Kind {
    kSucceeded,     // every worker exited 0 (--on-failure shrink: one did; the others' failures were tolerated)
    kWorkerFailed,  // one exited non-zero or was killed; the others were stopped (shrink: none exited 0)
    kSignaled,      // the launcher got SIGINT/SIGTERM/SIGHUP/SIGQUIT
    kStopped,       // the monitor asked (another node failed or joined)
    kStartFailed,   // a worker could not be started
  };
  Kind kind = Kind::kSucceeded;
  int exit_code = 0;    // the launcher's, were it to exit now
  std::string failure;  // kWorkerFailed: "rank 3 (local_rank 1, pid 42): exit code 1"
};

class Supervisor {
 public:
  // Asked every --monitor-interval while workers run: a reason to stop them all, or nullopt.
  using Monitor = std::function<std::optional<std::string>()>;
  // Told at once, before anything slow, when a worker failed and the others
  // run on (--on-failure shrink); its end holds the wait status.
  using FailureReport = std::function<void(const WorkerEnd&)>;

  // SignalEvents must be installed.
  Supervisor(const Options& opt, std::string program_path, const WorkerPlacement& placement,
             const LogLayout& logs, int attempt, Monitor monitor);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  void set_failure_report(FailureReport report) { failure_report_ = std::move(report); }

  // Starts the workers and waits for all of them; prints the summary on a
  // failure or a signal.
  AttemptResult run();

 private:
  struct Stream {
    int fd = -1;                          // read end of the worker's pipe
    int file_fd = -1;                     // its log file (raw bytes), or -1
    std::unique_ptr<LinePrefixer> lines;  // to the console, or null
  };
  struct Worker {
    WorkerEnd end;  // rank, local_rank, pid; status once reaped
    bool running = false;
    Stream out, err;
    std::string error_file;
  };

  bool start_workers();
  // Starts the worker of `local_rank` and adds it to workers_; false (said
  // on stderr) when it cannot be started.
  // `replacement` > 0: the n-th replacement of a failed worker, which joins
  // the running job (TDIST_JOIN_RUNNING_JOB=1).
  bool start_worker(int local_rank, int replacement = 0);
  bool open_stream(const StreamTarget& target, FdSink& console, const std::string& prefix, Stream* stream,
                   StreamSetup* setup);
  void monitor();
  void handle_signals();
  void reap();
  void on_exit(Worker& w, int status);
  // workers_[index] exited non-zero or was killed while no stop was under way.
  void on_failure(size_t index);
  void stop_all(int sig, bool forwarded);
  void escalate();
  void signal_worker(Worker& w, int sig);
  bool read_stream(Stream& s);  // false at EOF (stream closed)
  void drain(Stream& s);
  void close_stream(Stream& s);
  bool anything_left() const;
  AttemptResult finish();
  // finish() after workers failed and the others ran on (--on-failure shrink).
  AttemptResult finish_shrunk();

  Options opt_;
  std::string path_;
  WorkerPlacement placement_;
  const LogLayout& logs_;
  int attempt_;
  Monitor monitor_;
  FailureReport failure_report_;
  long long next_monitor_ms_ = 0;
  std::string stop_reason_;  // the monitor's, once it asked
  FdSink stdout_sink_{1};
  FdSink stderr_sink_{2};
  std::vector<Worker> workers_;
  int devnull_ = -1;      // the workers' stdin
  int devnull_out_ = -1;  // where a stream that goes nowhere is written
  int first_failure_ = -1;   // index into workers_
  std::vector<int> tolerated_;  // indices into workers_ of failures the others ran on after (shrink)
  // Local ranks whose replacement reap() starts once it is done with workers_
  // (shrink-and-replace), and how many replacements were started.
  std::vector<int> to_replace_;
  int replacements_ = 0;
  long long started_ms_ = 0;    // monotonic ms when the workers were started
  int received_signal_ = 0;  // first SIGINT/SIGTERM/SIGHUP the launcher got
  bool stopping_ = false;
  bool escalated_ = false;
  long long kill_deadline_ms_ = -1;  // monotonic ms; -1: none
};

}  // namespace tdistrun
