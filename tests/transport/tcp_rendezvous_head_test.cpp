// A request-to-send carries the head of its payload (wire::rendezvous_head),
// so the receiver gets data before it has even cleared the rest. Rank 1 is
// played by hand so that each test can cut the stream where the cases differ:
// the announcement read before or after a receive is posted, a receive
// matched while its head is still arriving, a size mismatch then, and a peer
// that leaves after announcing. The sleeps only make the intended order
// likely; every order must give the same result.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "backends/process_world.h"
#include "tdist/errors.h"
#include "transport/byte_pattern.h"
#include "transport/hand_played_peer.h"
#include "transport/request.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"

namespace tdist::testing {
namespace {

constexpr size_t kSize = 1 << 20;  // over the default rendezvous limit (512 KiB)
constexpr uint64_t kTag = 8;
constexpr uint32_t kId = 3;

void let_rank0_read() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

void expect_clear_to_send(HandPlayedPeer& peer) {
  wire::MessageHeader cts = peer.read_header();
  EXPECT_EQ(cts.magic, wire::kCtsMagic);
  EXPECT_EQ(cts.reserved, kId);
}

// The announcement of `msg` and the first `sent` bytes of its head.
void announce(HandPlayedPeer& peer, const std::vector<uint8_t>& msg, size_t sent) {
  peer.write(peer.main_socket, wire::MessageHeader{wire::kRtsMagic, kId, kTag, msg.size()}, msg.data(), sent);
}

// The head of `msg` after its first `sent` bytes.
void finish_head(HandPlayedPeer& peer, const std::vector<uint8_t>& msg, size_t sent) {
  peer.write_bytes(peer.main_socket, msg.data() + sent, wire::rendezvous_head(msg.size()) - sent);
}

// The rest of the payload after its head, framed as rendezvous data.
void write_rest(HandPlayedPeer& peer, const std::vector<uint8_t>& msg) {
  const size_t head = wire::rendezvous_head(msg.size());
  peer.write(peer.main_socket, wire::MessageHeader{wire::kRdvDataMagic, kId, head, msg.size() - head},
             msg.data() + head, msg.size() - head);
}

TEST(TcpRendezvousHead, TheHeadIsAtMostHalfThePayloadAndSetsTheRestsOffset) {
  EXPECT_EQ(wire::rendezvous_head(2), 1u);
  EXPECT_EQ(wire::rendezvous_head(1001), 500u);
  EXPECT_EQ(wire::rendezvous_head(kSize), wire::kRendezvousHeadBytes);
}

// A receive posted first: the clear-to-send goes out as soon as the
// announcement is read, before its head is in.
TEST(TcpRendezvousHead, APostedReceiveIsClearedBeforeTheHeadArrives) {
  HandPlayedPeer peer;
  ASSERT_TRUE(peer.transport);
  auto msg = pattern(kSize, 1);
  std::vector<uint8_t> in(kSize);
  auto r = peer.transport->irecv(1, kTag, in.data(), in.size());
  announce(peer, msg, 1000);
  expect_clear_to_send(peer);
  finish_head(peer, msg, 1000);
  write_rest(peer, msg);
  peer.wait(*r);
  EXPECT_EQ(in, msg);
}

// The head waits in a buffer for a receive posted later, which gets it
// copied and is cleared for the rest.
TEST(TcpRendezvousHead, AHeadThatArrivedBeforeItsReceiveIsCopiedIntoIt) {
  HandPlayedPeer peer;
  ASSERT_TRUE(peer.transport);
  auto msg = pattern(kSize, 2);
  announce(peer, msg, wire::rendezvous_head(kSize));
  let_rank0_read();
  std::vector<uint8_t> in(kSize);
  auto r = peer.transport->irecv(1, kTag, in.data(), in.size());
  expect_clear_to_send(peer);
  write_rest(peer, msg);
  peer.wait(*r);
  EXPECT_EQ(in, msg);
}

// A receive that matches while the head is half in is cleared at once; it
// gets the head once that is whole, whichever of head and rest ends last.
TEST(TcpRendezvousHead, AReceiveMatchedWhileTheHeadArrivesGetsAllOfIt) {
  HandPlayedPeer peer;
  ASSERT_TRUE(peer.transport);
  auto msg = pattern(kSize, 3);
  const size_t head = wire::rendezvous_head(kSize);
  announce(peer, msg, head / 2);
  let_rank0_read();
  std::vector<uint8_t> in(kSize);
  auto r = peer.transport->irecv(1, kTag, in.data(), in.size());
  expect_clear_to_send(peer);
  finish_head(peer, msg, head / 2);
  write_rest(peer, msg);
  peer.wait(*r);
  EXPECT_EQ(in, msg);
}

// A receive of another size fails naming both sizes; the message's head and
// rest are read and dropped, and the next message arrives intact.
TEST(TcpRendezvousHead, ASizeMismatchWhileTheHeadArrivesDropsTheMessageAndKeepsTheStreamInStep) {
  HandPlayedPeer peer;
  ASSERT_TRUE(peer.transport);
  auto msg = pattern(kSize, 4), next = pattern(3000, 5);
  const size_t head = wire::rendezvous_head(kSize);
  announce(peer, msg, head / 2);
  let_rank0_read();
  std::vector<uint8_t> small(kSize / 2);
  auto r = peer.transport->irecv(1, kTag, small.data(), small.size());
  const std::string m = peer.failure_of(*r);
  EXPECT_TRUE(contains(m, std::to_string(kSize) + " bytes") && contains(m, std::to_string(kSize / 2) + " bytes")) << m;
  expect_clear_to_send(peer);  // the sender must not be left waiting
  finish_head(peer, msg, head / 2);
  write_rest(peer, msg);
  peer.write(peer.main_socket, wire::MessageHeader{wire::kMessageMagic, 0, kTag + 1, next.size()}, next.data(),
             next.size());
  std::vector<uint8_t> after(next.size());
  auto r2 = peer.transport->irecv(1, kTag + 1, after.data(), after.size());
  peer.wait(*r2);
  EXPECT_EQ(after, next);
}

// The peer announced, sent the head, then left: a receive posted afterwards
// fails with the reason it gave instead of waiting for a rest that will not
// come.
TEST(TcpRendezvousHead, AReceiveOfAMessageWhoseSenderLeftAfterTheHeadFails) {
  HandPlayedPeer peer;
  ASSERT_TRUE(peer.transport);
  auto msg = pattern(kSize, 6);
  announce(peer, msg, wire::rendezvous_head(kSize));
  const std::string why = "rank 1 is done";
  peer.say_goodbye(why);
  let_rank0_read();
  std::vector<uint8_t> in(kSize);
  auto r = peer.transport->irecv(1, kTag, in.data(), in.size());
  const std::string m = peer.failure_of(*r);
  EXPECT_TRUE(contains(m, why)) << m;
}

}  // namespace
}  // namespace tdist::testing
