// The launcher's event loop: starts the workers, forwards their output line by
// line, forwards signals, stops everyone when one fails, and reports.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "options.h"
#include "output.h"
#include "summary.h"

namespace tdistrun {

class Supervisor {
 public:
  // opt.master_port must already be resolved (not 0). SignalEvents must be installed.
  Supervisor(const Options& opt, std::string program_path);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts the workers, waits for all of them, prints the summary on failure
  // and returns the launcher's exit status.
  int run();

 private:
  struct Stream {
    int fd = -1;
    std::unique_ptr<LinePrefixer> lines;
  };
  struct Worker {
    WorkerEnd end;  // rank, local_rank, pid; status once reaped
    bool running = false;
    Stream out, err;
  };

  bool start_workers();
  void handle_signals();
  void reap();
  void on_exit(Worker& w, int status);
  void stop_all(int sig, bool forwarded);
  void escalate();
  void signal_worker(Worker& w, int sig);
  bool read_stream(Stream& s);  // false at EOF (stream closed)
  void drain(Stream& s);
  void close_stream(Stream& s);
  bool anything_left() const;
  int finish();

  Options opt_;
  std::string path_;
  FdSink stdout_sink_{1};
  FdSink stderr_sink_{2};
  std::vector<Worker> workers_;
  int devnull_ = -1;
  int first_failure_ = -1;   // index into workers_
  int received_signal_ = 0;  // first SIGINT/SIGTERM/SIGHUP the launcher got
  bool stopping_ = false;
  bool escalated_ = false;
  long long kill_deadline_ms_ = -1;  // monotonic ms; -1: none
};

}  // namespace tdistrun
