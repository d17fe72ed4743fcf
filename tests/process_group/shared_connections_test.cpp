// Groups made by new_group talk over the default group's connections and
// threads (transport/communicator.h): forked processes over real sockets.
// Each group's messages meet only its own receives; destroying a group leaves
// the others working; a failure in one group fails that group alone.
#include <string>

#include "process_group/process_util.h"
#include "common/process_counts.h"
#include "common/scoped_env.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

using process_counts::sockets;
using process_counts::threads;

class SharedConnections : public ::testing::TestWithParam<const char*> {
 protected:
  ScopedEnv shm_{"TDIST_SHM", GetParam()};
};

// Three groups, each used by a collective and a point-to-point exchange,
// open no socket and start a thread at most for the default group's queue.
TEST_P(SharedConnections, NewGroupsOpenNoSocketsAndStartNoThreadsOfTheirOwn) {
  run_world(4, [](int me) {
    // Pairs connect on first use: an all_to_all on the default group
    // connects every pair it has, so what follows may add none.
    std::vector<int> to_all(4, me), from_all(4, -1);
    tdist::all_to_all_single(from_all, to_all);
    for (int q = 0; q < 4; ++q) require(from_all[q] == q, "all_to_all_single: got " + std::to_string(from_all[q]));
    const int sockets_before = sockets(), threads_before = threads();
    std::vector<Group> groups{tdist::new_group({0, 1, 2, 3}), tdist::new_group({0, 1}), tdist::new_group({2, 3})};
    for (auto& g : groups) {
      if (g->rank() < 0) continue;
      std::vector<int> v(5, me);
      tdist::all_reduce(v, ReduceOp::SUM, g);
      int expected = 0;
      for (int r : g->global_ranks()) expected += r;
      require(v[0] == expected, "all_reduce in a new group: got " + std::to_string(v[0]));
    }
    const int sockets_after = sockets(), threads_after = threads();
    // Rank 0 serves the store: its clients' connections come and go.
    require(me == 0 ? sockets_after <= sockets_before : sockets_after == sockets_before, "rank " + std::to_string(me) + ": sockets went from " +
                                                 std::to_string(sockets_before) + " to " + std::to_string(sockets_after));
    require(threads_after - threads_before <= 1, "rank " + std::to_string(me) + ": threads went from " +
                                                     std::to_string(threads_before) + " to " +
                                                     std::to_string(threads_after));
  });
}

// Two groups of the same ranks and the default group each get one message
// with the same tag; the receiver takes them in the opposite order. Any-source
// receives in a group report the sender's global rank.
TEST_P(SharedConnections, EachGroupsMessagesMeetOnlyItsOwnReceives) {
  run_world(3, [](int me) {
    Group a = tdist::new_group({0, 1}), b = tdist::new_group({0, 1}), c = tdist::new_group({1, 2});
    if (me == 0) {
      std::vector<int> va(4, 100), vb(4, 200), vw(4, 300);
      auto wa = tdist::isend(va, 1, a, 7);
      auto wb = tdist::isend(vb, 1, b, 7);
      tdist::send(vw, 1, nullptr, 7);
      wa->wait();
      wb->wait();
    } else if (me == 1) {
      std::vector<int> v(4, -1);
      tdist::recv(v, 0, nullptr, 7);
      require(v[0] == 300, "the default group's receive got " + std::to_string(v[0]));
      tdist::recv(v, 0, b, 7);
      require(v[0] == 200, "group b's receive got " + std::to_string(v[0]));
      tdist::recv(v, 0, a, 7);
      require(v[0] == 100, "group a's receive got " + std::to_string(v[0]));
      int source = tdist::recv(v, kAnyPeer, c, 3);
      require(source == 2 && v[0] == 2, "any-source receive in group (1,2): source " + std::to_string(source));
    } else {
      std::vector<int> v(4, 2);
      tdist::send(v, 1, c, 3);
    }
    tdist::barrier();
  });
}

