// Small async collectives start without waking their group's thread
// (src/backends/work_queue.h: Deferred starts), in forked processes: such an
// operation still runs when its rank neither waits for it nor calls anything
// else, and a rank that blocks in another group starts it first, so that the
// peer waiting for it there is not kept waiting.
#include <cstdlib>
#include <thread>

#include "backends/work_queue.h"
#include "process_group/process_util.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

struct Flags {
  std::atomic<int> peer_done{0};
};

// An async all_reduce, waited for: the group's thread is woken for it (it
// slept) and naps from then on (20 naps); a moment later, once the thread is
// back at its queue, the next small async call is deferred (whether it was is
// printed, for the record: on a loaded machine the naps may be over).
void start_napping(const Group& group) {
  std::vector<int32_t> warm = {1};
  tdist::all_reduce(warm, ReduceOp::SUM, group, /*async_op=*/true)->wait();
  std::this_thread::sleep_for(milliseconds(1));
}

void require_values(const std::vector<int32_t>& v, const std::vector<int32_t>& want, const std::string& what) {
  require(v == want, what + ": got " + std::to_string(v[0]) + ", " + std::to_string(v[1]));
}

TEST(AsyncStart, ADeferredCollectiveCompletesWhileItsRankLeavesItAlone) {
  Shared<Flags> flags;
  run_world(2, [&](int me) {
    start_napping(nullptr);
    std::vector<int32_t> v = {me + 1, 10 * (me + 1)};
    if (me == 0) {
      auto work = tdist::all_reduce(v, ReduceOp::SUM, nullptr, /*async_op=*/true);
      std::printf("rank 0: the all_reduce was %s\n", WorkQueue::queues_with_unwoken_items() ? "deferred" : "started");
      // Nothing that starts it: no wait, no poll, no other call. Rank 1's
      // blocking all_reduce needs rank 0's part, so it ends only once the
      // napping thread has run rank 0's.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (flags->peer_done.load() == 0 && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(milliseconds(1));
      require(flags->peer_done.load() == 1, "rank 1's all_reduce did not end while rank 0 left its async one alone");
      // Rank 0's part ends a moment after rank 1's (it still reads rank 1's
      // contribution, and a loaded machine may pause its thread there):
      // completed_now() starts nothing, so asking it again leaves it alone.
      while (!work->completed_now() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(milliseconds(1));
      require(work->completed_now(), "rank 0's async all_reduce is not complete although rank 1's is");
      work->wait();
    } else {
      tdist::all_reduce(v);
      flags->peer_done.store(1);
    }
    require_values(v, {3, 30}, "all_reduce");
  }, milliseconds(30000));
}

// Rank 0 defers an all_reduce in group g, whose thread then naps a minute,
// and blocks in the default group; rank 1 first needs that all_reduce (a
// blocking one in g), then joins the default group's. Only rank 0's blocking
// call can start the deferred operation in time: the group timeout (20 s)
// would end rank 1's wait long before the nap.
TEST(AsyncStart, ABlockingCallInAnotherGroupStartsDeferredOperationsFirst) {
  run_world(2, [&](int me) {
    setenv("TDIST_ASYNC_DEFER_US", "60000000", 1);
    Group g = tdist::new_group({0, 1});
    start_napping(g);
    std::vector<int32_t> in_g = {me + 1, 10 * (me + 1)};
    std::vector<int32_t> in_world = {me + 2, 20 * (me + 2)};
    if (me == 0) {
      auto work = tdist::all_reduce(in_g, ReduceOp::SUM, g, /*async_op=*/true);
      std::printf("rank 0: the all_reduce in g was %s\n",
                  WorkQueue::queues_with_unwoken_items() ? "deferred" : "started");
      tdist::all_reduce(in_world);
      work->wait();
    } else {
      tdist::all_reduce(in_g, ReduceOp::SUM, g);
      tdist::all_reduce(in_world);
    }
    require_values(in_g, {3, 30}, "all_reduce in g");
    require_values(in_world, {5, 100}, "all_reduce in the default group");
  }, milliseconds(20000));
}

// completed_now() (what bookkeeping asks: the torch plugin's list of works in
// flight, after every call) must say what is_completed() says once a work is
// over, for every kind of work: else that list never lets go of them.
TEST(AsyncStart, CompletedNowSaysWhatIsCompletedSaysForEveryKindOfWork) {
  run_world(2, [&](int me) {
    std::vector<int32_t> v = {me, me};
    std::vector<std::pair<std::string, std::shared_ptr<Work>>> works;
    works.emplace_back("async all_reduce", tdist::all_reduce(v, ReduceOp::SUM, nullptr, /*async_op=*/true));
    works.emplace_back("blocking all_reduce", tdist::all_reduce(v));
    works.emplace_back(me == 0 ? "isend" : "irecv",
                       me == 0 ? tdist::isend(v, PeerRank(1)) : tdist::irecv(v, PeerRank(0)));
    works.emplace_back("all_reduce_coalesced", tdist::all_reduce_coalesced({Tensor(v)}, ReduceOp::SUM, nullptr, true));
    for (auto& [what, work] : works) {
      work->wait();
      require(work->is_completed(), what + ": not is_completed() after wait()");
      require(work->completed_now(), what + ": is_completed() but not completed_now()");
    }
  });
}

}  // namespace
}  // namespace tdist::testing
