// The process's MPI library, shared by every group of the "mpi" backend and
// by init's bootstrap under mpirun: initialised once (with the highest thread
// level the library grants), finalised when the last user lets go, and only if
// tdist initialised it. Every MPI call goes through call(): on the caller's
// thread where the library grants MPI_THREAD_MULTIPLE, else on the one MPI
// thread (as torch's ProcessGroupMPI), which also drives the requests of
// asynchronous operations to completion.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace tdist::mpi {

class Runtime;
void finalize_at_exit();

// A hold on the initialised library. When tdist initialised MPI, the process
// keeps a hold of its own until let_go() (destroy_process_group), so a failed
// init does not finalise it; the last hold dropped after that finalises it,
// and so does the exit of a process that never let go.
using RuntimeHold = std::shared_ptr<Runtime>;

// Initialises MPI if nobody has (DistBackendError when it cannot be, or was
// finalised already), and returns a hold on it. `who` names the caller in errors.
RuntimeHold acquire_runtime(const std::string& who);
// Drops the process's own hold (see RuntimeHold).
void let_go();

// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string error_string(int code);

class Runtime {
 public:
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int thread_level() const { return provided_; }
  // Whether the library is MPICH or one derived from it (its known bugs are worked around).
  bool is_mpich() const { return mpich_; }
  bool initialised_by_tdist() const { return ours_; }
  // "MPI_THREAD_MULTIPLE" ...
  static const char* thread_level_name(int level);

  // Runs fn with MPI: at once on this thread (MPI_THREAD_MULTIPLE), else on the
  // MPI thread, waiting for it. Exceptions of fn reach the caller. A template,
  // so that the common case (a blocking call of a few hundred nanoseconds)
  // makes no std::function and no allocation.
  template <typename F>
  void call(F&& fn) {
    if (!funnelled()) {
      fn();
      return;
    }
    call_on_mpi_thread(std::function<void()>(std::ref(fn)));
  }
  // Hands `request` (posted by a call()) to the progress thread, which tests it
  // until it completes and then runs done(MPI_SUCCESS or an error code, its
  // status) there.
  // Requests complete and run done in the order of their completion.
  void track(MPI_Request request, std::function<void(int, const MPI_Status&)> done);
  // Runs fn on the MPI thread without waiting (funnelled mode), or on this
  // thread (multiple): posting of asynchronous operations, in issue order.
  void post(std::function<void()> fn);
  bool funnelled() const { return provided_ < MPI_THREAD_MULTIPLE; }

 private:
  friend RuntimeHold acquire_runtime(const std::string&);
  friend void finalize_at_exit();
  struct Progress;
  Runtime(int provided, bool ours);
  Progress& progress();
  void call_on_mpi_thread(const std::function<void()>& fn);

  int provided_;
  bool ours_;
  bool mpich_ = false;
  std::once_flag progress_once_;
  std::unique_ptr<Progress> progress_;  // started by the first call that needs the MPI thread
};

}  // namespace tdist::mpi
