// The front of every backend: each operation's options struct carries its
// own timeout (shorter or longer than the group's) and async_op; bad
// options are refused before anything is sent. Ranks as threads, over shared
// memory and over TCP.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "backends/world.h"
#include "common/scoped_env.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

class CallOptions : public ::testing::TestWithParam<const char*> {
 protected:
  ScopedEnv shm_{"TDIST_SHM", GetParam()};
};

// A call's own timeout applies, not the group's minute: rank 1 stays away
// until rank 0 has failed, so rank 0's error must come from the 300 ms.
TEST_P(CallOptions, APerCallTimeoutShorterThanTheGroupsApplies) {
  std::atomic<bool> failed{false};
  std::string error;
  with_thread_world(
      2,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 1) {
          while (!failed.load()) std::this_thread::sleep_for(milliseconds(2));
          return;
        }
        std::vector<int> v(4, 1);
        const auto start = std::chrono::steady_clock::now();
        try {
          pg.all_reduce(v, {.timeout = milliseconds(300), .async_op = false})->wait();
          ADD_FAILURE() << "all_reduce completed without rank 1";
        } catch (const DistBackendError& e) {
          error = e.what();
        }
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
        failed.store(true);
      },
      std::chrono::minutes(1));
  EXPECT_NE(error.find("Timed out after 300 ms"), std::string::npos) << error;
  EXPECT_NE(error.find("all_reduce #1"), std::string::npos) << error;
}

// A longer timeout than the group's also applies: the peer comes after the
// group's 4 s (long enough to set the group up on a loaded machine), within
// the call's 60 s (a collective, then a receive).
TEST_P(CallOptions, APerCallTimeoutLongerThanTheGroupsApplies) {
  constexpr milliseconds kLate{5000};
  with_thread_world(
      2,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 1) std::this_thread::sleep_for(kLate);
        int64_t x = pg.rank() + 1;
        pg.broadcast(Tensor(&x, 1), {.root = 1, .timeout = std::chrono::seconds(60)})->wait();
        EXPECT_EQ(x, 2);
        int32_t y = 7;
        if (pg.rank() == 0) {
          std::this_thread::sleep_for(kLate);
          pg.blocking_send(Tensor(&y, 1), 1);
        } else {
          y = 0;
          pg.blocking_recv(Tensor(&y, 1), 0, RecvOptions{.timeout = std::chrono::seconds(60), .async_op = false});
          EXPECT_EQ(y, 7);
        }
      },
      milliseconds(4000));
}

// Options that make no sense are refused before the call reaches the
// backend, naming the operation; the group stays usable.
TEST_P(CallOptions, ANegativeTimeoutIsRefusedAndTheGroupStaysUsable) {
  with_thread_world(2, [&](ProcessGroup& pg) {
    std::vector<float> v(3, 1.0f);
    try {
      pg.all_reduce(v, {.timeout = milliseconds(-5)});
      ADD_FAILURE() << "a negative timeout was accepted";
    } catch (const DistValueError& e) {
      EXPECT_NE(std::string(e.what()).find("all_reduce: timeout -5 ms"), std::string::npos) << e.what();
    }
    try {
      pg.barrier({.timeout = milliseconds(0)});
      ADD_FAILURE() << "a zero timeout was accepted";
    } catch (const DistValueError& e) {
      EXPECT_NE(std::string(e.what()).find("barrier"), std::string::npos) << e.what();
    }
    pg.all_reduce(v, {.async_op = false})->wait();
    EXPECT_EQ(v, std::vector<float>(3, 2.0f));
  });
}

// The flat forms are cut into their list forms by the front's helpers: an
// all_to_all_single with uneven splits, issued async and blocking.
TEST_P(CallOptions, AllToAllSingleSplitsFromItsOptions) {
  with_thread_world(3, [&](ProcessGroup& pg) {
    const int me = pg.rank();
    // Rank r sends r + 1 rows of 2 elements to every rank.
    std::vector<int64_t> in_splits(3, me + 1), out_splits{1, 2, 3};
    std::vector<int32_t> input(static_cast<size_t>(3 * (me + 1) * 2), me), output(12, -1);
    Tensor in(input.data(), DType::Int32, {3 * (me + 1), 2});
    Tensor out(output.data(), DType::Int32, {6, 2});
    for (bool async : {true, false}) {
      std::fill(output.begin(), output.end(), -1);
      pg.all_to_all_single(out, in,
                           {.output_split_sizes = out_splits, .input_split_sizes = in_splits, .async_op = async})
          ->wait();
      std::vector<int32_t> want;
      for (int r = 0; r < 3; ++r) want.insert(want.end(), static_cast<size_t>((r + 1) * 2), r);
      EXPECT_EQ(output, want) << "rank " << me << (async ? ", async" : ", blocking");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, CallOptions, ::testing::Values("1", "0"),
                         [](const auto& info) { return std::string(info.param) == "1" ? "Shm" : "Tcp"; });

}  // namespace
}  // namespace tdist::testing
