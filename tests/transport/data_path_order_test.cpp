// TDIST_TRANSPORTS: each peer's messages go over the first path of the list
// that reaches it; both ends of a pair agree even when their lists differ,
// and a list that reaches a peer by nothing fails naming that peer.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "backends/process_world.h"
#include "backends/world.h"
#include "common/scoped_env.h"
#include "process_group/coll_util.h"
#include "transport/data_path.h"
#include "transport/shm_rings.h"

namespace tdist::testing {
namespace {

void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}


// Every rank sends a message of each size to every other rank and checks what it got.
void exchange(ProcessGroup& pg) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4097}, size_t{1} << 20}) {
    std::vector<std::shared_ptr<Work>> works;
    std::vector<std::vector<uint8_t>> in(pg.size(), std::vector<uint8_t>(n, 0xee)), out(pg.size());
    for (int peer = 0; peer < pg.size(); ++peer) {
      if (peer == pg.rank()) continue;
      out[peer].resize(n);
      for (size_t i = 0; i < n; ++i) out[peer][i] = static_cast<uint8_t>(i * 13 + pg.rank() * 5 + peer);
      works.push_back(pg.recv(Tensor(in[peer].data(), static_cast<int64_t>(n)), peer, 7));
      works.push_back(pg.send(Tensor(out[peer].data(), static_cast<int64_t>(n)), peer, 7));
    }
    for (auto& w : works) w->wait();
    for (int peer = 0; peer < pg.size(); ++peer) {
      if (peer == pg.rank()) continue;
      for (size_t i = 0; i < n; ++i)
        require(in[peer][i] == static_cast<uint8_t>(i * 13 + peer * 5 + pg.rank()),
                "rank " + std::to_string(pg.rank()) + ": byte " + std::to_string(i) + " of " + std::to_string(n) +
                    " from rank " + std::to_string(peer) + " differs");
    }
  }
}

TEST(DataPathOrder, ListsAreReadInOrderAndCheckedByName) {
  {
    ScopedEnv list("TDIST_TRANSPORTS", " TCP , shm");
    EXPECT_EQ(data_path_order(), (std::vector<std::string>{"tcp", "shm"}));
  }
  {
    ScopedEnv list("TDIST_TRANSPORTS", "shm");
    ScopedEnv off("TDIST_SHM", "0");
    std::string msg = value_error_of([] { data_path_order(); }, "shm with TDIST_SHM=0");
    EXPECT_TRUE(contains(msg, "TDIST_TRANSPORTS=shm") && contains(msg, "TDIST_SHM=0")) << msg;
  }
  for (const char* bad : {"shm,ib", "tcp,tcp", ""}) {
    ScopedEnv list("TDIST_TRANSPORTS", bad);
    std::string msg = value_error_of([] { data_path_order(); }, bad);
    EXPECT_TRUE(contains(msg, "TDIST_TRANSPORTS=" + std::string(bad))) << msg;
    if (std::string(bad) == "shm,ib") {
      EXPECT_TRUE(contains(msg, "unknown transport 'ib'")) << msg;
    }
    if (std::string(bad) == "tcp,tcp") {
      EXPECT_TRUE(contains(msg, "'tcp' is listed twice")) << msg;
    }
  }
}

// Ranks of one host: rings where shm comes first, sockets where tcp does;
// the data arrives either way.
TEST(DataPathOrder, TheFirstPathThatReachesAPeerCarriesItsMessages) {
  struct Case {
    const char* list;
    bool rings;
  };
  for (Case c : {Case{"shm,tcp", true}, Case{"shm", true}, Case{"tcp", false}, Case{"tcp,shm", false}}) {
    ScopedEnv list("TDIST_TRANSPORTS", c.list);
    ASSERT_FALSE(maps_shm_rings());
    with_thread_world(3, [&](ProcessGroup& pg) {
      exchange(pg);  // pairs connect, and choose their path, on first use
      EXPECT_EQ(maps_shm_rings(), c.rings) << "TDIST_TRANSPORTS=" << c.list;
    });
  }
}

// Rank 0 prefers rings, rank 1 wants sockets only: the pair uses the socket.
TEST(DataPathOrder, RanksWithDifferentListsAgreeOnOnePath) {
  Shared<PortBoard> board;
  auto results = run_in_processes(2, [&](int rank) {
    setenv("TDIST_TRANSPORTS", rank == 0 ? "shm,tcp" : "tcp", 1);
    init_process_world(*board, rank, 2, std::chrono::seconds(60));
    exchange(*group_world());
    require(!maps_shm_rings(), "rank " + std::to_string(rank) + " mapped rings that its peer does not use");
    destroy_process_group();
  });
  EXPECT_EQ(describe_failures(results), "");
}

// Rank 0 allows rings only, rank 1 declines them: when the pair first
// connects, rank 0 finds it cannot reach rank 1 and says so; rank 1 then
// fails too, as rank 0 closes the connection (the timeout only bounds a hang).
TEST(DataPathOrder, AListThatReachesAPeerByNothingFailsNamingIt) {
  Shared<PortBoard> board;
  auto results = run_in_processes(2, [&](int rank) {
    setenv("TDIST_TRANSPORTS", rank == 0 ? "shm" : "tcp", 1);
    try {
      init_process_world(*board, rank, 2, std::chrono::seconds(60));
      exchange(*group_world());
    } catch (const DistError& e) {
      const std::string msg = e.what();
      if (rank == 0)
        require(contains(msg, "TDIST_TRANSPORTS=shm reaches no path to rank 1") &&
                    contains(msg, "no shared memory with it"),
                "rank 0's error does not name the peer and the reason: " + msg);
      return;
    }
    throw std::runtime_error("rank " + std::to_string(rank) + " exchanged messages although rank 0 cannot reach rank 1");
  });
  EXPECT_EQ(describe_failures(results), "");
}

}  // namespace
}  // namespace tdist::testing
