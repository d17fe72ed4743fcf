// Several sockets per peer (TDIST_SOCKETS_PER_PEER): large payloads go in
// pieces over all of a pair's connections. These tests check what the extra
// connections add beyond tcp_rendezvous_test (which runs its cases with one
// and with three sockets): a sender that exits right after a large send (its
// pieces may still be on their way when its main socket closes), ranks that
// ask for different numbers, invalid values, garbage on an extra socket, and
// a piece that arrives after the peer's goodbye on its main socket.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "backends/process_world.h"
#include "backends/world.h"
#include "common/scoped_env.h"
#include "tdist/errors.h"
#include "tdist/store.h"
#include "transport/byte_pattern.h"
#include "transport/hand_played_peer.h"
#include "transport/request.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"

namespace tdist::testing {
namespace {

TEST(TcpLanes, ALargeMessageSentRightBeforeTheSenderExitsArrivesWhole) {
  ScopedEnv shm("TDIST_SHM", "0");
  ScopedEnv sockets("TDIST_SOCKETS_PER_PEER", "4");
  Shared<PortBoard> board;
  auto results = run_in_processes(2, [&](int rank) {
    init_process_world(*board, rank, 2, std::chrono::seconds(60));
    auto msg = pattern(5 << 20, 9);
    if (rank == 0) {
      send(bytes(msg), PeerRank(1), nullptr, 3);
      // Its goodbye on the main socket, then its sockets close, while the
      // pieces on the others may still be streaming.
      destroy_process_group();
      _exit(0);
    }
    std::vector<uint8_t> in(msg.size());
    recv(bytes(in), PeerRank(0), nullptr, 3);
    if (in != msg) throw std::runtime_error("the 5 MiB message arrived damaged");
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(TcpLanes, RanksAskingForDifferentNumbersUseTheSmaller) {
  ScopedEnv shm("TDIST_SHM", "0");
  Shared<PortBoard> board;
  auto results = run_in_processes(3, [&](int rank) {
    setenv("TDIST_SOCKETS_PER_PEER", std::to_string(rank + 2).c_str(), 1);  // 2, 3, 4
    init_process_world(*board, rank, 3, std::chrono::seconds(60));
    const int right = (rank + 1) % 3, left = (rank + 2) % 3;
    auto out = pattern(3 << 20, rank);
    std::vector<uint8_t> in(out.size());
    auto s = isend(bytes(out), PeerRank(right), nullptr, 1);
    recv(bytes(in), PeerRank(left), nullptr, 1);
    s->wait();
    if (in != pattern(3 << 20, left)) throw std::runtime_error("a 3 MiB message arrived damaged");
    barrier();
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(TcpLanes, AnInvalidNumberIsRejectedNamingTheVariable) {
  ScopedEnv shm("TDIST_SHM", "0");
  for (const char* bad : {"0", "17", "two"}) {
    ScopedEnv sockets("TDIST_SOCKETS_PER_PEER", bad);
    try {
      with_thread_world(2, [](ProcessGroup&) {}, std::chrono::seconds(20));
      ADD_FAILURE() << "TDIST_SOCKETS_PER_PEER=" << bad << " was accepted";
    } catch (const std::exception& e) {
      std::string m = e.what();
      EXPECT_TRUE(contains(m, "TDIST_SOCKETS_PER_PEER") && contains(m, bad)) << m;
    }
  }
}

// Rank 0 must fail the peer with a protocol error naming it (its waiting
// receive gets the error), not crash or write anywhere.
void expect_protocol_error_for(const wire::MessageHeader& frame, const std::string& expected) {
  HandPlayedPeer peer(2);
  ASSERT_TRUE(peer.transport);
  std::vector<uint8_t> in(1000);
  auto r = peer.transport->irecv(1, 5, in.data(), in.size());
  peer.write(peer.extra.at(0), frame);
  const std::string m = peer.failure_of(*r);
  EXPECT_TRUE(contains(m, "protocol error from rank 1") && contains(m, expected)) << m;
}

TEST(TcpLanes, DataForAMessageNeverClearedIsAProtocolError) {
  expect_protocol_error_for(wire::MessageHeader{wire::kRdvDataMagic, 7, 0, 4096}, "not cleared");
}

TEST(TcpLanes, AnythingButRendezvousDataOnAnExtraSocketIsAProtocolError) {
  expect_protocol_error_for(wire::MessageHeader{wire::kMessageMagic, 0, 5, 1000}, "bad header on an extra socket");
}

// The peer's goodbye on the main socket overtakes the piece still on its way
// over the other: the message is received all the same, then the peer fails.
TEST(TcpLanes, APieceArrivingAfterThePeersGoodbyeStillCompletesItsMessage) {
  HandPlayedPeer peer(2);
  ASSERT_TRUE(peer.transport);
  // The announcement carries the first half; the rest goes in two pieces, one per socket.
  const size_t size = 512 * 1024, head = wire::rendezvous_head(size), rest = size - head;
  ASSERT_EQ(wire::piece_count(rest, 2), 2u);
  auto msg = pattern(size, 4);
  std::vector<uint8_t> in(size);
  auto r = peer.transport->irecv(1, 8, in.data(), in.size());
  peer.write(peer.main_socket, wire::MessageHeader{wire::kRtsMagic, 1, 8, size}, msg.data(), head);
  wire::MessageHeader cts = peer.read_header();
  ASSERT_EQ(cts.magic, wire::kCtsMagic);
  ASSERT_EQ(cts.reserved, 1u);
  const uint64_t second = head + wire::piece_offset(rest, 2, 1);
  peer.write(peer.main_socket, wire::MessageHeader{wire::kRdvDataMagic, 1, head, second - head}, msg.data() + head,
             second - head);
  const std::string why = "rank 1 is done";
  peer.say_goodbye(why);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 0 reads the goodbye first
  peer.write(peer.extra.at(0), wire::MessageHeader{wire::kRdvDataMagic, 1, second, size - second},
             msg.data() + second, size - second);
  peer.extra.at(0).reset();
  peer.wait(*r);
  EXPECT_EQ(in, msg);
  // Then the peer is failed, with the reason it gave.
  std::vector<uint8_t> more(10);
  auto r2 = peer.transport->irecv(1, 9, more.data(), more.size());
  const std::string m = peer.failure_of(*r2);
  EXPECT_TRUE(contains(m, why)) << m;
}

}  // namespace
}  // namespace tdist::testing
