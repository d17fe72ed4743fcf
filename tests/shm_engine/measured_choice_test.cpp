// MeasuredChoice: which way runs, fed made-up times (no clock is read here).
#include "shm_engine/measured_choice.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace tdist::shm_engine {
namespace {

using std::chrono::nanoseconds;
constexpr size_t kBytes = 1 << 20;

nanoseconds per_byte(double ns, size_t bytes = kBytes) {
  return nanoseconds(static_cast<int64_t>(ns * static_cast<double>(bytes)));
}

// Runs `calls` calls of `bytes` whose way w takes ns_per_byte(w) per byte;
// returns how many ran way 1.
int run(MeasuredChoice& c, int calls, const std::function<double(int)>& ns_per_byte, size_t bytes = kBytes) {
  int ones = 0;
  for (int i = 0; i < calls; ++i) {
    const MeasuredChoice::Pick p = c.pick(bytes);
    ones += p.way;
    if (p.counts) c.record(bytes, p.way, per_byte(ns_per_byte(p.way), bytes));
  }
  return ones;
}

// The calls one retry cycle takes in the steady state: the faster way's, one
// of which picks the slower way, the slower's second (timed) call, and the
// faster's second after switching back.
int cycle(double ratio) { return static_cast<int>(MeasuredChoice::retry_every(ratio)) + 2; }

// The calls before the times decide: the warm-up's, then each way in turn.
constexpr int kFirstCalls = static_cast<int>(MeasuredChoice::kWarmUpCalls) + 3;

TEST(MeasuredChoice, AfterTheWarmUpEachWayIsTimedInTurnAfterACallThatDoesNotCount) {
  MeasuredChoice c;
  std::vector<int> ways;
  std::vector<bool> counts;
  for (int i = 0; i < kFirstCalls; ++i) {
    const MeasuredChoice::Pick p = c.pick(kBytes);
    ways.push_back(p.way);
    counts.push_back(p.counts);
    if (p.counts) c.record(kBytes, p.way, per_byte(p.way == 0 ? 1.0 : 5.0));
  }
  std::vector<int> want_ways(MeasuredChoice::kWarmUpCalls, 0);
  std::vector<bool> want_counts(MeasuredChoice::kWarmUpCalls, false);
  want_ways.insert(want_ways.end(), {0, 1, 1});
  want_counts.insert(want_counts.end(), {true, false, true});
  EXPECT_EQ(ways, want_ways);
  EXPECT_EQ(counts, want_counts);
  EXPECT_EQ(c.estimate(kBytes, 0), 1.0);
  EXPECT_EQ(c.estimate(kBytes, 1), 5.0);
  EXPECT_FALSE(c.pick(kBytes).counts);  // the faster, and a change of way again
  EXPECT_EQ(c.pick(kBytes).way, 0);
}

TEST(MeasuredChoice, TheFasterWayRunsAndTheOtherIsTriedAgainNowAndThen) {
  for (double slower : {1.5, 5.0, 200.0}) {
    MeasuredChoice c;
    run(c, kFirstCalls, [&](int w) { return w == 1 ? 1.0 : slower; });
    // Tried twice (once cold) in retry_every(ratio) + 2 calls, the more rarely the slower it is.
    const int every = static_cast<int>(MeasuredChoice::retry_every(slower));
    EXPECT_EQ(every, slower < 64 ? static_cast<int>(128 * slower) : 8192);
    const int calls = 3 * cycle(slower);
    EXPECT_EQ(run(c, calls, [&](int w) { return w == 1 ? 1.0 : slower; }), calls - 6) << slower;
  }
  EXPECT_EQ(MeasuredChoice::retry_every(1.0), 128u);
}

TEST(MeasuredChoice, AWayThatBecomesFasterTakesOverWithinAFewTries) {
  MeasuredChoice c;
  run(c, 100, [](int w) { return w == 1 ? 1.0 : 5.0; });
  // Way 1 now takes 1.3, way 0 1.0: each try of way 0 halves the gap between
  // its estimate and its time, so it takes over within a few tries (under
  // 2000 calls here); from then on way 1 runs only when tried.
  int calls = 0;
  for (; calls < 2000 && c.estimate(kBytes, 0) >= MeasuredChoice::kTakeOverBelow * c.estimate(kBytes, 1); ++calls)
    run(c, 1, [](int w) { return w == 1 ? 1.3 : 1.0; });
  EXPECT_LT(calls, 2000);
  run(c, 4, [](int w) { return w == 1 ? 1.3 : 1.0; });  // past the switch's calls
  EXPECT_EQ(run(c, 3 * cycle(1.3), [](int w) { return w == 1 ? 1.3 : 1.0; }), 6);
}

TEST(MeasuredChoice, AWayThatBecomesSlowerLosesWithinAFewCalls) {
  MeasuredChoice c;
  run(c, 100, [](int w) { return w == 0 ? 1.0 : 1.3; });
  ASSERT_EQ(c.pick(kBytes).way, 0);
  // Way 0 now takes 5: way 1 (estimated at 1.3) runs from the fourth call on.
  EXPECT_EQ(run(c, 20, [](int w) { return w == 0 ? 5.0 : 1.0; }), 17);
}

TEST(MeasuredChoice, WaysWithinAFewPercentDoNotSwapOnNoise) {
  MeasuredChoice c;
  run(c, kFirstCalls, [](int w) { return w == 0 ? 1.0 : 1.03; });
  // Way 1 now takes 0.98 and 1.02 in turn, way 0 1.0: it never gets 5%
  // ahead, so it runs only when tried (twice a cycle).
  int call = 0;
  EXPECT_LE(run(c, 10 * cycle(1.0), [&](int w) { return w == 0 ? 1.0 : (++call % 2 ? 0.98 : 1.02); }), 20);
  // At 0.9 it takes over at its next try.
  run(c, cycle(1.0), [](int w) { return w == 0 ? 1.0 : 0.9; });
  EXPECT_LT(run(c, cycle(1.0), [](int w) { return w == 0 ? 1.0 : 0.9; }), cycle(1.0));
  EXPECT_GT(run(c, 3 * cycle(1.0), [](int w) { return w == 0 ? 1.0 : 0.9; }), 3 * cycle(1.0) - 8);
}

TEST(MeasuredChoice, OneSlowCallDoesNotChangeTheWay) {
  MeasuredChoice c;
  run(c, 100, [](int w) { return w == 0 ? 1.0 : 1.3; });
  ASSERT_EQ(c.pick(kBytes).way, 0);
  c.record(kBytes, 0, per_byte(100));  // preempted
  EXPECT_EQ(c.pick(kBytes).way, 0);
  EXPECT_LT(c.estimate(kBytes, 0), 1.3);
}

TEST(MeasuredChoice, EachSizeClassKeepsItsOwnTimes) {
  MeasuredChoice c;
  run(c, 100, [](int w) { return w == 0 ? 1.0 : 2.5; }, 1 << 20);
  run(c, 100, [](int w) { return w == 1 ? 1.0 : 2.5; }, 1 << 24);
  EXPECT_EQ(c.pick(1 << 20).way, 0);
  EXPECT_EQ(c.pick((1 << 20) + 12345).way, 0);  // the same class (a power of two)
  EXPECT_EQ(c.pick(1 << 24).way, 1);
  EXPECT_EQ(c.estimate(1 << 22, 0), 0.0);  // none run yet
  EXPECT_EQ(c.pick(1 << 22).way, 0);       // so each way in turn
}

}  // namespace
}  // namespace tdist::shm_engine
