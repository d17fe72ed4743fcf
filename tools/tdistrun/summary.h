// How each worker ended, in words, and the launcher's exit status.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "error_file.h"

namespace tdistrun {

struct WorkerEnd {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = 0;
  int status = 0;           // from waitpid
  int signal_sent = 0;      // last signal the launcher sent this worker (0: none)
  bool forwarded = false;   // signal_sent was the launcher's own SIGINT/SIGTERM/SIGHUP, passed on
  bool escalated = false;   // the launcher sent SIGKILL when the grace period ran out
  double ended_after_s = -1;  // seconds from the start of the workers to its exit (-1: running)
  // Who the library knows it as, for its death record exited/<launch_id>:
  // its rank, or for the n-th replacement of a failed worker (--on-failure
  // shrink-and-replace) rank + n * world_size, so that a record of the dead
  // worker never condemns its replacement.
  long long launch_id = 0;
};

// "exited 0", "exit code 3", "killed by signal 9 (SIGKILL)".
std::string describe_status(int status);
// Like describe_status, but says when the launcher caused the ending.
std::string describe_end(const WorkerEnd& end, double kill_timeout_s);
// The shell's convention: the exit code, or 128 + the signal number.
int exit_code_of(int status);
// "rank 2 (local_rank 2, pid 1234)".
std::string worker_label(const WorkerEnd& end);
// "rank 3 (local_rank 1, pid 4242) was killed by signal 9 (SIGKILL)", "... exited with code 3":
// what --on-failure shrink tells the other workers (the store's exited/<rank>).
std::string exit_sentence(const WorkerEnd& end);

// Lines for stderr (each starting "tdistrun: ") after a failure or a signal:
// the first failure first (if any) with the lines of its error file, else
// the signal received, then every other worker in rank order. first_failure
// indexes ends, or is -1. The last line names exit_code, unless it is
// negative (the launcher may still restart the workers).
std::vector<std::string> summary_lines(const std::vector<WorkerEnd>& ends, int first_failure, int received_signal,
                                       double kill_timeout_s, int exit_code,
                                       const std::vector<std::string>& first_failure_error = {});

// Lines for stderr at the end of an attempt in which workers failed and the
// others ran on (--on-failure shrink): those that failed in the order they
// did, each with when and the lines of its error file (errors[i] for
// failed[i], error_lines' form, may be empty), then every other worker in
// rank order. `failed` indexes ends. The last line names exit_code, unless it
// is negative.
std::vector<std::string> shrink_summary_lines(const std::vector<WorkerEnd>& ends, const std::vector<int>& failed,
                                              const std::vector<std::vector<std::string>>& errors,
                                              double kill_timeout_s, int exit_code);

// The error a worker left in its error file, as summary lines (without the
// "tdistrun: " start): the message, then the last lines of a Python traceback.
// `path` names the file in the first line, unless it is empty.
std::vector<std::string> error_lines(const WorkerError& error, const std::string& path);

}  // namespace tdistrun
