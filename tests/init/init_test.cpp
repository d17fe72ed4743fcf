// init_process_group with every init method across real processes, and its
// failure cases: missing variables, missing ranks, bad arguments.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "backends/process_world.h"
#include "common/scoped_env.h"
#include "init/slurm.h"
#include "util/socket.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

// A port that was free a moment ago (bind to port 0, then release it).
int free_port() {
  Fd fd = listen_tcp("127.0.0.1", 0);
  return local_port(fd.get());
}

// After init: ranks, world size and one all_reduce must agree.
// `backend`: the name init was given, which get_backend() answers (as torch's).
void check_world(int rank, int n, const std::string& backend = "tdist") {
  require(is_initialized(), "not initialized");
  require(get_rank() == rank, "get_rank() = " + std::to_string(get_rank()));
  require(get_world_size() == n, "get_world_size() = " + std::to_string(get_world_size()));
  require(get_backend() == backend, "get_backend() = " + get_backend() + ", expected " + backend);
  std::vector<int> v(5, rank + 1);
  all_reduce(v);
  require(v[4] == n * (n + 1) / 2, "all_reduce gave " + std::to_string(v[4]));
  destroy_process_group();
  require(!is_initialized(), "still initialized after destroy");
}

void clear_rank_env() {
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                        "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_ID"})
    unsetenv(v);
}

TEST(Init, EnvMethodReadsTheTorchrunVariables) {
  for (int n : {1, 2, 4}) {
    int port = free_port();
    auto results = run_in_processes(n, [&](int rank) {
      clear_rank_env();
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      init_process_group();  // env:// is the default
      check_world(rank, n);
    });
    EXPECT_EQ(describe_failures(results), "") << "world " << n;
  }
}

TEST(Environment, NodeLocalRankAndDebugLevelAsTorch) {
  {
    ScopedEnv local("LOCAL_RANK", nullptr);
    EXPECT_EQ(get_node_local_rank(3), 3);
    EXPECT_THROW(get_node_local_rank(), DistValueError);
  }
  {
    ScopedEnv local("LOCAL_RANK", "2");
    EXPECT_EQ(get_node_local_rank(), 2);
    EXPECT_EQ(get_node_local_rank(5), 2);
  }
  ScopedEnv ours("TDIST_DEBUG", nullptr), torchs("TORCH_DISTRIBUTED_DEBUG", "INFO");
  EXPECT_EQ(get_debug_level(), DebugLevel::INFO);  // torch's name where ours is unset
  set_debug_level(DebugLevel::DETAIL);
  EXPECT_EQ(get_debug_level(), DebugLevel::DETAIL);
  setenv("TDIST_DEBUG", "LOUD", 1);
  EXPECT_THROW(get_debug_level(), DistValueError);
  EXPECT_THROW(set_debug_level_from_env(), DistValueError);
  set_debug_level(DebugLevel::OFF);
  EXPECT_EQ(get_debug_level(), DebugLevel::OFF);
}

TEST(Slurm, HostListsExpandAsSlurmWritesThem) {
  using V = std::vector<std::string>;
  EXPECT_EQ(slurm::expand_nodelist("node7"), V{"node7"});
  EXPECT_EQ(slurm::expand_nodelist("node[01-03,07],gpu5"), (V{"node01", "node02", "node03", "node07", "gpu5"}));
  EXPECT_EQ(slurm::expand_nodelist("n[8-10]"), (V{"n8", "n9", "n10"}));
  EXPECT_EQ(slurm::expand_nodelist("n[08-10]"), (V{"n08", "n09", "n10"}));
  EXPECT_EQ(slurm::expand_nodelist("r[1-2]n[3,5]-ib"), (V{"r1n3-ib", "r1n5-ib", "r2n3-ib", "r2n5-ib"}));
  {
    ScopedEnv list("SLURM_JOB_NODELIST", "gpu[07-08]"), old_list("SLURM_NODELIST", nullptr);
    ScopedEnv job("SLURM_JOB_ID", "1234567");
    EXPECT_EQ(slurm::master_host(), std::optional<std::string>("gpu07"));
    EXPECT_EQ(slurm::master_port(), std::optional<int>(20000 + 1234567 % 20000));
  }
  for (const char* bad : {"", "a,,b", "n[1-", "n]1[", "n[3-1]", "n[x]", "n[1-200000]", "r[1-1000]n[1-1000]"}) {
    try {
      slurm::expand_nodelist(bad);
      ADD_FAILURE() << "'" << bad << "' was taken";
    } catch (const DistValueError& e) {
      EXPECT_NE(std::string(e.what()).find("Slurm host list"), std::string::npos) << e.what();
    }
  }
}

