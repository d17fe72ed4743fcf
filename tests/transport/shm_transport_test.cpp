// Point-to-point between ranks of one host through the shared-memory rings:
// every size against rings much smaller than the messages, both directions
// at once, unexpected messages, TDIST_SHM=0, and a peer that sends and exits.
#include <gtest/gtest.h>
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "backends/process_world.h"
#include "backends/world.h"
#include "common/scoped_env.h"
#include "transport/exchange_sizes.h"
#include "transport/shm_rings.h"

namespace tdist::testing {
namespace {

void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

// Every rank sends every size to every other rank at once, then receives.
void exchange_all_sizes(ProcessGroup& pg) { exchange_sizes(pg, {0, 1, 4095, 4096, 4097, 100003, size_t{1} << 20}); }

// This process's ring segments in /dev/shm (names carry the creator's pid:
// tests running in parallel create and unlink their own meanwhile).
int shm_names_left() {
  int n = 0;
  const std::string mine = "tdist-p2p-" + std::to_string(::getpid()) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(mine, 0) == 0) ++n;
    closedir(d);
  }
  return n;
}

TEST(ShmTransport, EverySizeBothWaysThroughRingsSmallerThanTheMessages) {
  ScopedEnv ring("TDIST_SHM_RING_BYTES", "4096");
  for (int n : {2, 3, 5}) with_thread_world(n, exchange_all_sizes);
}

TEST(ShmTransport, ManySmallMessagesKeepTheirOrderAcrossWrapArounds) {
  ScopedEnv ring("TDIST_SHM_RING_BYTES", "4096");
  with_thread_world(2, [](ProcessGroup& pg) {
    constexpr int kCount = 2000;  // 2000 x (24-byte header + 12 bytes): many laps of the ring
    if (pg.rank() == 0) {
      for (int i = 0; i < kCount; ++i) {
        int v[3] = {i, i * 2, i * 3};
        pg.send(Tensor(v, 3), 1)->wait();
      }
    } else {
      for (int i = 0; i < kCount; ++i) {
        int v[3] = {};
        pg.recv(Tensor(v, 3), 0)->wait();
        ASSERT_EQ(v[0], i);
        ASSERT_EQ(v[2], i * 3);
      }
    }
  });
}

TEST(ShmTransport, AMessageLargerThanTheRingWaitsWholeForALateReceive) {
  ScopedEnv ring("TDIST_SHM_RING_BYTES", "4096");
  with_thread_world(2, [](ProcessGroup& pg) {
    std::vector<uint8_t> big = message_from(300000, 0, 1);
    if (pg.rank() == 0) {
      auto s = pg.send(Tensor(big.data(), static_cast<int64_t>(big.size())), 1);
      pg.barrier()->wait();  // rank 1 posts its receive only after this
      s->wait();
    } else {
      pg.barrier()->wait();
      std::vector<uint8_t> in(big.size());
      pg.recv(Tensor(in.data(), static_cast<int64_t>(in.size())), 0)->wait();
      EXPECT_EQ(in, big);
    }
  });
}

TEST(ShmTransport, RanksOfOneHostMapRingsAndLeaveNoNameBehind) {
  int before = shm_names_left();
  with_thread_world(3, [](ProcessGroup& pg) {
    exchange_all_sizes(pg);  // pairs connect, and map their rings, on first use
    EXPECT_TRUE(maps_shm_rings());
    pg.barrier()->wait();
  });
  EXPECT_EQ(shm_names_left(), before);
}

TEST(ShmTransport, ShmOffKeepsEverythingOnTcp) {
  ScopedEnv off("TDIST_SHM", "0");
  ASSERT_FALSE(maps_shm_rings());
  with_thread_world(3, [](ProcessGroup& pg) {
    EXPECT_FALSE(maps_shm_rings());
    exchange_all_sizes(pg);
  });
}

TEST(ShmTransport, APeerThatSendsAndExitsIsStillHeard) {
  Shared<PortBoard> board;
  Shared<std::atomic<int>> sent;
  auto results = run_in_processes(2, [&](int rank) {
    init_process_world(*board, rank, 2, std::chrono::seconds(60));
    std::vector<uint8_t> small = message_from(100, 1, 0), big = message_from(200000, 1, 0);
    if (rank == 1) {
      send(Tensor(small.data(), 100), PeerRank(0), nullptr, 1);
      send(Tensor(big.data(), 200000), PeerRank(0), nullptr, 2);
      sent->store(1);
      return;  // exits without destroying its group: the socket closes
    }
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (sent->load() == 0) {
      require(std::chrono::steady_clock::now() < give_up, "rank 1 never finished sending");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Let the closed socket be seen first where it can (either order must work).
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<uint8_t> a(100), b(200000);
    recv(Tensor(a.data(), 100), PeerRank(1), nullptr, 1);
    recv(Tensor(b.data(), 200000), PeerRank(1), nullptr, 2);
    require(a == small && b == big, "the data of the departed peer differs");
  });
  EXPECT_EQ(describe_failures(results), "");
}

}  // namespace
}  // namespace tdist::testing
