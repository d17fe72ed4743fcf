// Where each worker's output and error file go, in torchrun's layout:
//   LOG_DIR/<rdzv_id>_<random>/attempt_<n>/<local_rank>/stdout.log, stderr.log, error.json
// --redirects sends a stream to its file instead of the console, --tee to
// both, --local-ranks-filter keeps the other local ranks off the console.
// Without --log-dir the files go to a temporary directory, removed at exit
// unless a stream was redirected there.
#pragma once

#include <string>

#include "options.h"

namespace tdistrun {

struct StreamTarget {
  bool console = true;
  std::string file;  // "" none
};

struct WorkerLogs {
  StreamTarget out, err;
  std::string error_file;  // TORCHELASTIC_ERROR_FILE
};

class LogLayout {
 public:
  // Creates the job's directory; throws std::runtime_error naming it when it cannot.
  explicit LogLayout(const Options& opt);
  ~LogLayout();
  LogLayout(const LogLayout&) = delete;
  LogLayout& operator=(const LogLayout&) = delete;

  // Creates attempt_<attempt>/<local_rank>/ and says where its streams go.
  // replacement > 0: the n-th worker started in place of a failed one
  // (--on-failure shrink-and-replace), in a folder of its own.
  WorkerLogs for_worker(int attempt, int local_rank, int replacement = 0) const;
  const std::string& dir() const { return dir_; }
  // Whether the directory stays after exit (--log-dir, or output redirected to it).
  bool kept() const { return keep_; }

 private:
  const Options& opt_;
  std::string dir_;
  bool keep_ = false;
};

}  // namespace tdistrun
