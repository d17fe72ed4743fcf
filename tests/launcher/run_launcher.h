// Runs the built tdistrun as a child of the test, with its stdout and stderr in
// files of a scratch directory, and waits for it with a bound.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace launcher_test {

inline const char* tdistrun_path() { return TDISTRUN_PATH; }
inline const char* worker_path() { return LAUNCHER_TEST_WORKER_PATH; }

// A fresh directory under /tmp, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = "/tmp/tdist-launcher-test-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}

// KEY=VALUE lines (the worker's "dump" files).
inline std::map<std::string, std::string> read_env_file(const std::string& path) {
  std::map<std::string, std::string> m;
  for (const auto& line : lines_of(read_file(path))) {
    auto eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

// Waits until pred() holds, up to the bound; returns whether it did.
template <typename Pred>
bool wait_until(Pred pred, std::chrono::milliseconds bound = std::chrono::seconds(30)) {
  auto end = std::chrono::steady_clock::now() + bound;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// A TCP port free right now (bind port 0, read it, release it).
inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("cannot pick a free port");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

struct Result {
  std::string port;  // the MASTER_PORT default this launch got (PET_MASTER_PORT)
  bool timed_out = false;
  int status = 0;  // waitpid status
  std::string out, err;
  bool exited() const { return !timed_out && WIFEXITED(status); }
  int code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
  std::string describe() const {
    return std::string(timed_out ? "TIMED OUT" : "") + " status=" + std::to_string(status) + " code=" +
           std::to_string(code()) + "\n--- stdout ---\n" + out + "--- stderr ---\n" + err;
  }
};

// One tdistrun process. Environment: the test's, without the variables that
// would change what tdistrun does, plus `extra_env` ("KEY=VALUE"). Unless
// extra_env sets PET_MASTER_PORT, the default port is a free one (the
// launcher binds it for its store, and tests run in parallel);
// "PET_MASTER_PORT=" alone means: no default at all. Most tests launch C++
// programs and /bin/sh, which run with --no-python: unless extra_env sets
// PET_NO_PYTHON (torchrun's environment form of it), it is PET_NO_PYTHON=1.
class Launcher {
 public:
  Launcher(const ScratchDir& scratch, std::vector<std::string> args, std::vector<std::string> extra_env = {},
           const std::string& tag = "launcher")
      : out_path_(scratch.file(tag + ".out")), err_path_(scratch.file(tag + ".err")) {
    static const char* kScrub[] = {"OMP_NUM_THREADS", "TDIST_RUN_PREFIX", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                                   "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PYTHON_EXEC",
                                   "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"};
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry(*e);
      std::string key = entry.substr(0, entry.find('='));
      bool drop = key.rfind("PET_", 0) == 0;
      for (const char* s : kScrub) drop = drop || key == s;
      if (!drop) env.push_back(entry);
    }
    bool port_given = false;
    bool no_python_given = false;
    for (const auto& e : extra_env) {
      if (e.rfind("PET_MASTER_PORT=", 0) == 0) {
        port_given = true;
        port_ = e.substr(16);
      }
      if (e.rfind("PET_NO_PYTHON=", 0) == 0) no_python_given = true;
    }
    if (!no_python_given) env.push_back("PET_NO_PYTHON=1");
    if (!port_given) {
      port_ = std::to_string(free_port());
      env.push_back("PET_MASTER_PORT=" + port_);
    }
    for (const auto& e : extra_env) {
      if (e != "PET_MASTER_PORT=") env.push_back(e);
    }

    std::vector<std::string> argv_s{tdistrun_path()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);

    int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0 || err < 0) throw std::runtime_error("cannot create output files");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out, 1);
      dup2(err, 2);
      execve(argv[0], argv.data(), envp.data());
      _exit(126);
    }
    close(out);
    close(err);
    if (pid_ < 0) throw std::runtime_error("fork failed");
  }

  ~Launcher() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& port() const { return port_; }
  void signal(int sig) const { kill(pid_, sig); }

  // Waits for tdistrun to exit (SIGKILL after the bound, reported as timed_out).
  Result wait(std::chrono::seconds bound = std::chrono::seconds(60)) {
    Result r;
    r.port = port_;
    auto end = std::chrono::steady_clock::now() + bound;
    while (true) {
      pid_t w = waitpid(pid_, &r.status, WNOHANG);
      if (w == pid_) break;
      if (std::chrono::steady_clock::now() > end) {
        r.timed_out = true;
        kill(pid_, SIGKILL);
        waitpid(pid_, &r.status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    r.out = read_file(out_path_);
    r.err = read_file(err_path_);
    return r;
  }

 private:
  std::string out_path_, err_path_;
  std::string port_;
  pid_t pid_ = -1;
};

// Runs tdistrun to completion.
inline Result run(const ScratchDir& scratch, std::vector<std::string> args, std::vector<std::string> extra_env = {}) {
  Launcher l(scratch, std::move(args), std::move(extra_env));
  return l.wait();
}

}  // namespace launcher_test
