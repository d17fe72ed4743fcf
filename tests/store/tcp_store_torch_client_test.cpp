// torch.distributed's TCPStore client reaching a tdist store (a plain torch
// program under tdistrun): the server tells the user once, in one line, what
// happened and what to do, drops only that client, and serves everyone else.
// The bytes are what torch's clients send first (torch 1.13's captured from
// Debian's python3-torch; torch 2.x's VALIDATE from its TCPStoreBackend.hpp).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <thread>

#include "store/store_errors.h"
#include "store/tcp_store_protocol.h"
#include "tdist/store.h"
#include "util/socket.h"

namespace {

using namespace std::chrono_literals;
using tdist::TCPStore;
using tdist::TCPStoreOptions;
using tdist::store_detail::classify_first_bytes;
using tdist::store_detail::FirstBytes;
using tdist::testing::contains;

// torch 1.13, TCPStore(host, port, world_size, False): ADD "init/" 1 (query type 3, u64 key length, key, i64).
const std::string kTorch113Add = std::string("\x03\x05\0\0\0\0\0\0\0init/\x01\0\0\0\0\0\0\0", 22);
// torch 1.13, store.set("/k", "v") first: SET (0), u64 2, "/k", u64 1, "v".
const std::string kTorch113Set = std::string("\x00\x02\0\0\0\0\0\0\0/k\x01\0\0\0\0\0\0\0v", 20);
// torch 2.x: VALIDATE (0) and the u32 magic 0x3C85F7CE, little-endian.
const std::string kTorch2Validate = std::string("\x00\xce\xf7\x85\x3c", 5);

std::unique_ptr<TCPStore> master() {
  return std::make_unique<TCPStore>("127.0.0.1", 0,
                                    TCPStoreOptions{.is_master = true, .timeout = 20s, .wait_for_workers = false});
}

// Sends `bytes` on a new connection (in two pieces, as TCP may deliver them)
// and waits for the server to close it; false if it stays open for 10 s.
bool sent_and_dropped(uint16_t port, const std::string& bytes) {
  tdist::Fd fd = tdist::connect_tcp("127.0.0.1", port, tdist::Deadline::after(5s), "raw client");
  const size_t first = std::min<size_t>(3, bytes.size());
  tdist::send_all(fd.get(), bytes.data(), first, tdist::Deadline::after(5s), "server");
  std::this_thread::sleep_for(20ms);
  tdist::send_all(fd.get(), bytes.data() + first, bytes.size() - first, tdist::Deadline::after(5s), "server");
  pollfd p{fd.get(), POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) return false;
  char buf[64];
  return ::recv(fd.get(), buf, sizeof(buf), 0) <= 0;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(TCPStoreTorchClient, TheFirstBytesOfTorchsClientsAreRecognisedAndTdistsAreNot) {
  EXPECT_EQ(classify_first_bytes(kTorch113Add.substr(0, 9)), FirstBytes::kTorchClient);
  EXPECT_EQ(classify_first_bytes(kTorch113Set.substr(0, 9)), FirstBytes::kTorchClient);
  EXPECT_EQ(classify_first_bytes(kTorch2Validate), FirstBytes::kTorchClient);
  EXPECT_EQ(classify_first_bytes(kTorch113Add.substr(0, 4)), FirstBytes::kNeedMore);
  EXPECT_EQ(classify_first_bytes(""), FirstBytes::kNeedMore);
  std::string hello;
  tdist::store_detail::encode_request_head(hello, tdist::store_detail::Command::kHello, 0, 1,
                                           tdist::store_detail::kMagic);
  EXPECT_EQ(classify_first_bytes(hello.substr(0, tdist::store_detail::kTorchProbeBytes)), FirstBytes::kOther);
  EXPECT_EQ(classify_first_bytes(std::string(9, '\xff')), FirstBytes::kOther);
}

TEST(TCPStoreTorchClient, TorchsClientIsDroppedWithOneLineSayingWhatToDoAndOthersAreServed) {
  auto server = master();
  auto member = std::make_unique<TCPStore>("127.0.0.1", server->port(), TCPStoreOptions{.timeout = 20s});
  member->set("before", "1");
  ::testing::internal::CaptureStderr();
  const bool dropped_113 = sent_and_dropped(server->port(), kTorch113Add);
  const bool dropped_set = sent_and_dropped(server->port(), kTorch113Set);
  const bool dropped_2 = sent_and_dropped(server->port(), kTorch2Validate);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(dropped_113 && dropped_set && dropped_2);
  // One line, naming the client, the cause and both ways out; not one per connection.
  EXPECT_EQ(count(log, "torch.distributed TCPStore client connected from 127.0.0.1:"), 1u) << log;
  EXPECT_TRUE(contains(log, "speaks tdist's protocol")) << log;
  EXPECT_TRUE(contains(log, "import tdist.torch")) << log;
  EXPECT_TRUE(contains(log, "torchrun")) << log;
  EXPECT_EQ(count(log, "\n"), 1u) << log;
  // The store goes on serving its clients, old and new.
  member->set("after", "2");
  EXPECT_EQ(member->get("before"), "1");
  auto late = std::make_unique<TCPStore>("127.0.0.1", server->port(), TCPStoreOptions{.timeout = 20s});
  EXPECT_EQ(late->get("after"), "2");
}

TEST(TCPStoreTorchClient, AMalformedFirstFrameDropsOnlyItsConnectionAndIsNotTakenForTorch) {
  auto server = master();
  auto member = std::make_unique<TCPStore>("127.0.0.1", server->port(), TCPStoreOptions{.timeout = 20s});
  ::testing::internal::CaptureStderr();
  const bool dropped = sent_and_dropped(server->port(), std::string(64, '\xff'));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(dropped);
  EXPECT_FALSE(contains(log, "torch.distributed")) << log;
  member->set("k", "v");
  EXPECT_EQ(member->get("k"), "v");
}

}  // namespace