// A destroyed group's communicator closes alone: the default group and a
// group made later go on, and the destroyed handle fails saying so.
TEST_P(SharedConnections, DestroyingAGroupLeavesTheOthersWorking) {
  run_world(3, [](int me) {
    for (int k = 0; k < 5; ++k) {
      Group g = tdist::new_group({0, 2});
      if (g->rank() >= 0) {
        std::vector<float> v(100, 1.0f);
        tdist::all_reduce(v, ReduceOp::SUM, g);
        require(v[99] == 2.0f, "all_reduce in group (0,2)");
      }
      tdist::destroy_process_group(g);
      if (g->rank() >= 0) {
        std::vector<float> v(4, 1.0f);
        try {
          tdist::all_reduce(v, ReduceOp::SUM, g);
          require(false, "an all_reduce on a destroyed group succeeded");
        } catch (const DistError& e) {
          require(std::string(e.what()).find("destroyed") != std::string::npos,
                  std::string("the error does not say the group was destroyed: ") + e.what());
        }
      }
      std::vector<int> w(3, me);
      tdist::all_reduce(w);
      require(w[2] == 3, "the default group after destroying a group");
    }
  });
}

// The ranks of a group call different collectives: that group fails on both
// ranks, naming it, while the default group and another group over the same
// connections go on (a group fails alone: transport/communicator.h).
TEST_P(SharedConnections, AFailureInOneGroupFailsThatGroupAlone) {
  run_world(2, [](int me) {
    Group g = tdist::new_group({0, 1}, milliseconds(5000)), other = tdist::new_group({0, 1});
    std::vector<float> v(64, 1.0f);
    try {
      if (me == 0)
        tdist::all_reduce(v, ReduceOp::SUM, g);
      else
        tdist::broadcast(v, 1, g);
      tdist::barrier(g);  // the broadcast root's part completes: it learns here
    } catch (const DistError&) {
    }
    try {
      tdist::all_reduce(v, ReduceOp::SUM, g);
      require(false, "rank " + std::to_string(me) + ": a collective on the failed group succeeded");
    } catch (const DistError& e) {
      require(std::string(e.what()).find("group(0,1)#0") != std::string::npos,
              "rank " + std::to_string(me) + ": the error does not name the failed group: " + e.what());
    }
    for (const Group& next : {Group(nullptr), other}) {
      std::vector<float> w(1000, static_cast<float>(me));
      tdist::all_reduce(w, ReduceOp::SUM, next);
      require(w[0] == 1.0f && w[999] == 1.0f,
              "rank " + std::to_string(me) + ": another group after one failed: " + std::to_string(w[0]));
    }
  });
}

// torch's new_subgroups and new_subgroups_by_enumeration, over the shared
// connections: each rank's group sums the ranks it lists.
TEST_P(SharedConnections, NewSubgroupsCutTheWorldAsListed) {
  run_world(4, [](int me) {
    auto [mine, all] = tdist::new_subgroups(2);
    require(all.size() == 2 && mine && mine->global_ranks() == std::vector<int>{me / 2 * 2, me / 2 * 2 + 1},
            "new_subgroups(2): wrong groups");
    std::vector<int> v(3, me);
    tdist::all_reduce(v, ReduceOp::SUM, mine);
    require(v[0] == (me / 2 * 2) * 2 + 1, "all_reduce in new_subgroups(2)'s group: " + std::to_string(v[0]));
    auto [odd, listed] = tdist::new_subgroups_by_enumeration({{0, 3}, {1, 2}});
    v.assign(3, me);
    tdist::all_reduce(v, ReduceOp::SUM, odd);
    require(listed.size() == 2 && v[1] == 3, "all_reduce in an enumerated subgroup: " + std::to_string(v[1]));
    try {
      tdist::new_subgroups(3);
      require(false, "new_subgroups(3) of 4 ranks succeeded");
    } catch (const DistValueError& e) {
      require(std::string(e.what()).find("divide the world size 4") != std::string::npos, e.what());
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Links, SharedConnections, ::testing::Values("1", "0"),
                         [](const auto& info) { return std::string(info.param) == "1" ? "SharedMemory" : "Tcp"; });

}  // namespace
}  // namespace tdist::testing
