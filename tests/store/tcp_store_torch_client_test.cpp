// torch.distributed's TCPStore clients reaching a tdist store (a plain torch
// program under tdistrun): torch 2.x's are served in torch's protocol from
// the same keys as tdist's clients; a malformed frame, a stranger where the
// job has a token, or torch 1.x's older protocol drops that client only,
// with the reason in the log. And tdist's client speaking torch's protocol
// (for torchrun's store), here against tdist's server, which speaks it.
// Raw frames are written as torch's client writes them (TCPStore.cpp of
// torch 2.x; torch 1.13's first bytes captured from Debian's python3-torch).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "common/scoped_env.h"
#include "store/store_errors.h"
#include "store/tcp_store_protocol.h"
#include "store/torch_store_protocol.h"
#include "tdist/errors.h"
#include "tdist/store.h"
#include "util/socket.h"

namespace {

using namespace std::chrono_literals;
using namespace tdist::store_detail;
using tdist::TCPStore;
using tdist::TCPStoreOptions;
using tdist::testing::contains;
using tdist::testing::ScopedEnv;
using tdist::testing::store_error;

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
std::unique_ptr<TCPStore> member(uint16_t port) {
  return std::make_unique<TCPStore>("127.0.0.1", port, TCPStoreOptions{.timeout = 20s});
}

std::string q(TorchQuery t) { return std::string(1, static_cast<char>(t)); }
std::string str(const std::string& s) {
  std::string out;
  put_torch_string(out, s);
  return out;
}
std::string u64(uint64_t v) {
  std::string out;
  put_u64(out, v);
  return out;
}

// A raw torch 2.x client: frames as torch writes them, answers read as torch reads them.
class RawTorch {
 public:
  explicit RawTorch(uint16_t port, bool validate = true)
      : fd_(tdist::connect_tcp("127.0.0.1", port, tdist::Deadline::after(5s), "raw torch client")) {
    if (validate) {
      send(kTorch2Validate + q(TorchQuery::kPing) + std::string("\x2a\0\0\0", 4));
      EXPECT_EQ(get_u32(read(4).data()), 42u);
    }
  }
  void send(const std::string& bytes) {
    tdist::send_all(fd_.get(), bytes.data(), bytes.size(), tdist::Deadline::after(5s), "server");
  }
  std::string read(size_t n) {
    std::string b(n, '\0');
    tdist::recv_all(fd_.get(), b.data(), n, tdist::Deadline::after(10s), "server");
    return b;
  }
  int64_t i64() { return static_cast<int64_t>(get_u64(read(8).data())); }
  std::string string() { return read(static_cast<size_t>(i64())); }
  uint8_t byte() { return static_cast<uint8_t>(read(1)[0]); }
  // Whether the server closed the connection within 10 s.
  bool closed() {
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return false;
    char buf[64];
    return ::recv(fd_.get(), buf, sizeof(buf), 0) <= 0;
  }
  // Whether nothing arrives within `ms`.
  bool silent_for(int ms) {
    pollfd p{fd_.get(), POLLIN, 0};
    return ::poll(&p, 1, ms) == 0;
  }

