// A worker for the launcher tests: started by tdistrun, it reports what it got
// (environment, arguments) or behaves in one scripted way (print, fail, trap
// SIGTERM, ...). Output goes through write(2), so nothing waits in stdio buffers.
//
//   dump DIR [ARGS...]   write DIR/rank<RANK>.env: the launcher's variables and argv
//   print                two stdout lines, one stderr line, then "tail <RANK>" without newline
//   spam N               N stdout lines "line <RANK> <i>" (one write each)
//   fail R CODE          rank R exits CODE after 100 ms; the others sleep
//   sigkill R            rank R kills itself with SIGKILL; the others sleep
//   trap DIR             on SIGTERM/SIGINT/SIGUSR2 write DIR/term<RANK> (the signal number) and exit 0;
//                        writes DIR/ready<RANK> once the handler is in place, then sleeps
//   ignore-term DIR      ignores SIGTERM, writes DIR/ready<RANK>, sleeps
//   pid DIR              writes DIR/pid<RANK> (its pid), sleeps
// "sleeps" means up to 60 s, then exit 0: a bound if a test goes wrong.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::string g_dir;
std::string g_rank;

void put(int fd, const std::string& s) {
  const char* p = s.data();
  size_t n = s.size();
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Written under a temporary name and renamed: a reader never sees half a file.
void write_file(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(tmp.c_str());
    std::exit(99);
  }
  put(fd, content);
  close(fd);
  rename(tmp.c_str(), path.c_str());
}

[[noreturn]] void sleep_then_exit() {
  for (int i = 0; i < 600; ++i) usleep(100 * 1000);
  std::exit(0);
}

char g_term_path[4096];  // DIR/term<RANK>, filled in before the handler is installed

void on_term(int sig) {
  // Async-signal-safe: open/write/close and _exit only.
  char msg[4] = {static_cast<char>('0' + sig / 10), static_cast<char>('0' + sig % 10), '\n', 0};
  const size_t n = 3;
  int fd = open(g_term_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    ssize_t ignored = write(fd, msg, n);
    (void)ignored;
    close(fd);
  }
  _exit(0);
}

// SIGUSR1 (passed on by the launcher, for a flight recorder dump): noted in
// usr1<rank>, and the worker goes on.
char g_usr1_path[4096];
void on_usr1(int) {
  int fd = open(g_usr1_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: launcher_test_worker MODE ...\n");
    return 99;
  }
  const std::string mode = argv[1];
  const char* rank_env = std::getenv("RANK");
  g_rank = rank_env != nullptr ? rank_env : "unset";
  const int rank = rank_env != nullptr ? std::atoi(rank_env) : -1;

  if (mode == "dump" && argc >= 3) {
    static const char* kKeys[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                                  "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR",
                                  "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
                                  "TORCHELASTIC_MAX_RESTARTS", "TDIST_LAUNCHED", "OMP_NUM_THREADS",
                                  "TDIST_JOB_TOKEN"};
    std::string out;
    for (const char* key : kKeys) {
      if (const char* v = std::getenv(key)) out += std::string(key) + "=" + v + "\n";
    }
    out += "ARGC=" + std::to_string(argc - 3) + "\n";
    for (int i = 3; i < argc; ++i) out += "ARG" + std::to_string(i - 3) + "=" + argv[i] + "\n";
    write_file(std::string(argv[2]) + "/rank" + g_rank + ".env", out);
    return 0;
  }
  if (mode == "print") {
    put(1, "out " + g_rank + " line1\nout " + g_rank + " line2\n");
    put(2, "err " + g_rank + "\n");
    put(1, "tail " + g_rank);
    return 0;
  }
  if (mode == "spam" && argc >= 3) {
    int n = std::atoi(argv[2]);
    for (int i = 0; i < n; ++i) put(1, "line " + g_rank + " " + std::to_string(i) + "\n");
    return 0;
  }
  if ((mode == "fail" || mode == "sigkill") && argc >= 3) {
    if (rank == std::atoi(argv[2])) {
      usleep(100 * 1000);
      if (mode == "sigkill") raise(SIGKILL);
      return argc >= 4 ? std::atoi(argv[3]) : 1;
    }
    sleep_then_exit();
  }
  if ((mode == "trap" || mode == "ignore-term" || mode == "pid") && argc >= 3) {
    g_dir = argv[2];
    if (mode == "trap") {
      std::snprintf(g_term_path, sizeof g_term_path, "%s/term%s", g_dir.c_str(), g_rank.c_str());
      struct sigaction sa {};
      sa.sa_handler = on_term;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGTERM, &sa, nullptr);
      sigaction(SIGINT, &sa, nullptr);
      sigaction(SIGUSR2, &sa, nullptr);
      std::snprintf(g_usr1_path, sizeof g_usr1_path, "%s/usr1%s", g_dir.c_str(), g_rank.c_str());
      struct sigaction usr1 {};
      usr1.sa_handler = on_usr1;
      sigemptyset(&usr1.sa_mask);
      usr1.sa_flags = SA_RESTART;
      sigaction(SIGUSR1, &usr1, nullptr);
    } else if (mode == "ignore-term") {
      signal(SIGTERM, SIG_IGN);
    }
    if (mode == "pid") {
      write_file(g_dir + "/pid" + g_rank, std::to_string(getpid()));
    } else {
      write_file(g_dir + "/ready" + g_rank, "ready");
    }
    sleep_then_exit();
  }
  std::fprintf(stderr, "launcher_test_worker: bad mode or arguments\n");
  return 99;
}
