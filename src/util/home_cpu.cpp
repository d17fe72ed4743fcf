#include "util/home_cpu.h"

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include "util/local_placement.h"
#include "util/settings.h"

namespace tdist {

namespace {

constexpr std::chrono::milliseconds kRetryAfter{10};

constexpr int kUndecided = -2;
std::atomic<int> g_home{kUndecided};
std::once_flag g_decided;
std::atomic<bool> g_placed{false};
std::atomic<int> g_machine_ranks{0};

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  return cpus;
}

// Whether this process may have a home at all, and as which local rank.
bool launcher_placed(long long& local_rank, long long& local_size) {
  if (!settings::get<"TDIST_HOME_CPU">()) return false;
  const std::optional<LocalPlacement> placed = local_placement();
  if (!placed) return false;
  local_rank = placed->rank;
  local_size = placed->size;
  return true;
}

void decide_once() {
  std::call_once(g_decided, [] {
    long long rank = 0, size = 0;
    const int home = launcher_placed(rank, size)
                         ? pick_home(rank, size, allowed_cpus(), sysconf(_SC_NPROCESSORS_ONLN))
                         : -1;
    int undecided = kUndecided;
    g_home.compare_exchange_strong(undecided, home);  // place_on_machine may have come first
  });
}

}  // namespace

int pick_home(long long index, long long count, const std::vector<int>& allowed, long online) {
  if (allowed.empty() || static_cast<long>(allowed.size()) < online) return -1;  // placed by someone: leave it
  if (index < 0 || count < 1 || index >= count) return -1;
  if (count > static_cast<long long>(allowed.size())) return -1;  // no core per rank
  return allowed[static_cast<size_t>(index)];
}

int home_cpu() {
  int home = g_home.load(std::memory_order_relaxed);
  if (home != kUndecided) return home;
  decide_once();
  return g_home.load(std::memory_order_relaxed);
}

int ranks_on_machine() { return g_machine_ranks.load(std::memory_order_relaxed); }

void place_on_machine(int index, int count) {
  if (g_placed.exchange(true)) return;
  g_machine_ranks.store(count, std::memory_order_relaxed);
  long long rank = 0, size = 0;
  if (!launcher_placed(rank, size)) return;
  g_home.store(pick_home(index, count, allowed_cpus(), sysconf(_SC_NPROCESSORS_ONLN)), std::memory_order_relaxed);
}

int return_home() {
  const int home = home_cpu();
  const int cpu = sched_getcpu();
  if (home < 0 || cpu == home) return cpu;
  thread_local auto last_try = std::chrono::steady_clock::time_point{};
  const auto now = std::chrono::steady_clock::now();
  if (now - last_try < kRetryAfter) return cpu;
  last_try = now;
  cpu_set_t old, one;
  if (sched_getaffinity(0, sizeof(old), &old) != 0 || !CPU_ISSET(home, &old)) return cpu;
  CPU_ZERO(&one);
  CPU_SET(home, &one);
  // Setting the one-core mask moves the thread now; restoring the old mask
  // leaves it there but free to go anywhere later.
  if (sched_setaffinity(0, sizeof(one), &one) != 0) return cpu;
  sched_setaffinity(0, sizeof(old), &old);
  return sched_getcpu();
}

}  // namespace tdist