 private:
  tdist::Fd fd_;
};

TEST(TCPStoreTorchClient, TheFirstBytesOfTorchsClientsAreRecognisedAndTdistsAreNot) {
  EXPECT_EQ(classify_first_bytes(kTorch113Add.substr(0, 9)), FirstBytes::kTorch1Client);
  EXPECT_EQ(classify_first_bytes(kTorch113Set.substr(0, 9)), FirstBytes::kTorch1Client);
  EXPECT_EQ(classify_first_bytes(kTorch2Validate), FirstBytes::kTorch2Client);
  EXPECT_EQ(classify_first_bytes(kTorch113Add.substr(0, 4)), FirstBytes::kNeedMore);
  EXPECT_EQ(classify_first_bytes(""), FirstBytes::kNeedMore);
  std::string hello;
  encode_request_head(hello, Command::kHello, 0, 1, kMagic);
  EXPECT_EQ(classify_first_bytes(hello.substr(0, kTorchProbeBytes)), FirstBytes::kOther);
  EXPECT_EQ(classify_first_bytes(std::string(9, '\xff')), FirstBytes::kOther);
}

TEST(TCPStoreTorchClient, TorchsClientAndTdistsShareOneKeySpace) {
  auto server = master();
  auto tdist_client = member(server->port());
  RawTorch torch(server->port());
  // torch writes "/k" for its key "k": tdist's "k".
  torch.send(q(TorchQuery::kSet) + str("/from_torch") + str("t"));
  EXPECT_EQ(tdist_client->get("from_torch"), "t");
  tdist_client->set("from_tdist", "d");
  torch.send(q(TorchQuery::kGet) + str("/from_tdist"));
  EXPECT_EQ(torch.string(), "d");
  torch.send(q(TorchQuery::kAdd) + str("/n") + u64(5));
  EXPECT_EQ(torch.i64(), 5);
  EXPECT_EQ(tdist_client->add("n", 2), 7);
  torch.send(q(TorchQuery::kCompareSet) + str("/n") + str("7") + str("x"));
  EXPECT_EQ(torch.string(), "x");
  torch.send(q(TorchQuery::kAppend) + str("/from_tdist") + str("+"));
  torch.send(q(TorchQuery::kMultiSet) + u64(2) + str("/a") + str("1") + str("/b") + str("2"));
  torch.send(q(TorchQuery::kMultiGet) + u64(3) + str("/from_tdist") + str("/a") + str("/missing"));
  EXPECT_EQ(torch.string(), "d+");
  EXPECT_EQ(torch.string(), "1");
  EXPECT_EQ(torch.string(), "");  // as torch's server answers a key it does not have
  EXPECT_EQ(tdist_client->get("b"), "2");
  torch.send(q(TorchQuery::kCheck) + u64(2) + str("/a") + str("/b"));
  EXPECT_EQ(torch.byte(), kTorchReady);
  torch.send(q(TorchQuery::kCheck) + u64(1) + str("/missing"));
  EXPECT_EQ(torch.byte(), kTorchNotReady);
  // torch's workers count themselves in "init/" (no "/"): apart from tdist's keys, counted by GETNUMKEYS.
  torch.send(q(TorchQuery::kAdd) + str("init/") + u64(1));
  EXPECT_EQ(torch.i64(), 1);
  EXPECT_FALSE(tdist_client->check({"init/"}));
  torch.send(q(TorchQuery::kGetNumKeys));
  const int64_t keys = torch.i64();
  EXPECT_EQ(keys, tdist_client->num_keys());
  EXPECT_EQ(keys, 6);  // from_torch, from_tdist, n, a, b and init/; not tdist's own counter of users
  torch.send(q(TorchQuery::kListKeys));
  std::vector<std::string> listed(static_cast<size_t>(torch.i64()));
  for (auto& k : listed) k = torch.string();
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, (std::vector<std::string>{"/a", "/b", "/from_tdist", "/from_torch", "/n", "init/"}));
  torch.send(q(TorchQuery::kDeleteKey) + str("/a"));
  EXPECT_EQ(torch.i64(), 1);
  EXPECT_FALSE(tdist_client->check({"a"}));
  // Queues: pushed by either, popped by either; a pop of an empty queue says 0.
  torch.send(q(TorchQuery::kQueuePush) + str("/q") + str("first"));
  torch.send(q(TorchQuery::kQueueLen) + str("/q"));  // torch's push has no answer: this one orders the next push
  EXPECT_EQ(torch.i64(), 1);
  tdist_client->queue_push("q", "second");
  torch.send(q(TorchQuery::kQueueLen) + str("/q"));
  EXPECT_EQ(torch.i64(), 2);
  EXPECT_EQ(tdist_client->queue_pop("q"), "first");
  torch.send(q(TorchQuery::kQueuePop) + str("/q"));
  EXPECT_EQ(torch.i64(), 1);
  EXPECT_EQ(torch.string(), "second");
  torch.send(q(TorchQuery::kQueuePop) + str("/q"));
  EXPECT_EQ(torch.i64(), 0);
}

TEST(TCPStoreTorchClient, TorchsWaitIsParkedUntilTheKeysComeOrItCancels) {
  auto server = master();
  auto tdist_client = member(server->port());
  RawTorch torch(server->port());
  torch.send(q(TorchQuery::kWait) + u64(2) + str("/w1") + str("/w2"));
  EXPECT_TRUE(torch.silent_for(100));
  tdist_client->set("w1", "1");
  EXPECT_TRUE(torch.silent_for(100));
  tdist_client->set("w2", "2");
  EXPECT_EQ(torch.byte(), kTorchStopWaiting);
  // Given up by the client: CANCEL_WAIT answers WAIT_CANCELED, and the wait is gone.
  torch.send(q(TorchQuery::kWait) + u64(1) + str("/never"));
  EXPECT_TRUE(torch.silent_for(100));
  torch.send(q(TorchQuery::kCancelWait));
  EXPECT_EQ(torch.byte(), kTorchWaitCanceled);
  tdist_client->set("never", "late");
  EXPECT_TRUE(torch.silent_for(100));
  // A wait on a queue's name ends when a value comes (torch's blocking queue_pop).
  torch.send(q(TorchQuery::kWait) + u64(1) + str("/jobs"));
  EXPECT_TRUE(torch.silent_for(100));
  tdist_client->queue_push("jobs", "j");
  EXPECT_EQ(torch.byte(), kTorchStopWaiting);
  torch.send(q(TorchQuery::kQueuePop) + str("/jobs"));
  EXPECT_EQ(torch.i64(), 1);
  EXPECT_EQ(torch.string(), "j");
  // BARRIER: each arrival counts; all are answered when the count reaches the world size.
  RawTorch other(server->port());
  torch.send(q(TorchQuery::kBarrier) + str("/bar") + u64(2));
  EXPECT_TRUE(torch.silent_for(100));
  other.send(q(TorchQuery::kBarrier) + str("/bar") + u64(2));
  EXPECT_EQ(other.byte(), kTorchStopWaiting);
  EXPECT_EQ(torch.byte(), kTorchStopWaiting);
}

