// Starting one worker: its argument list, its torchrun environment, and the
// fork/exec that puts it in its own process group, ties its life to the
// launcher's (PR_SET_PDEATHSIG) and connects its output to pipes.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "options.h"

namespace tdistrun {

// Where this node's workers stand in the job, from the rendezvous, and where
// they find the store (the agent's: TORCHELASTIC_USE_AGENT_STORE).
struct WorkerPlacement {
  int node_rank = 0;
  int nnodes = 1;
  long long rank_offset = 0;  // the global rank of local rank 0
  long long world_size = 1;
  int restart_count = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string store_prefix;  // the workers' keys in the agent's store
};

// The variables a worker gets on top of the launcher's environment, in order.
// home_cpu_set: the launcher's environment sets TDIST_HOME_CPU.
std::vector<std::pair<std::string, std::string>> worker_variables(const Options& opt, const WorkerPlacement& where,
                                                                  int local_rank, bool omp_num_threads_set,
                                                                  const std::string& error_file,
                                                                  bool home_cpu_set = false);
// The launcher's environment (KEY=VALUE strings) with the worker's variables set.
std::vector<std::string> worker_environment(const Options& opt, const WorkerPlacement& where, int local_rank,
                                            const std::string& error_file, char** base_env);
// Options::command ARGS..., with "--local-rank=N" (--pass-local-rank) after
// the script when Python runs PROGRAM, last with --no-python.
std::vector<std::string> worker_argv(const Options& opt, int local_rank);

// Finds PROGRAM as execvp would (through PATH when it has no '/'); returns the
// path to execute, or an empty string and a reason in *error.
std::string resolve_program(const std::string& program, std::string* error);

struct Spawned {
  pid_t pid = -1;
  int out_fd = -1;  // read ends of the worker's stdout/stderr pipes (-1: inherited)
  int err_fd = -1;
};

// Where a worker's stdout or stderr goes.
struct StreamSetup {
  enum class Mode { kInherit, kPipe, kFd } mode = Mode::kInherit;
  int fd = -1;  // kFd: the open file (or /dev/null) it writes to
};

struct SpawnRequest {
  std::string path;                // resolved executable
  std::vector<std::string> argv;
  std::vector<std::string> env;
  StreamSetup out, err;
  int stdin_fd = -1;               // becomes the worker's stdin
  sigset_t child_mask;             // signal mask for the worker (the launcher's own)
  std::string label;               // "rank 3", for an exec failure message
};

// Forks and execs a worker. The caller blocks the launcher's handled signals
// around this call. Throws std::system_error when pipes or fork fail; an exec
// failure shows up as the worker's exit code 127 with a message on its stderr.
Spawned spawn_worker(const SpawnRequest& req);

}  // namespace tdistrun
