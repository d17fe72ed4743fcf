// Large messages over sockets go by rendezvous (src/transport/wire.h): the
// sender announces, the receiver clears once a receive matches, the payload
// lands straight in the receive's buffer. These tests force sockets
// (TDIST_SHM=0) and a 1 KiB limit, and check the cases the protocol adds:
// receives posted late or out of order, announced and eager messages mixed
// under one tag, receives from any rank, a size mismatch (the stream must stay
// in step), and a peer that dies while a send waits for its clearance. Each
// runs with one socket per peer and with three (TDIST_SOCKETS_PER_PEER), where
// payloads of 128 KiB and more go in pieces over all of them.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backends/process_world.h"
#include "backends/world.h"
#include "common/scoped_env.h"
#include "transport/byte_pattern.h"
#include "transport/tcp/tcp_transport.h"

namespace tdist::testing {
namespace {

// Sockets only, every message larger than 1 KiB announced, and the test's
// number of sockets per peer; -1: one socket whose rendezvous data goes in
// 4 KiB frames, with at most 16 KiB unsent in the kernel (TDIST_TCP_SLICE_BYTES,
// TDIST_TCP_NOTSENT_LOWAT), so that clear-to-sends pass between the frames.
class TcpRendezvous : public ::testing::TestWithParam<int> {
 protected:
  ScopedEnv shm{"TDIST_SHM", "0"};
  ScopedEnv threshold{"TDIST_TCP_RENDEZVOUS_BYTES", "1024"};
  ScopedEnv sockets{"TDIST_SOCKETS_PER_PEER", std::to_string(std::abs(GetParam()))};
  ScopedEnv slices{"TDIST_TCP_SLICE_BYTES", GetParam() < 0 ? "4096" : "0"};
  ScopedEnv unsent{"TDIST_TCP_NOTSENT_LOWAT", GetParam() < 0 ? "16384" : "0"};
};

INSTANTIATE_TEST_SUITE_P(SocketsPerPeer, TcpRendezvous, ::testing::Values(1, 3, -1),
                         [](const ::testing::TestParamInfo<int>& info) {
                           if (info.param < 0) return std::string("1SocketInSlices");
                           return std::to_string(info.param) + (info.param == 1 ? "Socket" : "Sockets");
                         });


TEST_P(TcpRendezvous, AReceivePostedAfterTheAnnouncementGetsTheMessage) {
  with_thread_world(2, [](ProcessGroup& pg) {
    auto msg = pattern(300001, 1);
    if (pg.rank() == 0) {
      auto s = pg.send(bytes(msg), 1, 4);
      pg.barrier()->wait();  // the announcement is there before rank 1 posts its receive
      s->wait();
    } else {
      pg.barrier()->wait();
      std::vector<uint8_t> in(msg.size());
      pg.recv(bytes(in), 0, 4)->wait();
      EXPECT_EQ(in, msg);
    }
  });
}

TEST_P(TcpRendezvous, ReceivesInReverseOrderOfLargeAndSmallMessagesUnderOneTag) {
  with_thread_world(2, [](ProcessGroup& pg) {
    // Under one tag, messages match in the order sent, whichever way each goes.
    const std::vector<size_t> sizes = {5000, 10, 70000, 1023, 1024, 0, 200000};
    if (pg.rank() == 0) {
      std::vector<std::vector<uint8_t>> out;
      std::vector<std::shared_ptr<Work>> works;
      for (size_t k = 0; k < sizes.size(); ++k) out.push_back(pattern(sizes[k], static_cast<int>(k)));
      for (size_t k = 0; k < sizes.size(); ++k) works.push_back(pg.send(bytes(out[k]), 1, 9));
      for (size_t k = 0; k < sizes.size(); ++k) works.push_back(pg.send(bytes(out[k]), 1, 20 + static_cast<int>(k)));
      for (auto& w : works) w->wait();
    } else {
      std::vector<std::vector<uint8_t>> same_tag, own_tag;
      for (size_t k = 0; k < sizes.size(); ++k) {
        same_tag.emplace_back(sizes[k]);
        own_tag.emplace_back(sizes[k]);
      }
      std::vector<std::shared_ptr<Work>> works;
      for (size_t k = sizes.size(); k-- > 0;)  // distinct tags: received last to first
        works.push_back(pg.recv(bytes(own_tag[k]), 0, 20 + static_cast<int>(k)));
      for (size_t k = 0; k < sizes.size(); ++k) works.push_back(pg.recv(bytes(same_tag[k]), 0, 9));
      for (auto& w : works) w->wait();
      for (size_t k = 0; k < sizes.size(); ++k) {
        EXPECT_EQ(same_tag[k], pattern(sizes[k], static_cast<int>(k))) << "tag 9, message " << k;
        EXPECT_EQ(own_tag[k], pattern(sizes[k], static_cast<int>(k))) << "tag " << 20 + k;
      }
    }
  });
}

TEST_P(TcpRendezvous, EveryRankSendsAndReceivesLargeMessagesAtOnce) {
  for (int n : {2, 3, 5}) {
    with_thread_world(n, [](ProcessGroup& pg) {
      const int right = (pg.rank() + 1) % pg.size(), left = (pg.rank() + pg.size() - 1) % pg.size();
      auto out = pattern(1 << 20, pg.rank());
      std::vector<uint8_t> in(out.size());
      auto s = pg.send(bytes(out), right, 1);  // every rank sends first: nobody may wait for another's receive
      auto r = pg.recv(bytes(in), left, 1);
      s->wait();
      r->wait();
      EXPECT_EQ(in, pattern(1 << 20, left));
    });
  }
}

TEST_P(TcpRendezvous, AReceiveFromAnyRankTakesAnnouncedMessages) {
  with_thread_world(3, [](ProcessGroup& pg) {
    if (pg.rank() != 0) {
      auto out = pattern(50000, pg.rank());
      pg.send(bytes(out), 0, 3)->wait();
      return;
    }
    std::vector<bool> seen(3, false);
    for (int k = 0; k < 2; ++k) {
      std::vector<uint8_t> in(50000);
      auto w = pg.recv(bytes(in), kAnySource, 3);
      w->wait();
      int from = w->source_rank();
      ASSERT_TRUE(from == 1 || from == 2) << from;
      EXPECT_EQ(in, pattern(50000, from));
      seen[from] = true;
    }
    EXPECT_TRUE(seen[1] && seen[2]);
  });
}

// At the transport (the process group fails on a size mismatch, so its next
// message would never be read): the discarded payload leaves the streams in
// step, and the next message arrives intact.
TEST_P(TcpRendezvous, ASizeMismatchFailsTheReceiveAndNamesBothSizes) {
  auto store = std::make_shared<HashStore>();
  run_in_threads(2, [&](int rank) {
    TcpTransportOptions o;
    o.label = "rank " + std::to_string(rank);
    o.timeout = std::chrono::seconds(60);
    auto t = TcpTransport::connect(*store, rank, 2, o);
    const Deadline deadline = Deadline::after(std::chrono::seconds(60));
    auto msg = pattern(400000, 2), next = pattern(200000, 5);
    if (rank == 0) {
      auto first = t->isend(1, 1, msg.data(), msg.size());  // cleared, then discarded by the receiver
      auto second = t->isend(1, 2, next.data(), next.size());
      t->wait(*first, deadline);
      t->wait(*second, deadline);
      store->wait({"received"}, std::chrono::seconds(60));  // keeps the connection until rank 1 is done
    } else {
      std::vector<uint8_t> in(300000);
      auto req = t->irecv(0, 1, in.data(), in.size());
      try {
        t->wait(*req, deadline, /*abort_on_error=*/false);
        ADD_FAILURE() << "a 400000-byte message was received into 300000 bytes";
      } catch (const DistBackendError& e) {
        std::string m = e.what();
        EXPECT_TRUE(contains(m, "300000 bytes") && contains(m, "400000 bytes") && contains(m, "rank 0")) << m;
      }
      std::vector<uint8_t> after(next.size());
      auto second = t->irecv(0, 2, after.data(), after.size());
      t->wait(*second, deadline);
      EXPECT_EQ(after, next);
      store->set("received", "1");
    }
  });
}

TEST_P(TcpRendezvous, ASendWaitingForClearanceFailsWhenThePeerDies) {
  Shared<PortBoard> board;
  auto results = run_in_processes(2, [&](int rank) {
    init_process_world(*board, rank, 2, std::chrono::seconds(60));
    if (rank == 1) {
      barrier();
      _exit(0);  // never posts the receive; its sockets close
    }
    auto msg = pattern(100000, 3);
    auto w = isend(bytes(msg), PeerRank(1), nullptr, 1);
    barrier();
    try {
      w->wait();
      throw std::runtime_error("a send to a rank that exited without receiving succeeded");
    } catch (const DistError& e) {
      if (!contains(e.what(), "rank 1")) throw std::runtime_error(std::string("the error does not name rank 1: ") + e.what());
    }
  });
  EXPECT_EQ(describe_failures(results), "");
}

}  // namespace
}  // namespace tdist::testing