TEST(TCPStoreTorchClient, AMalformedOrOversizedTorchFrameDropsOnlyItsClientAndNoKeyIsLost) {
  auto server = master();
  auto tdist_client = member(server->port());
  tdist_client->set("kept", "1");
  RawTorch good(server->port());
  good.send(q(TorchQuery::kSet) + str("/also_kept") + str("2"));
  ::testing::internal::CaptureStderr();
  {
    RawTorch unknown(server->port());
    unknown.send(std::string(1, '\x77'));
    EXPECT_TRUE(unknown.closed());
  }
  {
    RawTorch long_key(server->port());
    long_key.send(q(TorchQuery::kGet) + u64(TCPStore::kMaxKeyBytes + 1));
    EXPECT_TRUE(long_key.closed());
  }
  {
    RawTorch many(server->port());
    many.send(q(TorchQuery::kWait) + u64(uint64_t{1} << 40));
    EXPECT_TRUE(many.closed());
  }
  {
    RawTorch while_parked(server->port());
    while_parked.send(q(TorchQuery::kWait) + u64(1) + str("/never"));
    while_parked.send(q(TorchQuery::kGet) + str("/kept"));
    EXPECT_TRUE(while_parked.closed());
  }
  {
    RawTorch not_a_counter(server->port());
    not_a_counter.send(q(TorchQuery::kAdd) + str("/kept") + u64(1));
    EXPECT_TRUE(not_a_counter.closed());
  }
  {
    RawTorch wrong_magic(server->port(), false);
    wrong_magic.send(std::string("\x00\xce\xf7\x85\x3d", 5) + std::string(32, '\0'));
    EXPECT_TRUE(wrong_magic.closed());
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(log, "unknown query type 119")) << log;
  EXPECT_TRUE(contains(log, "GET: a key of 4097 bytes")) << log;
  EXPECT_TRUE(contains(log, "sent GET while its wait was parked")) << log;
  EXPECT_TRUE(contains(log, "ADD(key 'kept')")) << log;
  EXPECT_TRUE(contains(log, "dropping client 127.0.0.1:")) << log;
  // Everyone else is served, and every key is there.
  good.send(q(TorchQuery::kGet) + str("/kept"));
  EXPECT_EQ(good.string(), "1");
  EXPECT_EQ(tdist_client->get("also_kept"), "2");
  EXPECT_EQ(member(server->port())->get("kept"), "1");
}

TEST(TCPStoreTorchClient, WithAJobTokenTorchsClientsAreAdmittedOnlyAsTheSettingSays) {
  ScopedEnv token("TDIST_JOB_TOKEN", "job-secret");
  {
    ScopedEnv refuse("TDIST_STORE_TORCH_CLIENTS", "refuse");
    auto server = master();
    auto tdist_client = member(server->port());  // proves the token
    tdist_client->set("secret", "s");
    ::testing::internal::CaptureStderr();
    RawTorch stranger(server->port(), false);
    stranger.send(kTorch2Validate + q(TorchQuery::kGet) + str("/secret"));
    EXPECT_TRUE(stranger.closed());
    RawTorch again(server->port(), false);
    again.send(kTorch2Validate);
    EXPECT_TRUE(again.closed());
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(contains(log, "cannot prove the job token this store requires (TDIST_STORE_TORCH_CLIENTS=REFUSE)"))
        << log;
    EXPECT_EQ(log.find("TDIST_STORE_TORCH_CLIENTS=REFUSE"), log.rfind("TDIST_STORE_TORCH_CLIENTS=REFUSE"))
        << "said once: " << log;
    EXPECT_EQ(tdist_client->get("secret"), "s");
  }
  {
    // The default, LOCAL: a client of this machine is admitted (the test's are all local).
    ScopedEnv local("TDIST_STORE_TORCH_CLIENTS", nullptr);
    auto server = master();
    member(server->port())->set("k", "v");
    RawTorch torch(server->port());
    torch.send(q(TorchQuery::kGet) + str("/k"));
    EXPECT_EQ(torch.string(), "v");
  }
}