// A job step as srun starts it: rank, size and rank 0's host from Slurm's
// variables, the port from the job id (where the free port fits that rule).
TEST(Init, EnvMethodReadsSlurmVariables) {
  const int port = free_port();
  const bool port_from_job = port >= 20000 && port < 40000;
  auto results = run_in_processes(3, [&](int rank) {
    clear_rank_env();
    setenv("SLURM_PROCID", std::to_string(rank).c_str(), 1);
    setenv("SLURM_NTASKS", "3", 1);
    setenv("SLURM_JOB_NODELIST", "localhost,node[02-03]", 1);
    if (port_from_job)
      setenv("SLURM_JOB_ID", std::to_string(port - 20000 + 40000).c_str(), 1);
    else
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    init_process_group();
    check_world(rank, 3);
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(Init, EnvMethodFallsBackToOpenMpiAndPmiVariables) {
  for (const char* flavour : {"OMPI", "PMI"}) {
    int port = free_port();
    auto results = run_in_processes(3, [&](int rank) {
      clear_rank_env();
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      bool ompi = std::string(flavour) == "OMPI";
      setenv(ompi ? "OMPI_COMM_WORLD_RANK" : "PMI_RANK", std::to_string(rank).c_str(), 1);
      setenv(ompi ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE", "3", 1);
      init_process_group({.backend = "gloo", .init_method = "env://"});  // gloo is an alias, reported as given
      check_world(rank, 3, "gloo");
    });
    EXPECT_EQ(describe_failures(results), "") << flavour;
  }
}

TEST(Init, TcpMethod) {
  int port = free_port();
  auto results = run_in_processes(3, [&](int rank) {
    clear_rank_env();
    init_process_group("tdist", "tcp://127.0.0.1:" + std::to_string(port), 3, rank);
    check_world(rank, 3);
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(Init, TcpMethodWithRankAndSizeInTheUrl) {
  int port = free_port();
  auto results = run_in_processes(2, [&](int rank) {
    clear_rank_env();
    init_process_group("tdist", "tcp://localhost:" + std::to_string(port) + "?rank=" + std::to_string(rank) +
                                    "&world_size=2");
    check_world(rank, 2);
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(Init, FileMethodAndTheFileIsRemovedAtTheEnd) {
  std::string path = temp_path("init-file");
  auto results = run_in_processes(4, [&](int rank) {
    clear_rank_env();
    init_process_group("tdist", "file://" + path, 4, rank);
    check_world(rank, 4);
  });
  EXPECT_EQ(describe_failures(results), "");
  EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " was left behind";
  std::remove(path.c_str());
}

TEST(Init, ExplicitStoreAndInitDestroyCycles) {
  Shared<PortBoard> board;
  auto results = run_in_processes(3, [&](int rank) {
    auto store = process_world_store(*board, rank, 3, milliseconds(30000));
    for (int cycle = 0; cycle < 3; ++cycle) {
      InitOptions o;
      o.store = store;
      o.rank = rank;
      o.world_size = 3;
      init_process_group(o);
      // Held past destroy: the destroyed group stays alive, and calls on the
      // default group must still see that there is none (not use this one).
      Group old = group_world();
      check_world(rank, 3);
      std::vector<int> v(2, 1);
      try {
        all_reduce(v);
        require(false, "all_reduce after destroy_process_group succeeded");
      } catch (const DistError& e) {
        require(contains(e.what(), "not initialized"), std::string("after destroy: ") + e.what());
      }
    }
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(Init, MissingEnvironmentVariableIsNamed) {
  auto results = run_in_processes(1, [&](int) {
    clear_rank_env();
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("MASTER_PORT", "1234", 1);
    try {
      init_process_group();
      require(false, "init without MASTER_ADDR succeeded");
    } catch (const DistValueError& e) {
      require(contains(e.what(), "MASTER_ADDR"), std::string("variable not named: ") + e.what());
    }
    unsetenv("RANK");
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    try {
      init_process_group();
      require(false, "init without RANK succeeded");
    } catch (const DistValueError& e) {
      require(contains(e.what(), "RANK"), std::string("variable not named: ") + e.what());
    }
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(Init, RanksThatDoNotArriveAreListed) {
  int port = free_port();
  // World of 4, but ranks 2 and 3 never start.
  auto results = run_in_processes(2, [&](int rank) {
    clear_rank_env();
    try {
      init_process_group("tdist", "tcp://127.0.0.1:" + std::to_string(port), 4, rank, milliseconds(3000));
      require(false, "init succeeded with ranks missing");
    } catch (const DistError& e) {
      require(contains(e.what(), "[2, 3]"), std::string("missing ranks not listed: ") + e.what());
    }
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(Init, BadArgumentsAreValueErrors) {
  EXPECT_THROW(init_process_group("tdist", "tcp://127.0.0.1:1", 2, 5), DistValueError);
  EXPECT_THROW(init_process_group("tdist", "bogus://x", 1, 0), DistValueError);
  EXPECT_THROW(init_process_group("tdist", "tcp://127.0.0.1", 1, 0), DistValueError);
  EXPECT_THROW(init_process_group("nosuchbackend", "file:///tmp/tdist-never-created", 1, 0), DistValueError);
  EXPECT_FALSE(is_initialized());
  EXPECT_THROW(get_rank(), DistError);
  EXPECT_TRUE(is_available());
}

TEST(Spawn, RunsEveryRankAndReportsTheFirstFailure) {
  // Success: each rank initializes through the environment spawn sets.
  spawn([](int rank, int n) {
    init_process_group();
    check_world(rank, n);
  }, 3);
  try {
    spawn([](int rank, int) {
      if (rank == 1) throw std::runtime_error("boom");
    }, 3);
    FAIL() << "spawn did not report a failing rank";
  } catch (const DistError& e) {
    EXPECT_TRUE(contains(e.what(), "rank 1")) << e.what();
    EXPECT_TRUE(contains(e.what(), "exit code 1")) << e.what();
  }
}

// Spawned from a worker of tdistrun, the children must meet among themselves:
// the launcher's variables would send rank 0 to the launcher's store (here a
// port nobody serves) instead of serving its own, and every child would wait.
TEST(Spawn, InsideALaunchedWorkerTheChildrenMeetAmongThemselves) {
  ScopedEnv agent("TORCHELASTIC_USE_AGENT_STORE", "True");
  ScopedEnv prefix("TDIST_AGENT_STORE_PREFIX", "/tdist/run0/");
  ScopedEnv run_id("TORCHELASTIC_RUN_ID", "launched");
  ScopedEnv launched("TDIST_LAUNCHED", "1");
  ScopedEnv port("MASTER_PORT", std::to_string(free_port()));
  spawn([](int rank, int n) {
    if (is_torchelastic_launched()) throw std::runtime_error("the launcher's TORCHELASTIC_RUN_ID reached a child");
    init_process_group("tdist", "", -1, -1, milliseconds(20000));
    check_world(rank, n);
  }, 2);
}

}  // namespace
}  // namespace tdist::testing

namespace tdist::testing {
namespace {

// Each cycle's rank 0 starts a new store on the same port while the others
// may still be leaving the previous one: every cycle must work.
TEST(Init, TwentyInitDestroyCyclesOnOnePort) {
  const int port = free_port();
  auto results = run_in_processes(
      3,
      [&](int rank) {
        for (int cycle = 0; cycle < 20; ++cycle) {
          clear_rank_env();
          init_process_group("tdist", "tcp://127.0.0.1:" + std::to_string(port), 3, rank, milliseconds(20000));
          std::vector<int> v(3, rank + cycle);
          all_reduce(v);
          require(v[0] == 3 + 3 * cycle, "cycle " + std::to_string(cycle) + ": all_reduce gave " + std::to_string(v[0]));
          destroy_process_group();
        }
      },
      std::chrono::seconds(120));
  EXPECT_EQ(describe_failures(results), "");
}

TEST(Init, AGroupHandleKeptAfterDestroyDoesNotKeepTheStorePort) {
  const int port = free_port();
  auto results = run_in_processes(2, [&](int rank) {
    clear_rank_env();
    init_process_group("tdist", "tcp://127.0.0.1:" + std::to_string(port), 2, rank, milliseconds(20000));
    Group kept = new_group({0, 1});
    destroy_process_group();
    if (rank == 0) Fd again = listen_tcp("127.0.0.1", static_cast<uint16_t>(port));  // throws if still bound
    std::vector<int> v(2, 1);
    try {
      all_reduce(v, ReduceOp::SUM, kept);
      require(false, "a collective on a destroyed group succeeded");
    } catch (const DistError& e) {
      require(std::string(e.what()).find("destroyed") != std::string::npos,
              std::string("the error does not say the group was destroyed: ") + e.what());
    }
  });
  EXPECT_EQ(describe_failures(results), "");
}

// env:// on one port, init/destroy cycles while user code keeps a subgroup
// handle of every cycle: each cycle gets a new store on the same port.
TEST(Init, EnvCyclesOnOnePortKeepingSubgroupHandles) {
  const int port = free_port();
  auto results = run_in_processes(
      3,
      [&](int rank) {
        clear_rank_env();
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
        setenv("RANK", std::to_string(rank).c_str(), 1);
        setenv("WORLD_SIZE", "3", 1);
        std::vector<Group> kept;
        for (int cycle = 0; cycle < 8; ++cycle) {
          init_process_group({.backend = "gloo", .timeout = milliseconds(20000)});
          kept.push_back(new_group({0, 2}));
          std::vector<int> v(3, rank + cycle);
          all_reduce(v);
          require(v[0] == 3 + 3 * cycle, "cycle " + std::to_string(cycle) + ": all_reduce gave " + std::to_string(v[0]));
          destroy_process_group();
        }
      },
      std::chrono::seconds(120));
  EXPECT_EQ(describe_failures(results), "");
}

// Rank 0 (whose process serves the store) comes to destroy_process_group
// long after the others, who stop waiting for it (destroy waits at most the
// group's timeout, 10 s at most) and init again at once on the same port:
// they must not join the old store that rank 0 is about to close (which
// failed as "0 of 2 ranks did not arrive: []"). With a subgroup handle kept.
TEST(Init, ReinitOnOnePortAfterRank0DestroysLate) {
  const int port = free_port();
  constexpr milliseconds kTimeout{8000};
  auto results = run_in_processes(
      2,
      [&](int rank) {
        clear_rank_env();
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
        setenv("RANK", std::to_string(rank).c_str(), 1);
        setenv("WORLD_SIZE", "2", 1);
        std::vector<Group> kept;
        for (int cycle = 0; cycle < 3; ++cycle) {
          init_process_group({.backend = "gloo", .timeout = kTimeout});
          kept.push_back(new_group({0, 1}));
          std::vector<int> v(2, 1 + cycle);
          all_reduce(v);
          require(v[0] == 2 + 2 * cycle, "cycle " + std::to_string(cycle) + ": all_reduce gave " + std::to_string(v[0]));
          // Rank 0 saves a checkpoint: past rank 1's wait in destroy, well within its next init's timeout.
          if (rank == 0 && cycle == 0) std::this_thread::sleep_for(kTimeout + milliseconds(1500));
          destroy_process_group();
        }
      },
      std::chrono::seconds(120));
  EXPECT_EQ(describe_failures(results), "");
}

}  // namespace
}  // namespace tdist::testing
