#include "worker.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "signals.h"

namespace tdistrun {

std::vector<std::pair<std::string, std::string>> worker_variables(const Options& opt, const WorkerPlacement& where,
                                                                  int local_rank, bool omp_num_threads_set,
                                                                  const std::string& error_file, bool home_cpu_set) {
  const long long world = where.world_size;
  const long long rank = where.rank_offset + local_rank;
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", opt.virtual_local_rank ? "0" : std::to_string(local_rank)},  // --virtual-local-rank: 0
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_WORLD_SIZE", std::to_string(opt.nproc_per_node)},
      {"GROUP_RANK", std::to_string(where.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(where.nnodes)},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"ROLE_NAME", opt.role},
      {"MASTER_ADDR", where.master_addr},
      {"MASTER_PORT", std::to_string(where.master_port)},
      {"TORCHELASTIC_RUN_ID", opt.rdzv_id},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(where.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(opt.max_restarts)},
      // The store is the launcher's (rendezvous.h): every worker is its client.
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"TDIST_AGENT_STORE_PREFIX", where.store_prefix},
      {"TDIST_LAUNCHED", "1"},
  };
  if (!error_file.empty()) vars.emplace_back("TORCHELASTIC_ERROR_FILE", error_file);
  // As torchrun's agent, which leaves its --signals-to-handle in the workers' environment.
  std::string signals;
  for (int sig : opt.signals_to_handle) signals += (signals.empty() ? "" : ",") + signal_name(sig);
  vars.emplace_back("TORCHELASTIC_SIGNALS_TO_HANDLE", signals);
  if (opt.virtual_local_rank) {
    // torchrun's virtual local rank: each worker sees its one device as device 0.
    const std::string device = opt.visible_devices.empty() ? std::to_string(local_rank)
                                                           : opt.visible_devices[static_cast<size_t>(local_rank)];
    vars.emplace_back("CUDA_VISIBLE_DEVICES", device);
    if (opt.hip_visible_devices) vars.emplace_back("HIP_VISIBLE_DEVICES", device);
    // tdist picks each rank's home CPU from LOCAL_RANK, now 0 everywhere: every
    // rank would wait on the same core. Left to the kernel unless the user chose.
    if (!home_cpu_set) vars.emplace_back("TDIST_HOME_CPU", "0");
  }
  if (!opt.job_token.empty()) vars.emplace_back("TDIST_JOB_TOKEN", opt.job_token);
  // As torchrun: several workers each running one thread per core would overload the node.
  if (!omp_num_threads_set && opt.nproc_per_node > 1) vars.emplace_back("OMP_NUM_THREADS", "1");
  return vars;
}

std::vector<std::string> worker_environment(const Options& opt, const WorkerPlacement& where, int local_rank,
                                            const std::string& error_file, char** base_env) {
  bool omp_set = false;
  bool home_cpu_set = false;
  for (char** e = base_env; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) == 0) omp_set = true;
    if (std::strncmp(*e, "TDIST_HOME_CPU=", 15) == 0) home_cpu_set = true;
  }
  auto vars = worker_variables(opt, where, local_rank, omp_set, error_file, home_cpu_set);
  std::vector<std::string> env;
  for (char** e = base_env; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view key = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& [k, v] : vars) {
      if (key == k) overridden = true;
    }
    if (!overridden) env.emplace_back(entry);
  }
  for (const auto& [k, v] : vars) env.push_back(k + "=" + v);
  return env;
}

std::vector<std::string> worker_argv(const Options& opt, int local_rank) {
  std::vector<std::string> argv = opt.command.empty() ? std::vector<std::string>{opt.program} : opt.command;
  const std::string local_rank_arg = "--local-rank=" + std::to_string(local_rank);
  // Right after the script, as torchrun puts it, when Python runs PROGRAM; last
  // with --no-python, where PROGRAM may be an interpreter ("sh -c ...") that would take it.
  const bool python = opt.program_kind != ProgramKind::kExecutable;
  if (opt.pass_local_rank && python) argv.push_back(local_rank_arg);
  argv.insert(argv.end(), opt.program_args.begin(), opt.program_args.end());
  if (opt.pass_local_rank && !python) argv.push_back(local_rank_arg);
  return argv;
}

