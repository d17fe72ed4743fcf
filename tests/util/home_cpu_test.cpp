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
#include "common/scoped_env.h"
#include "util/host_id.h"
#include "util/local_placement.h"

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
    for (const char* mpi : {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALRANKID",
                            "MPI_LOCALNRANKS"})
      unsetenv(mpi);  // unless a case sets them in fn's stead (in_fresh_process_under_mpi)
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
      const int said = return_home();
      expect(sched_getcpu() == cpus.back(), "return_home() moved the thread home");
      expect(said == cpus.back(), "return_home() says the CPU it left the thread on");
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

// Under mpirun with env:// (LOCAL_RANK unset) the MPI launcher's local rank
// picks the core: Open MPI's, else MPICH's; a pair torchrun's variables half
// set is not completed from them.
TEST(HomeCpu, UnderAnMpiLauncherItsLocalRankPicksTheCore) {
  const auto cpus = allowed_cpus();
  if (static_cast<long>(cpus.size()) < sysconf(_SC_NPROCESSORS_ONLN)) GTEST_SKIP() << "this process is restricted to some CPUs";
  const std::string last = std::to_string(cpus.size() - 1), size = std::to_string(cpus.size());
  in_fresh_process(nullptr, nullptr, [&] {
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", last.c_str(), 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", size.c_str(), 1);
    expect(home_cpu() == cpus.back(), "Open MPI's local rank n-1 of n is at home on the last allowed CPU");
  });
  in_fresh_process(nullptr, nullptr, [&] {
    setenv("MPI_LOCALRANKID", "0", 1);
    setenv("MPI_LOCALNRANKS", size.c_str(), 1);
    expect(home_cpu() == cpus.front(), "MPICH's local rank 0 is at home on the first allowed CPU");
  });
  in_fresh_process("0", nullptr, [&] {
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", size.c_str(), 1);
    expect(home_cpu() == -1, "LOCAL_RANK without LOCAL_WORLD_SIZE: no home, whatever mpirun says");
  });
}

TEST(LocalPlacement, TheFirstLauncherThatSaidDecides) {
  ScopedEnv rank("LOCAL_RANK", nullptr), size("LOCAL_WORLD_SIZE", nullptr);
  ScopedEnv ompi_rank("OMPI_COMM_WORLD_LOCAL_RANK", "1"), ompi_size("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
  ScopedEnv mpich_rank("MPI_LOCALRANKID", "2"), mpich_size("MPI_LOCALNRANKS", "3");
  auto placed = local_placement();
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->rank, 1);  // Open MPI's before MPICH's
  EXPECT_EQ(placed->size, 4);
  {
    ScopedEnv torch_rank("LOCAL_RANK", "0"), torch_size("LOCAL_WORLD_SIZE", "2");
    placed = local_placement();
    ASSERT_TRUE(placed.has_value());
    EXPECT_EQ(placed->rank, 0);  // torchrun's and tdistrun's first
    EXPECT_EQ(placed->size, 2);
  }
  {
    ScopedEnv beyond("OMPI_COMM_WORLD_LOCAL_RANK", "4");  // rank 4 of 4: Open MPI said garbage
    EXPECT_FALSE(local_placement().has_value());
  }
  ScopedEnv no_ompi_rank("OMPI_COMM_WORLD_LOCAL_RANK", nullptr), no_ompi_size("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr);
  placed = local_placement();
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->rank, 2);  // MPICH's where nobody else said
  ScopedEnv no_mpich("MPI_LOCALRANKID", nullptr);
  EXPECT_FALSE(local_placement().has_value());
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

TEST(HomeCpu, PickHomeGivesEachRankItsOwnAllowedCpu) {
  const std::vector<int> four = {0, 1, 2, 3}, odd = {1, 3, 5, 7};
  EXPECT_EQ(pick_home(0, 4, four, 4), 0);
  EXPECT_EQ(pick_home(3, 4, four, 4), 3);
  EXPECT_EQ(pick_home(2, 4, odd, 4), 5);   // counted among the allowed CPUs
  EXPECT_EQ(pick_home(0, 5, four, 4), -1);  // more ranks than CPUs
  EXPECT_EQ(pick_home(4, 4, four, 4), -1);  // index past the count
  EXPECT_EQ(pick_home(-1, 4, four, 4), -1);
  EXPECT_EQ(pick_home(0, 0, four, 4), -1);
  EXPECT_EQ(pick_home(0, 2, four, 8), -1);  // given 4 of 8 CPUs: someone placed the process
  EXPECT_EQ(pick_home(0, 1, {}, 1), -1);
}

TEST(HomeCpu, HostsInNamespacesOfOneMachineShareItsBootId) {
  EXPECT_EQ(machine_of("node-h0/2b1f-77/net:[4026532]"), "2b1f-77");
  EXPECT_EQ(machine_of("node-h1/2b1f-77/net:[4026599]"), machine_of("node-h0/2b1f-77/net:[4026532]"));
  EXPECT_NE(machine_of("node-h1/9c00-01/net:[4026599]"), machine_of("node-h0/2b1f-77/net:[4026532]"));
  EXPECT_EQ(machine_of("id:host0"), "id:host0");  // TDIST_HOST_ID: a machine of its own
  EXPECT_EQ(machine_of("id:a/b/c"), "id:a/b/c");
  EXPECT_EQ(machine_of("plain"), "plain");
  EXPECT_EQ(machine_of(host_id()), machine_of(host_id()));
}

// The machine's placement replaces the launcher's local rank, once; not where
// the process may have no home at all.
TEST(HomeCpu, PlacementOnTheMachineWinsOnce) {
  const auto cpus = allowed_cpus();
  if (cpus.size() < 2 || static_cast<long>(cpus.size()) < sysconf(_SC_NPROCESSORS_ONLN))
    GTEST_SKIP() << "needs 2 CPUs and an unrestricted process";
  in_fresh_process("0", "1", [&] {
    expect(home_cpu() == cpus[0], "local rank 0 of 1 starts on the first CPU");
    place_on_machine(1, 2);
    expect(home_cpu() == cpus[1], "second of 2 ranks on the machine: the second CPU");
    place_on_machine(0, 2);
    expect(home_cpu() == cpus[1], "a later placement changes nothing");
    return_home();  // moving there is the first case's; here: the mask is left as it was
    expect(allowed_cpus() == cpus, "the affinity mask is the one the process had");
  });
  in_fresh_process("0", "1", [&] {
    place_on_machine(0, static_cast<int>(cpus.size()) + 1);
    expect(home_cpu() == -1, "more ranks on the machine than CPUs: no home");
  });
  in_fresh_process(nullptr, nullptr, [&] {
    place_on_machine(1, 2);
    expect(home_cpu() == -1, "no launcher variables: no home, placed or not");
  });
  in_fresh_process("0", "1", [&] {
    place_on_machine(1, 2);
    expect(home_cpu() == cpus[1], "placed before anyone asked");
  }, "1");
}

}  // namespace
}  // namespace tdist::testing
