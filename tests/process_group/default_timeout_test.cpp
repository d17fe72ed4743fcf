// The default timeout: TDIST_TIMEOUT sets it for init_process_group and for
// groups made without one; a timeout passed to the call wins over it; unset,
// it is torch's 30 minutes.
#include <atomic>
#include <chrono>
#include <thread>

#include "backends/world.h"
#include "common/scoped_env.h"
#include "process_group/coll_util.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::shared_ptr<ProcessGroup> lone_group(ProcessGroupOptions options = {}) {
  return std::make_shared<ProcessGroup>(std::make_shared<HashStore>(), 0, 1, options);
}

TEST(DefaultTimeout, IsThirtyMinutesWithoutTheSetting) {
  ScopedEnv unset("TDIST_TIMEOUT", nullptr);
  EXPECT_EQ(lone_group()->timeout(), kDefaultTimeout);
}

TEST(DefaultTimeout, TheSettingSetsItAndATimeoutGivenWins) {
  ScopedEnv one("TDIST_TIMEOUT", "1");
  EXPECT_EQ(lone_group()->timeout(), milliseconds(1000));
  ProcessGroupOptions given;
  given.timeout = seconds(7);
  EXPECT_EQ(lone_group(given)->timeout(), seconds(7));
  ScopedEnv half("TDIST_TIMEOUT", "0.5");
  EXPECT_EQ(lone_group()->timeout(), milliseconds(500));
}

TEST(DefaultTimeout, ABadSettingIsAnErrorNamingIt) {
  for (const char* bad : {"abc", "0", "-5", "10s", ""}) {
    ScopedEnv setting("TDIST_TIMEOUT", bad);
    try {
      lone_group();
      ADD_FAILURE() << "TDIST_TIMEOUT='" << bad << "' was accepted";
    } catch (const DistValueError& e) {
      EXPECT_TRUE(has(e.what(), "TDIST_TIMEOUT='" + std::string(bad) + "'")) << e.what();
    }
  }
}

TEST(DefaultTimeout, InitProcessGroupAndNewGroupTakeTheSetting) {
  ScopedEnv one("TDIST_TIMEOUT", "1");
  InitOptions o;
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.world_size = 1;
  init_process_group(o);
  EXPECT_EQ(group_world()->timeout(), milliseconds(1000));
  EXPECT_EQ(new_group({0})->timeout(), milliseconds(1000));
  EXPECT_EQ(new_group({0}, seconds(5))->timeout(), seconds(5));
  destroy_process_group();
  o.store = std::make_shared<HashStore>();
  o.timeout = seconds(3);
  init_process_group(o);
  EXPECT_EQ(group_world()->timeout(), seconds(3));
  destroy_process_group();
}

// The point of the setting: with TDIST_TIMEOUT=1 a receive from a rank that
// never sends fails after about a second, naming the timeout, instead of
// after 30 minutes.
TEST(DefaultTimeout, ARecvFromARankThatNeverSendsFailsAfterTheSettingsTimeout) {
  ScopedEnv one("TDIST_TIMEOUT", "1");
  auto store = std::make_shared<HashStore>();
  std::atomic<bool> done{false};
  run_in_threads(2, [&](int rank) {
    ProcessGroup pg(store, rank, 2);  // no timeout given
    if (rank == 1) {
      while (!done.load()) std::this_thread::sleep_for(milliseconds(5));
      return;
    }
    std::vector<int32_t> v(4, 0);
    const auto start = std::chrono::steady_clock::now();
    try {
      pg.recv(Tensor(v), 1)->wait();
      done.store(true);
      ADD_FAILURE() << "recv from a rank that never sends succeeded";
    } catch (const DistError& e) {
      done.store(true);
      const auto took = std::chrono::steady_clock::now() - start;
      EXPECT_GE(took, milliseconds(900)) << e.what();
      EXPECT_LT(took, seconds(20)) << e.what();  // far below 30 minutes, far above any load
      EXPECT_TRUE(has(e.what(), "1000 ms") || has(e.what(), "1 s")) << "the error does not name the timeout: "
                                                                     << e.what();
    }
  });
}

}  // namespace
}  // namespace tdist::testing
