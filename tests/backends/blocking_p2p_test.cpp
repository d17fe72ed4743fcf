// Blocking send/recv (ProcessGroup::blocking_send, blocking_recv; what
// tdist::send and tdist::recv use): their requests live on the caller's stack,
// so these tests also cover every way such a request ends: matched, matched
// while another thread drives, failing the group on a size mismatch, failed by a timeout.
// Each runs over shared memory and over TCP (TDIST_SHM=0).
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "backends/world.h"
#include "common/scoped_env.h"

namespace tdist::testing {
namespace {

class BlockingP2P : public ::testing::TestWithParam<const char*> {
 protected:
  ScopedEnv shm_{"TDIST_SHM", GetParam()};
};

// Even ranks send first, odd ones receive first: a blocking send of a large
// message over TCP completes only once its receive is posted (rendezvous).
TEST_P(BlockingP2P, RingOfSendsEveryWorldSizeAndSize) {
  for (int n : {2, 3, 5}) {
    with_thread_world(n, [](ProcessGroup& pg) {
      const int right = (pg.rank() + 1) % pg.size(), left = (pg.rank() - 1 + pg.size()) % pg.size();
      for (DType dtype : {DType::Int8, DType::Float32, DType::Complex128})
        for (size_t count : {size_t{0}, size_t{1}, size_t{9}, size_t{300001}}) {
          Buffer out(dtype, count, [&](size_t i) { return static_cast<long>((i + pg.rank()) % 50); });
          Buffer in(dtype, count);
          Buffer want(dtype, count, [&](size_t i) { return static_cast<long>((i + left) % 50); });
          int from = -1;
          if (pg.rank() % 2 == 0) {
            pg.blocking_send(out.tensor(), right);
            from = pg.blocking_recv(in.tensor(), left);
          } else {
            from = pg.blocking_recv(in.tensor(), left);
            pg.blocking_send(out.tensor(), right);
          }
          ASSERT_EQ(from, left);
          ASSERT_EQ(in.first_difference(want), -1) << dtype_name(dtype) << " x" << count << " of " << pg.size();
        }
    });
  }
}

TEST_P(BlockingP2P, RecvFromAnySourceReturnsTheSender) {
  with_thread_world(5, [](ProcessGroup& pg) {
    if (pg.rank() == 0) {
      std::set<int> seen;
      for (int k = 0; k < 4; ++k) {
        int v = -1;
        int from = pg.blocking_recv(Tensor(&v, 1), kAnySource, 5);
        EXPECT_EQ(v, from * 10);
        seen.insert(from);
      }
      EXPECT_EQ(seen, (std::set<int>{1, 2, 3, 4}));
    } else {
      int v = pg.rank() * 10;
      pg.blocking_send(Tensor(&v, 1), 0, 5);
    }
  });
}

// The mismatched message is discarded (the receive buffer is left alone);
// like a collective's failure, it fails the group on both ranks, and the
// sender learns why from its next operation.
TEST_P(BlockingP2P, SizeMismatchFailsTheGroupAndTellsTheSender) {
  with_thread_world(2, [](ProcessGroup& pg) {
    std::vector<float> ten(10, 1.5f), twenty(20, 0.0f);
    int ack = 0;
    if (pg.rank() == 0) {
      pg.blocking_send(ten, 1);
      try {
        pg.blocking_recv(Tensor(&ack, 1), 1);
        FAIL() << "the sender's next receive succeeded";
      } catch (const DistError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("rank 1"), std::string::npos) << m;
        EXPECT_NE(m.find("size mismatch"), std::string::npos) << m;
      }
    } else {
      try {
        pg.blocking_recv(twenty, 0);
        FAIL() << "a 10-element message was received into 20 elements";
      } catch (const DistBackendError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("recv #"), std::string::npos) << m;
        EXPECT_NE(m.find("80 bytes"), std::string::npos) << m;
        EXPECT_NE(m.find("40 bytes"), std::string::npos) << m;
      }
      for (float x : twenty) EXPECT_EQ(x, 0.0f);
      try {
        pg.blocking_send(Tensor(&ack, 1), 0);
        FAIL() << "a send on the failed group succeeded";
      } catch (const DistError& e) {
        EXPECT_NE(std::string(e.what()).find("failed earlier"), std::string::npos) << e.what();
      }
    }
  });
}

// Two threads of rank 1 wait at once (one drives the transport, the other
// waits as a bystander); the messages come in the other order than posted.
TEST_P(BlockingP2P, ThreadsWaitingTogetherEachGetTheirMessage) {
  with_thread_world(2, [](ProcessGroup& pg) {
    constexpr int kRounds = 200;
    for (int round = 0; round < kRounds; ++round) {
      if (pg.rank() == 0) {
        int go = 0;
        pg.blocking_recv(Tensor(&go, 1), 1, 9);  // both receivers of rank 1 are about to wait
        int b = round * 2 + 1, a = round * 2;
        pg.blocking_send(Tensor(&b, 1), 1, 2);
        pg.blocking_send(Tensor(&a, 1), 1, 1);
      } else {
        int a = -1, b = -1;
        std::thread other([&] { pg.blocking_recv(Tensor(&b, 1), 0, 2); });
        int go = 1;
        pg.blocking_send(Tensor(&go, 1), 0, 9);
        pg.blocking_recv(Tensor(&a, 1), 0, 1);
        other.join();
        ASSERT_EQ(a, round * 2);
        ASSERT_EQ(b, round * 2 + 1);
      }
    }
  });
}

// A receive nobody answers fails at the group's timeout naming its peer; the
// group is broken from then on and says so at once.
TEST_P(BlockingP2P, TimeoutNamesThePeerAndBreaksTheGroup) {
  std::atomic<bool> failed{false};
  with_thread_world(
      2,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 0) {
          while (!failed.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          return;
        }
        int v = 0;
        try {
          pg.blocking_recv(Tensor(&v, 1), 0, 3);
          ADD_FAILURE() << "a receive nobody answered succeeded";
        } catch (const DistBackendError& e) {
          std::string m = e.what();
          EXPECT_NE(m.find("Timed out"), std::string::npos) << m;
          EXPECT_NE(m.find("rank 0"), std::string::npos) << m;
        }
        failed = true;
        try {
          pg.blocking_send(Tensor(&v, 1), 0, 3);
          ADD_FAILURE() << "a send on a broken group succeeded";
        } catch (const DistError& e) {
          EXPECT_NE(std::string(e.what()).find("failed earlier"), std::string::npos) << e.what();
        }
      },
      std::chrono::milliseconds(300));
}

INSTANTIATE_TEST_SUITE_P(Transports, BlockingP2P, ::testing::Values("1", "0"),
                         [](const auto& info) { return std::string(info.param[0] == '1' ? "Shm" : "Tcp"); });

}  // namespace
}  // namespace tdist::testing
