// The home core of a rank: when there is one, and that moving there leaves
// the thread's affinity as it was. Each case runs in a fresh process, since
// the home is decided once per process from its environment.
#include "util/home_cpu.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "common/harness.h"

namespace tdist::testing {
namespace {

std::vector<int> allowed_cpus() {
  cpu_set_t mask;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  return cpus;
}

// Runs fn in a forked process with the given LOCAL_* variables; fails the test if fn throws.
void in_fresh_process(const char* local_rank, const char* local_size, const std::function<void()>& fn,
                      const char* switch_value = nullptr) {
  auto results = run_in_processes(1, [&](int) {
    if (local_rank) setenv("LOCAL_RANK", local_rank, 1); else unsetenv("LOCAL_RANK");
    if (local_size) setenv("LOCAL_WORLD_SIZE", local_size, 1); else unsetenv("LOCAL_WORLD_SIZE");
    if (switch_value) setenv("TDIST_HOME_CPU", switch_value, 1); else unsetenv("TDIST_HOME_CPU");
    fn();
  });
  ASSERT_TRUE(results[0].ok()) << results[0].describe();
}

void expect(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}

TEST(HomeCpu, LocalRankPicksItsCoreAndReturningHomeKeepsTheAffinity) {
  const auto cpus = allowed_cpus();
  if (static_cast<long>(cpus.size()) < sysconf(_SC_NPROCESSORS_ONLN)) GTEST_SKIP() << "this process is restricted to some CPUs";
  const std::string last = std::to_string(cpus.size() - 1), size = std::to_string(cpus.size());
  in_fresh_process(last.c_str(), size.c_str(), [&] {
    expect(home_cpu() == cpus.back(), "local rank n-1 of n is at home on the last allowed CPU");
    for (int i = 0; i < 3; ++i) {
      return_home();
      expect(sched_getcpu() == cpus.back(), "return_home() moved the thread home");
    }
    expect(allowed_cpus() == cpus, "the affinity mask is the one the process had");
  });
}

TEST(HomeCpu, NoHomeWithoutTheLauncherVariables) {
  in_fresh_process(nullptr, "2", [] { expect(home_cpu() == -1, "no LOCAL_RANK: no home"); });
  in_fresh_process("0", nullptr, [] { expect(home_cpu() == -1, "no LOCAL_WORLD_SIZE: no home"); });
  in_fresh_process("x", "2", [] { expect(home_cpu() == -1, "garbage: no home"); });
  in_fresh_process("3", "2", [] { expect(home_cpu() == -1, "rank beyond the size: no home"); });
}

TEST(HomeCpu, NoHomeWhenRanksOutnumberTheCpusOrWhenSwitchedOff) {
  const std::string too_many = std::to_string(allowed_cpus().size() + 1);
  in_fresh_process("0", too_many.c_str(), [] {
    expect(home_cpu() == -1, "more local ranks than CPUs: no home");
    const auto before = allowed_cpus();
    return_home();  // does nothing
    expect(allowed_cpus() == before, "the affinity is untouched");
  });
  in_fresh_process("0", "1", [] { expect(home_cpu() == -1, "TDIST_HOME_CPU=0: no home"); }, "0");
}

TEST(HomeCpu, NoHomeWhenSomeoneRestrictedTheProcess) {
  const auto cpus = allowed_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs to restrict the process to one";
  in_fresh_process("0", "1", [&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[1], &one);
    expect(sched_setaffinity(0, sizeof(one), &one) == 0, "restricting the test process");
    expect(home_cpu() == -1, "a process placed on fewer CPUs than the machine has gets no home");
  });
}

}  // namespace
}  // namespace tdist::testing
