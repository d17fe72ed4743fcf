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
#include "transport/shm_rings.h"

namespace tdist::testing {
namespace {

void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

std::vector<uint8_t> pattern(size_t n, int from, int to) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + from * 7 + to * 3);
  return v;
}

// Every rank sends every size to every other rank at once, then receives.
void exchange_all_sizes(ProcessGroup& pg) {
  const std::vector<size_t> sizes = {0, 1, 4095, 4096, 4097, 100003, size_t{1} << 20};
  std::vector<std::shared_ptr<Work>> works;
  std::vector<std::vector<uint8_t>> out, in;
  out.reserve(64);
  in.reserve(64);
  for (int peer = 0; peer < pg.size(); ++peer) {
    if (peer == pg.rank()) continue;
    for (size_t k = 0; k < sizes.size(); ++k) {
      in.emplace_back(sizes[k], 0xee);
      works.push_back(pg.recv(Tensor(in.back().data(), static_cast<int64_t>(sizes[k])), peer, static_cast<int>(k)));
      out.push_back(pattern(sizes[k], pg.rank(), peer));
      works.push_back(pg.send(Tensor(out.back().data(), static_cast<int64_t>(sizes[k])), peer, static_cast<int>(k)));
    }
  }
  for (auto& w : works) w->wait();
  size_t at = 0;
  for (int peer = 0; peer < pg.size(); ++peer) {
    if (peer == pg.rank()) continue;
    for (size_t k = 0; k < sizes.size(); ++k, ++at)
      ASSERT_EQ(in[at], pattern(sizes[k], peer, pg.rank())) << "from rank " << peer << ", " << sizes[k] << " bytes";
  }
}

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
    std::vector<uint8_t> big = pattern(300000, 0, 1);
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
    std::vector<uint8_t> small = pattern(100, 1, 0), big = pattern(200000, 1, 0);
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
