#include "tdist/spawn.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tdist/errors.h"
#include "util/job_token.h"
#include "util/socket.h"

namespace tdist {

namespace {

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "status " + std::to_string(status);
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

}  // namespace

const std::vector<std::string>& launcher_variables() {
  // tools/tdistrun/worker.cpp (worker_variables) and torchrun set these.
  static const std::vector<std::string> names = {
      "TORCHELASTIC_USE_AGENT_STORE", "TDIST_AGENT_STORE_PREFIX", "TDIST_LAUNCHED",
      "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
      "TORCHELASTIC_ERROR_FILE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
  };
  return names;
}

void spawn(const std::function<void(int rank, int world_size)>& fn, int nprocs, SpawnOptions options) {
  if (nprocs < 1) throw DistValueError("spawn: nprocs must be >= 1, got " + std::to_string(nprocs));
  std::string port, token;
  if (options.set_env) {
    // A port the kernel just handed out; the rank-0 store binds it again.
    Fd probe = listen_tcp(options.master_addr, 0);
    port = std::to_string(local_port(probe.get()));
    // One secret for this job, unless the caller chose one: nobody else joins it.
    if (!auth::job_token()) token = auth::generate_token();
  }
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < nprocs; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      for (pid_t p : pids) kill(p, SIGKILL);
      throw DistError(std::string("spawn: fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
      if (options.set_env) {
        setenv("MASTER_ADDR", options.master_addr.c_str(), 1);
        setenv("MASTER_PORT", port.c_str(), 1);
        setenv("RANK", std::to_string(rank).c_str(), 1);
        setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
        setenv("WORLD_SIZE", std::to_string(nprocs).c_str(), 1);
        setenv("LOCAL_WORLD_SIZE", std::to_string(nprocs).c_str(), 1);
        if (!token.empty()) setenv("TDIST_JOB_TOKEN", token.c_str(), 1);
        for (const std::string& name : launcher_variables()) unsetenv(name.c_str());
      }
      int code = 0;
      try {
        fn(rank, nprocs);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "spawn: rank %d failed: %s\n", rank, e.what());
        code = 1;
      } catch (...) {
        std::fprintf(stderr, "spawn: rank %d failed with an unknown exception\n", rank);
        code = 1;
      }
      std::fflush(nullptr);
      _exit(code);
    }
    pids.push_back(pid);
  }

  // Wait for all; on the first failure terminate the others (they would block
  // in collectives with the failed rank until their timeout).
  int left = nprocs;
  int first_failed = -1;
  int first_status = 0;
  while (left > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int rank = -1;
    for (int r = 0; r < nprocs; ++r)
      if (pids[r] == pid) rank = r;
    if (rank < 0) continue;  // not ours
    pids[rank] = -1;
    --left;
    if (failed(status) && first_failed < 0) {
      first_failed = rank;
      first_status = status;
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGTERM);
    }
  }
  if (first_failed >= 0)
    throw DistError("spawn: rank " + std::to_string(first_failed) + " of " + std::to_string(nprocs) +
                    " failed first with " + describe_status(first_status) + "; the other ranks were terminated");
}

}  // namespace tdist
