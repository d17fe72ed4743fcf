// A group's abort fails that group only (transport/communicator.h): forked
// processes over real sockets, over TCP alone (TDIST_SHM=0) and over shared
// memory. A watchdog thread unblocks a hung collective; the members of an
// aborted subgroup fail naming the rank that aborted, while the default group
// and the other groups go on; an abort in the middle of a 64 MiB message
// leaves no byte written into a freed buffer (run it in the ASan build too).
#include <cstdio>
#include <cstring>
#include <thread>

#include "process_group/process_util.h"
#include "common/scoped_env.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

// Long enough that a failure seen here is never the group's timeout.
constexpr milliseconds kLongTimeout{60'000};

// Calls `op`, which must fail with a DistError whose text holds every part.
template <typename Op>
std::string require_failure(const Op& op, const std::vector<std::string>& parts, const std::string& what) {
  try {
    op();
  } catch (const DistError& e) {
    std::fprintf(stderr, "[%s] got, as expected: %s\n", what.c_str(), e.what());
    for (const auto& part : parts)
      require(contains(e.what(), part), what + ": the error does not say '" + part + "': " + e.what());
    require(!contains(e.what(), "Timed out"), what + ": a timeout, not the abort: " + e.what());
    return e.what();
  }
  require(false, what + ": succeeded");
  return {};
}

float sum_of_ranks(const std::vector<int>& ranks) {
  float s = 0;
  for (int r : ranks) s += static_cast<float>(r);
  return s;
}

// An all_reduce of `count` floats holding this rank's number, checked.
void check_all_reduce(int me, const std::vector<int>& ranks, const Group& group, size_t count, const std::string& what) {
  std::vector<float> v(count, static_cast<float>(me));
  tdist::all_reduce(v, ReduceOp::SUM, group);
  const float want = sum_of_ranks(ranks);
  for (size_t i = 0; i < count; i += count / 7 + 1)
    require(v[i] == want, what + ": element " + std::to_string(i) + " is " + std::to_string(v[i]));
  require(v[count - 1] == want, what + ": the last element is " + std::to_string(v[count - 1]));
}

// Aborts `group` from another thread after a moment (while this rank's
// main thread is blocked), as a watchdog would.
std::thread watchdog(Group group, const std::string& why, milliseconds after) {
  return std::thread([group, why, after] {
    std::this_thread::sleep_for(after);
    group->abort(std::make_exception_ptr(DistBackendError(why)));
  });
}

class CommAbort : public ::testing::TestWithParam<const char*> {
 protected:
  ScopedEnv shm_{"TDIST_SHM", GetParam()};
};

// Rank 2 never joins the all_reduce; rank 0's watchdog aborts the default
// group: rank 0's call ends saying it was aborted, rank 1's pending
// all_reduce and rank 2's pending receive fail naming rank 0.
TEST_P(CommAbort, AWatchdogUnblocksAHungCollectiveOfTheDefaultGroup) {
  run_world(
      3,
      [](int me) {
        check_all_reduce(me, {0, 1, 2}, nullptr, 100, "before the abort");
        std::vector<float> v(1000, 1.0f);
        if (me == 0) {
          std::thread dog = watchdog(tdist::group_world(), "rank 0 in group default_pg: aborted by its watchdog",
                                     milliseconds(300));
          try {
            tdist::all_reduce(v);
            require(false, "the all_reduce passed without rank 2");
          } catch (const DistBackendError& e) {
            require(contains(e.what(), "aborted by its watchdog"), std::string("rank 0: ") + e.what());
          }
          dog.join();
          require_failure([&] { tdist::all_reduce(v); }, {"aborted by its watchdog"}, "rank 0's next all_reduce");
        } else if (me == 1) {
          require_failure([&] { tdist::all_reduce(v); }, {"rank 0", "aborted by its watchdog"},
                          "rank 1's pending all_reduce");
        } else {
          require_failure([&] { tdist::recv(v, 0, nullptr, 99); }, {"rank 0", "aborted by its watchdog"},
                          "rank 2's pending receive");
        }
      },
      kLongTimeout);
}

// Rank 2 aborts subgroup (1,2,3) while ranks 1 and 3 wait in its all_reduce
// and rank 1 in a receive from it: they fail naming rank 2, later calls on
// the subgroup fail on every member, and the default group, another
// subgroup and a group made afterwards work on every rank.
TEST_P(CommAbort, AbortingASubgroupFailsItAloneOnEveryMember) {
  run_world(
      4,
      [](int me) {
        Group sub = tdist::new_group({1, 2, 3}, kLongTimeout), other = tdist::new_group({0, 1, 2});
        const bool in_sub = me >= 1;
        if (in_sub) check_all_reduce(me, {1, 2, 3}, sub, 100, "subgroup before the abort");
        check_all_reduce(me, {0, 1, 2, 3}, nullptr, 100, "default group before the abort");
        std::vector<float> v(5000, 1.0f), w(16, 0.0f);
        if (me == 2) {
          std::thread dog =
              watchdog(sub, "rank 2 in group " + sub->group_name() + ": aborted by its watchdog", milliseconds(300));
          require_failure([&] { tdist::recv(w, 3, sub, 4); }, {"aborted by its watchdog"}, "rank 2's own receive");
          dog.join();
        } else if (in_sub) {
          std::shared_ptr<Work> pending;
          if (me == 1) pending = tdist::irecv(w, 2, sub, 5);
          require_failure([&] { tdist::all_reduce(v, ReduceOp::SUM, sub); }, {"rank 2", "abort"},
                          "rank " + std::to_string(me) + "'s pending all_reduce");
          if (pending)
            require_failure([&] { pending->wait(); }, {"rank 2", "abort"}, "rank 1's pending receive from rank 2");
        }
        if (in_sub)
          require_failure([&] { tdist::all_reduce(v, ReduceOp::SUM, sub); }, {"abort"},
                          "rank " + std::to_string(me) + "'s next all_reduce on the aborted subgroup");
        // Everything else goes on, with right results.
        check_all_reduce(me, {0, 1, 2, 3}, nullptr, 300001, "default group after the abort");
        if (me <= 2) check_all_reduce(me, {0, 1, 2}, other, 1000, "subgroup (0,1,2) after the abort");
        if (me == 1 || me == 2) {
          std::vector<int> x(1000, me);
          if (me == 1) tdist::send(x, 2);
          else tdist::recv(x, 1);
          require(x[999] == 1, "a send on the default group after the abort");
        }
        Group again = tdist::new_group({1, 2, 3});
        if (in_sub) check_all_reduce(me, {1, 2, 3}, again, 1000, "a new group of the aborted one's ranks");
        tdist::barrier();
      },
      kLongTimeout);
}

INSTANTIATE_TEST_SUITE_P(Links, CommAbort, ::testing::Values("1", "0"),
                         [](const auto& info) { return std::string(info.param) == "1" ? "SharedMemory" : "Tcp"; });

// A 64 MiB message between ranks 0 and 1 in a subgroup of theirs, aborted
// while it streams (as nearly as a sleep can aim): first by the receiver,
// then by the sender. The receiver's buffer is not written once its abort
// returned; a sender's buffer is overwritten then, and a receive that still
// completes must hold the bytes sent before. The default group goes on.
struct LargeCase {
  const char* name;
  const char* shm;
  const char* sockets_per_peer;
};

class CommAbortLarge : public ::testing::TestWithParam<LargeCase> {
 protected:
  ScopedEnv shm_{"TDIST_SHM", GetParam().shm};
  ScopedEnv sockets_{"TDIST_SOCKETS_PER_PEER", GetParam().sockets_per_peer};
};

constexpr size_t kLargeBytes = size_t{64} << 20;

uint64_t checksum(const std::vector<uint8_t>& v) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < v.size(); i += 4096) h = (h ^ v[i]) * 1099511628211ull;
  return h ^ v.back();
}

