// Forked processes: ranks killed with SIGKILL in the middle of a job; the
// survivors agree on who is gone (failed_ranks), shrink the default group
// (shrink_group) and go on with correct results. Over shared memory and over
// TCP alone (TDIST_SHM=0).
#include <csignal>
#include <thread>

#include "process_group/process_util.h"
#include "common/scoped_env.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

std::string list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

// Every rank contributes rank + 1 to each element; the sum of `ranks`' values.
float expected_sum(const std::vector<int>& ranks) {
  float s = 0;
  for (int r : ranks) s += static_cast<float>(r + 1);
  return s;
}

void check_all_equal(const std::vector<float>& v, float want, const std::string& what) {
  for (size_t i = 0; i < v.size(); ++i)
    require(v[i] == want, what + ": element " + std::to_string(i) + " is " + std::to_string(v[i]) + ", want " +
                              std::to_string(want));
}

// all_reduce of `count` floats holding `value`; returns the result.
std::vector<float> sum_of(float value, size_t count, const Group& group = nullptr) {
  std::vector<float> v(count, value);
  tdist::all_reduce(v, ReduceOp::SUM, group);
  return v;
}

// The mistakes shrink_group refuses before it touches the group.
void check_refusals(int me, int n) {
  auto refused = [](const std::function<void()>& call, const std::string& what) {
    try {
      call();
    } catch (const DistValueError&) {
      return;
    } catch (const DistError& e) {
      if (what == "self") return;
      require(false, what + ": not a DistValueError: " + e.what());
    }
    require(false, what + ": shrink_group accepted it");
  };
  refused([] { tdist::shrink_group({}); }, "empty list");
  refused([n] { tdist::shrink_group({n}); }, "out of range");
  refused([n] { tdist::shrink_group({n - 1, n - 1}); }, "duplicate");
  refused([] { tdist::shrink_group({1}, nullptr, 7); }, "flags");
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  refused([all] { tdist::shrink_group(all); }, "every rank");
  refused([me] { tdist::shrink_group({me}); }, "self");
}

struct Case {
  int n;
  std::vector<int> victims;
  bool shm;
};