TEST(TCPStoreTorchClient, TorchOneClientsAreDroppedWithOneLineSayingWhatToDo) {
  auto server = master();
  auto tdist_client = member(server->port());
  ::testing::internal::CaptureStderr();
  RawTorch add(server->port(), false);
  add.send(kTorch113Add);
  RawTorch set(server->port(), false);
  set.send(kTorch113Set);
  EXPECT_TRUE(add.closed() && set.closed());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(log, "a torch 1.x TCPStore client connected from 127.0.0.1:")) << log;
  EXPECT_EQ(log.find("torch 1.x TCPStore client connected"), log.rfind("torch 1.x TCPStore client connected")) << log;
  tdist_client->set("after", "2");
  EXPECT_EQ(member(server->port())->get("after"), "2");
}

// tdist's client in torch's protocol (as against torchrun's store), against
// tdist's server: every operation of a Store, and the errors of a timeout.
TEST(TCPStoreTorchClient, TdistsClientSpeaksTorchsProtocol) {
  auto server = master();
  auto tdist_client = member(server->port());
  TCPStore torch_proto("127.0.0.1", server->port(),
                       TCPStoreOptions{.timeout = 20s, .protocol = tdist::StoreProtocol::kTorch});
  torch_proto.set("k", "v");
  EXPECT_EQ(tdist_client->get("k"), "v");
  tdist_client->set("d", "x");
  EXPECT_EQ(torch_proto.get("d"), "x");
  EXPECT_EQ(torch_proto.add("n", 3), 3);
  EXPECT_EQ(torch_proto.add("n", -1), 2);
  torch_proto.append("d", "y");
  EXPECT_EQ(torch_proto.get("d"), "xy");
  EXPECT_EQ(torch_proto.compare_set("d", "xy", "z"), "z");
  EXPECT_EQ(torch_proto.compare_set("d", "nope", "w"), "z");
  EXPECT_TRUE(torch_proto.check({"k", "d"}));
  EXPECT_FALSE(torch_proto.check({"k", "missing"}));
  torch_proto.multi_set({"a", "b"}, {"1", "2"});
  EXPECT_EQ(torch_proto.multi_get({"a", "b"}), (std::vector<std::string>{"1", "2"}));
  EXPECT_TRUE(torch_proto.delete_key("a"));
  EXPECT_FALSE(torch_proto.delete_key("a"));
  // torch counts its workers' "init/" key; this client counted itself there.
  EXPECT_EQ(torch_proto.num_keys(), tdist_client->num_keys());
  torch_proto.queue_push("q", "1");
  torch_proto.queue_push("q", "2");
  EXPECT_EQ(torch_proto.queue_len("q"), 2);
  EXPECT_EQ(torch_proto.queue_pop("q"), "1");
  EXPECT_EQ(torch_proto.queue_pop("q", false), "2");
  EXPECT_THROW(torch_proto.queue_pop("q", false), tdist::DistQueueEmptyError);
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    tdist_client->set("late", "L");
    tdist_client->queue_push("lq", "item");
  });
  EXPECT_EQ(torch_proto.get("late"), "L");
  EXPECT_EQ(torch_proto.queue_pop("lq", true, 20s), "item");
  later.join();
  // A wait that gives up cancels on the server and names what is missing.
  const std::string waited = store_error([&] { torch_proto.wait({"k", "absent"}, 200ms); });
  EXPECT_TRUE(contains(waited, "timed out after 200 ms; missing keys: ['absent']")) << waited;
  const std::string popped = store_error([&] { torch_proto.queue_pop("empty", true, 200ms); });
  EXPECT_TRUE(contains(popped, "queue_pop(key 'empty') timed out")) << popped;
  // The connection is still in step after the cancels.
  EXPECT_EQ(torch_proto.get("k"), "v");
  // torch's server takes values up to 8 MiB: said before sending.
  EXPECT_THROW(torch_proto.set("big", std::string((8 << 20) + 1, 'b')), tdist::DistValueError);
  EXPECT_THROW(TCPStore("127.0.0.1", server->port(),
                        TCPStoreOptions{.is_master = true, .protocol = tdist::StoreProtocol::kTorch}),
               tdist::DistValueError);
}

}  // namespace
