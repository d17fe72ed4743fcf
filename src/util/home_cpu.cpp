#include "util/home_cpu.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "util/settings.h"

namespace tdist {

namespace {

constexpr std::chrono::milliseconds kRetryAfter{10};

int decide_home() {
  if (!settings::get<"TDIST_HOME_CPU">()) return -1;
  std::optional<long long> local_rank, local_size;
  try {
    local_rank = settings::get<"LOCAL_RANK">();
    local_size = settings::get<"LOCAL_WORLD_SIZE">();
  } catch (...) {
    return -1;  // garbage in these variables is the launcher's business, not a reason to fail here
  }
  if (!local_rank || !local_size || *local_rank < 0 || *local_size < 1 || *local_rank >= *local_size) return -1;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return -1;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus.empty() || static_cast<long>(cpus.size()) < online) return -1;  // placed by someone: leave it
  if (*local_size > static_cast<long long>(cpus.size())) return -1;        // no core per rank
  return cpus[static_cast<size_t>(*local_rank)];
}

}  // namespace

int home_cpu() {
  static const int home = decide_home();
  return home;
}

void return_home() {
  const int home = home_cpu();
  if (home < 0 || sched_getcpu() == home) return;
  thread_local auto last_try = std::chrono::steady_clock::time_point{};
  const auto now = std::chrono::steady_clock::now();
  if (now - last_try < kRetryAfter) return;
  last_try = now;
  cpu_set_t old, one;
  if (sched_getaffinity(0, sizeof(old), &old) != 0 || !CPU_ISSET(home, &old)) return;
  CPU_ZERO(&one);
  CPU_SET(home, &one);
  // Setting the one-core mask moves the thread now; restoring the old mask
  // leaves it there but free to go anywhere later.
  if (sched_setaffinity(0, sizeof(one), &one) == 0) sched_setaffinity(0, sizeof(old), &old);
}

}  // namespace tdist