void survive(const Case& c) {
  ScopedEnv shm("TDIST_SHM", c.shm ? "1" : "0");
  std::vector<int> survivors;
  for (int r = 0; r < c.n; ++r)
    if (std::find(c.victims.begin(), c.victims.end(), r) == c.victims.end()) survivors.push_back(r);
  Shared<PortBoard> board;
  auto results = run_in_processes(
      c.n,
      [&](int me) {
        init_process_world(*board, me, c.n, std::chrono::seconds(20));
        std::vector<int> everyone;
        for (int r = 0; r < c.n; ++r) everyone.push_back(r);
        check_all_equal(sum_of(me + 1.0f, 1000), expected_sum(everyone), "before the failure");
        require(tdist::failed_ranks().empty(), "a healthy group has failed ranks");
        check_refusals(me, c.n);
        tdist::barrier();  // nobody dies while another still checks the healthy group
        if (std::find(c.victims.begin(), c.victims.end(), me) != c.victims.end()) std::raise(SIGKILL);
        // The application's loop: on a failure, shrink without the ranks the
        // survivors agree are gone, and try again. A victim that was still
        // alive when the survivors decided (it had not reached its kill yet)
        // is left out of that answer, and of the next one: each answer holds
        // only victims, and after at most one shrink per victim all are out.
        std::vector<int> members = everyone;  // the current group's ranks, as launch ranks
        std::vector<int> excluded;
        for (size_t attempt = 0; attempt <= c.victims.size(); ++attempt) {
          try {
            sum_of(me + 1.0f, 1000);
            if (excluded.size() == c.victims.size()) break;
            require(false, "all_reduce passed with killed ranks [" + list(c.victims) + "] not all excluded");
          } catch (const DistError& e) {  // DistNetworkError over TCP, DistBackendError in shared memory
            std::fprintf(stderr, "[rank %d] got, as expected: %s\n", me, e.what());
          }
          const std::vector<int> dead = tdist::failed_ranks();
          require(!dead.empty(), "failed_ranks answered [] after a failure");
          std::vector<int> remaining;
          for (size_t r = 0; r < members.size(); ++r) {
            if (!std::binary_search(dead.begin(), dead.end(), static_cast<int>(r))) {
              remaining.push_back(members[r]);
              continue;
            }
            require(std::find(c.victims.begin(), c.victims.end(), members[r]) != c.victims.end(),
                    "failed_ranks named rank " + std::to_string(members[r]) + ", which lives");
            excluded.push_back(members[r]);
          }
          tdist::shrink_group(dead);
          members = remaining;
        }
        std::sort(excluded.begin(), excluded.end());
        require(excluded == c.victims, "excluded [" + list(excluded) + "], want [" + list(c.victims) + "]");
        const int new_rank = static_cast<int>(std::find(survivors.begin(), survivors.end(), me) - survivors.begin());
        require(tdist::group_world()->group_desc() == "default:shrunken", "the default group is not the shrunk one");
        require(tdist::get_world_size() == static_cast<int>(survivors.size()), "world size after the shrink");
        require(tdist::get_rank() == new_rank, "rank after the shrink: " + std::to_string(tdist::get_rank()));
        for (size_t count : {size_t(1), size_t(1000), size_t(300001)})
          check_all_equal(sum_of(me + 1.0f, count), expected_sum(survivors), "after the shrink");
        // Groups made after the shrink number ranks the new way.
        Group pair = tdist::new_group({0, 1});
        if (new_rank < 2) check_all_equal(sum_of(me + 1.0f, 7, pair),
                                          expected_sum({survivors[0], survivors[1]}), "new_group after the shrink");
        tdist::barrier();
        tdist::destroy_process_group();
      },
      std::chrono::seconds(120));
  for (const auto& r : results) {
    const bool victim = std::find(c.victims.begin(), c.victims.end(), r.rank) != c.victims.end();
    if (victim) EXPECT_EQ(r.signal, SIGKILL) << r.describe();
    else EXPECT_TRUE(r.ok()) << r.describe();
  }
}

TEST(Shrink, OneRankKilledSharedMemory) { survive({4, {2}, true}); }
TEST(Shrink, OneRankKilledTcp) { survive({4, {2}, false}); }
TEST(Shrink, TwoRanksKilledOfFive) { survive({5, {1, 3}, true}); }
TEST(Shrink, LastRankKilledOfThreeTcp) { survive({3, {2}, false}); }

// A second rank dies during the shrink (after it learned the answer, before
// it made its part): every survivor's shrink is abandoned, failed_ranks then
// answers both, and the second shrink goes on.
//
// No clock decides the outcome: the shrink is abandoned at the group's
// timeout (the new group waits that long for rank 1), and the second answer
// comes from proof (rank 1's process is gone from this host, which the old
// group's shared-memory segment shows), not from silence, which is set far
// beyond any skew between the survivors on a loaded machine.
// Rank 1 dies while the survivors of rank 3's death shrink: the attempt is
// abandoned on every survivor at once, because the old group proves rank 1
// dead (over shared memory its process is gone from the host; over TCP its
// listener refuses) — the group timeout is ten minutes, longer than the
// test may run, so only that proof ends it. failed_ranks then answers
// [1, 3] and the next shrink goes on.
void second_death_during_the_shrink(const char* shm) {
  ScopedEnv use_shm("TDIST_SHM", shm);
  const int n = 5;
  Shared<PortBoard> board;
  auto results = run_in_processes(
      n,
      [&](int me) {
        init_process_world(*board, me, n, std::chrono::seconds(600));
        sum_of(1.0f, 10);
        if (me == 3) std::raise(SIGKILL);
        try {
          sum_of(1.0f, 10);
        } catch (const DistError&) {
        }
        require(tdist::failed_ranks(nullptr, std::chrono::seconds(600)) == std::vector<int>{3},
                "the first answer is not [3]");
        if (me == 1) std::raise(SIGKILL);
        try {
          tdist::shrink_group({3});
          require(false, "the shrink passed without rank 1");
        } catch (const DistBackendError& e) {
          std::fprintf(stderr, "[rank %d] got, as expected: %s\n", me, e.what());
          require(contains(e.what(), "abandoned"), std::string("the error does not say abandoned: ") + e.what());
        }
        const std::vector<int> dead = tdist::failed_ranks(nullptr, std::chrono::seconds(600));
        require(dead == std::vector<int>({1, 3}), "the second answer is [" + list(dead) + "], want [1, 3]");
        tdist::shrink_group(dead);
        require(tdist::get_world_size() == 3, "world size after the second shrink");
        check_all_equal(sum_of(me + 1.0f, 1000), expected_sum({0, 2, 4}), "after the second shrink");
        tdist::destroy_process_group();
      },
      std::chrono::seconds(120));
  for (const auto& r : results) {
    if (r.rank == 1 || r.rank == 3) EXPECT_EQ(r.signal, SIGKILL) << r.describe();
    else EXPECT_TRUE(r.ok()) << r.describe();
  }
}

