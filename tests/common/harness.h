// Test harness: ranks as threads or as forked processes, shared scratch
// memory for handing a port from one forked rank to the others, temp paths.
#pragma once

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tdist::testing {

// A unique path under /tmp (not created); removed by the caller.
inline std::string temp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  return "/tmp/tdist-test-" + stem + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

// Memory shared by a parent and its forked children (MAP_SHARED | MAP_ANONYMOUS).
template <typename T>
class Shared {
 public:
  Shared() {
    void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    ptr_ = new (p) T();
  }
  ~Shared() { munmap(ptr_, sizeof(T)); }
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;
  T* operator->() { return ptr_; }
  T& operator*() { return *ptr_; }

 private:
  T* ptr_;
};

// One forked rank publishes a port (from a port-0 bind), the others wait for it.
struct PortBoard {
  std::atomic<int> port{0};
  void publish(int p) { port.store(p); }
  int wait(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (port.load() == 0) {
      if (std::chrono::steady_clock::now() > end) throw std::runtime_error("no port published within timeout");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return port.load();
  }
};

struct ProcessResult {
  int rank = -1;
  int exit_code = -1;  // valid when !signaled
  int signal = 0;      // the signal that ended it, 0 if it exited
  bool timed_out = false;
  bool ok() const { return !signaled() && !timed_out && exit_code == 0; }
  bool signaled() const { return signal != 0; }
  std::string describe() const {
    if (timed_out) return "rank " + std::to_string(rank) + " did not finish in time (killed)";
    if (signal) return "rank " + std::to_string(rank) + " died of signal " + std::to_string(signal);
    return "rank " + std::to_string(rank) + " exited with " + std::to_string(exit_code);
  }
};

// Forks n children running fn(rank). A child that throws prints the error and
// exits 1; one that returns exits 0. Children still running after `timeout`
// are killed and reported as timed out. Call before the test starts threads.
inline std::vector<ProcessResult> run_in_processes(int n, const std::function<void(int)>& fn,
                                                   std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
  std::fflush(nullptr);
  std::vector<pid_t> pids(n, -1);
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        fn(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] exception: %s\n", r, e.what());
        code = 1;
      } catch (...) {
        std::fprintf(stderr, "[rank %d] unknown exception\n", r);
        code = 1;
      }
      std::fflush(nullptr);
      _exit(code);
    }
    pids[r] = pid;
  }
  std::vector<ProcessResult> results(n);
  auto end = std::chrono::steady_clock::now() + timeout;
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] < 0) continue;
      int status = 0;
      pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got == pids[r]) {
        results[r].rank = r;
        if (WIFEXITED(status)) results[r].exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) results[r].signal = WTERMSIG(status);
        pids[r] = -1;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > end) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] < 0) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        results[r].rank = r;
        results[r].timed_out = true;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return results;
}

// Fails with every rank's outcome unless all exited 0.
inline std::string describe_failures(const std::vector<ProcessResult>& results) {
  std::string out;
  for (const auto& r : results)
    if (!r.ok()) out += r.describe() + "; ";
  return out;
}

// Runs fn(rank) on n threads; rethrows the first failure with its rank.
inline void run_in_threads(int n, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  std::string failures;
  for (int r = 0; r < n; ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      failures += (failures.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " + e.what();
    } catch (...) {
      failures += (failures.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": unknown exception";
    }
  }
  if (!failures.empty()) throw std::runtime_error(failures);
}

}  // namespace tdist::testing