namespace {

// 0 when path is an executable regular file, else an errno value.
int check_executable(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (access(path.c_str(), X_OK) != 0) return errno;
  return 0;
}

}  // namespace

std::string resolve_program(const std::string& program, std::string* error) {
  if (program.empty()) {
    *error = "empty program name";
    return {};
  }
  if (program.find('/') != std::string::npos) {
    int err = check_executable(program);
    if (err == 0) return program;
    *error = std::strerror(err);
    return {};
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  int first_err = 0;
  size_t start = 0;
  while (true) {
    size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    int err = check_executable(candidate);
    if (err == 0) return candidate;
    if (err != ENOENT && err != ENOTDIR && first_err == 0) first_err = err;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  *error = first_err != 0 ? std::strerror(first_err) : "command not found in PATH";
  return {};
}

namespace {

void close_pair(int p[2]) {
  if (p[0] >= 0) close(p[0]);
  if (p[1] >= 0) close(p[1]);
}

// Async-signal-safe message to fd 2 from a forked child.
void child_fail(const char* what, const std::string& label, const std::string& path, int err) {
  const char* parts[] = {"tdistrun: ", label.c_str(), ": cannot ", what, " '", path.c_str(), "': ", strerror(err), "\n"};
  for (const char* p : parts) {
    ssize_t ignored = write(2, p, strlen(p));
    (void)ignored;
  }
  _exit(127);
}

}  // namespace

Spawned spawn_worker(const SpawnRequest& req) {
  using Mode = StreamSetup::Mode;
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (req.out.mode == Mode::kPipe && pipe2(out, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  if (req.err.mode == Mode::kPipe && pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    close_pair(out);
    throw std::system_error(e, std::generic_category(), "pipe");
  }

  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<char*> argv;
  for (const auto& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : req.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // execvp's fallback for an executable text file without "#!": run it with /bin/sh.
  std::vector<char*> sh_argv{const_cast<char*>("/bin/sh"), const_cast<char*>(req.path.c_str())};
  sh_argv.insert(sh_argv.end(), argv.begin() + 1, argv.end());
  const pid_t launcher = getpid();

  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close_pair(out);
    close_pair(err);
    throw std::system_error(e, std::generic_category(), "fork");
  }
  if (pid == 0) {
    SignalEvents::reset_in_child();
    // Own process group: the launcher signals the worker and whatever it started.
    setpgid(0, 0);
    // Die with the launcher, even when it is SIGKILLed; and if it is already gone, do not start.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(127);
    if (req.stdin_fd >= 0) dup2(req.stdin_fd, 0);
    if (req.out.mode == Mode::kPipe) dup2(out[1], 1);
    if (req.out.mode == Mode::kFd) dup2(req.out.fd, 1);
    if (req.err.mode == Mode::kPipe) dup2(err[1], 2);
    if (req.err.mode == Mode::kFd) dup2(req.err.fd, 2);
    sigprocmask(SIG_SETMASK, &req.child_mask, nullptr);
    execve(req.path.c_str(), argv.data(), envp.data());
    const int exec_errno = errno;
    if (exec_errno == ENOEXEC) execve(sh_argv[0], sh_argv.data(), envp.data());
    child_fail("execute", req.label, req.path, exec_errno);
  }
  // Also here, so that signals sent right after fork already reach the group.
  setpgid(pid, pid);
  Spawned s;
  s.pid = pid;
  if (req.out.mode == Mode::kPipe) {
    close(out[1]);
    fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
    s.out_fd = out[0];
  }
  if (req.err.mode == Mode::kPipe) {
    close(err[1]);
    fcntl(err[0], F_SETFL, fcntl(err[0], F_GETFL) | O_NONBLOCK);
    s.err_fd = err[0];
  }
  return s;
}

}  // namespace tdistrun