TEST_P(CommAbortLarge, AnAbortDuringALargeMessageTouchesNoFreedBuffer) {
  run_world(
      2,
      [](int me) {
        // 1. The receiver aborts.
        {
          Group sub = tdist::new_group({0, 1}, kLongTimeout);
          auto buffer = std::make_unique<std::vector<uint8_t>>(kLargeBytes, me == 0 ? 0x5a : 0x00);
          if (me == 0) {
            auto work = tdist::isend(*buffer, 1, sub, 1);
            try {
              work->wait();
            } catch (const DistError& e) {
              require(contains(e.what(), "rank 1"), std::string("the sender's error does not name rank 1: ") + e.what());
            }
          } else {
            auto work = tdist::irecv(*buffer, 0, sub, 1);
            std::thread dog = watchdog(sub, "rank 1: aborted during the message", milliseconds(2));
            try {
              work->wait();
            } catch (const DistError&) {
            }
            dog.join();
            const uint64_t seen = checksum(*buffer);
            std::this_thread::sleep_for(milliseconds(100));
            require(checksum(*buffer) == seen, "the receive buffer changed after the abort returned");
            buffer.reset();  // the rest of the message must not land here (ASan watches the freed block)
          }
        }
        check_all_reduce(me, {0, 1}, nullptr, 1 << 20, "the default group after the receiver's abort");
        // 2. The sender aborts.
        {
          Group sub = tdist::new_group({0, 1}, kLongTimeout);
          auto buffer = std::make_unique<std::vector<uint8_t>>(kLargeBytes, me == 0 ? 0xa5 : 0x00);
          if (me == 0) {
            auto work = tdist::isend(*buffer, 1, sub, 2);
            std::thread dog = watchdog(sub, "rank 0: aborted during the message", milliseconds(2));
            try {
              work->wait();
            } catch (const DistError&) {
            }
            dog.join();
            std::memset(buffer->data(), 0x11, buffer->size());  // what is left to send went from a copy
            buffer.reset();
          } else {
            auto work = tdist::irecv(*buffer, 0, sub, 2);
            bool received = false;
            try {
              work->wait();
              received = true;
            } catch (const DistError& e) {
              require(contains(e.what(), "rank 0"), std::string("the receiver's error does not name rank 0: ") + e.what());
            }
            if (received)
              for (size_t i = 0; i < buffer->size(); i += 997)
                require((*buffer)[i] == 0xa5, "byte " + std::to_string(i) + " of a completed receive is " +
                                                  std::to_string((*buffer)[i]) + ", not what was sent");
          }
        }
        check_all_reduce(me, {0, 1}, nullptr, 1 << 20, "the default group after the sender's abort");
        tdist::barrier();
      },
      kLongTimeout);
}

INSTANTIATE_TEST_SUITE_P(Paths, CommAbortLarge,
                         ::testing::Values(LargeCase{"Tcp", "0", "1"}, LargeCase{"TcpTwoSockets", "0", "2"},
                                           LargeCase{"SharedMemory", "1", "1"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tdist::testing