TEST(Shrink, SecondDeathDuringTheShrinkOverSharedMemory) { second_death_during_the_shrink("1"); }
TEST(Shrink, SecondDeathDuringTheShrinkOverTcp) { second_death_during_the_shrink("0"); }

}  // namespace
}  // namespace tdist::testing

namespace tdist::testing {
namespace {

// Regrow: after rank 3 died and the survivors shrank, a new process joins the
// running job (join_running_job) in its place; the survivors admit it
// between two steps, send it their state, and the four go on.
TEST(Regrow, ANewProcessJoinsTheSurvivors) {
  ScopedEnv shm("TDIST_SHM", "1");
  Shared<PortBoard> board;
  Shared<std::atomic<int>> shrunk;
  auto results = run_in_processes(
      5,
      [&](int me) {
        if (me == 4) {  // the replacement, started once the survivors have shrunk
          auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
          while (shrunk->load() == 0 && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(milliseconds(10));
          InitOptions o;
          o.store = process_world_store(*board, 4, 4, std::chrono::seconds(20));
          o.rank = 3;  // the launch rank it replaces
          o.world_size = 4;
          o.timeout = std::chrono::seconds(20);
          o.join_running_job = true;
          init_process_group(o);
          require(tdist::joined_running_job(), "joined_running_job is false on the newcomer");
        } else {
          init_process_world(*board, me, 4, std::chrono::seconds(20));
          sum_of(1.0f, 10);
          if (me == 3) std::raise(SIGKILL);
          try {
            sum_of(1.0f, 10);
          } catch (const DistError&) {
          }
          tdist::shrink_group(tdist::failed_ranks());
          if (me == 0) shrunk->store(1);
          require(!tdist::joined_running_job(), "joined_running_job is true on a member");
          int joined = 0;
          for (int tries = 0; tries < 3000 && joined == 0; ++tries) {
            joined = tdist::admit_new_ranks();
            if (joined == 0) std::this_thread::sleep_for(milliseconds(20));
          }
          require(joined == 1, "admit_new_ranks admitted " + std::to_string(joined));
        }
        require(tdist::get_world_size() == 4, "world size after the regrow");
        const int want_rank = me == 4 ? 3 : me;
        require(tdist::get_rank() == want_rank, "rank after the regrow: " + std::to_string(tdist::get_rank()));
        // The members' state reaches the newcomer.
        std::vector<float> state(1001, me == 0 ? 42.0f : 0.0f);
        tdist::broadcast(state, 0);
        check_all_equal(state, 42.0f, "state from rank 0");
        const int launch_rank = me == 4 ? 3 : me;
        check_all_equal(sum_of(launch_rank + 1.0f, 300001), expected_sum({0, 1, 2, 3}), "after the regrow");
        tdist::destroy_process_group();
      },
      std::chrono::seconds(120));
  for (const auto& r : results) {
    if (r.rank == 3) EXPECT_EQ(r.signal, SIGKILL) << r.describe();
    else EXPECT_TRUE(r.ok()) << r.describe();
  }
}

}  // namespace
}  // namespace tdist::testing
