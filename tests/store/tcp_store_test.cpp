// TCPStore: processes, ports, connection failures, and a server that must
// survive misbehaving clients.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "common/harness.h"
#include "store/tcp_store_protocol.h"
#include "tdist/errors.h"
#include "tdist/store.h"
#include "util/socket.h"

using namespace std::chrono_literals;
using tdist::DistNetworkError;
using tdist::DistStoreError;
using tdist::TCPStore;
using tdist::TCPStoreOptions;
namespace sd = tdist::store_detail;
namespace tt = tdist::testing;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::unique_ptr<TCPStore> make_master(std::chrono::milliseconds timeout = 30s) {
  return std::make_unique<TCPStore>("127.0.0.1", 0,
                                    TCPStoreOptions{.world_size = std::nullopt, .is_master = true, .timeout = timeout, .wait_for_workers = false});
}

std::unique_ptr<TCPStore> make_client(uint16_t port, std::chrono::milliseconds timeout = 30s) {
  return std::make_unique<TCPStore>("127.0.0.1", port, TCPStoreOptions{.world_size = std::nullopt, .timeout = timeout});
}

// A port nobody listens on (bound, then released).
uint16_t unused_port() {
  tdist::Fd fd = tdist::listen_tcp("127.0.0.1", 0);
  return tdist::local_port(fd.get());
}

// ---------------------------------------------------------------- basics

TEST(TCPStore, PortZeroReadsBackTheBoundPort) {
  auto master = make_master();
  EXPECT_NE(master->port(), 0);
  EXPECT_EQ(master->host(), "127.0.0.1");
  auto client = make_client(master->port());
  EXPECT_EQ(client->port(), master->port());
  client->set("k", "v");
  EXPECT_EQ(master->get("k"), "v");
}

TEST(TCPStore, PositionalConstructorAndWorldSizeOne) {
  // torch's example: TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=30))
  TCPStore store("127.0.0.1", 0, 1, true, 30s);
  store.set("first_key", "first_value");
  EXPECT_EQ(store.get("first_key"), "first_value");
  // As torch's (2 there too): its "init/" key of wait_for_workers is counted, the user counter is not.
  EXPECT_EQ(store.num_keys(), 2);
  EXPECT_EQ(store.list_keys(), std::vector<std::string>{"first_key"});
}

TEST(TCPStore, HostnameLocalhostWorks) {
  TCPStore master("localhost", 0, 1, true, 30s);
  TCPStore client("localhost", master.port(), std::nullopt, false, 30s);
  client.set("x", "y");
  EXPECT_EQ(master.get("x"), "y");
}

// A host name is resolved once, by the client's first connection: the
// connections it opens later (one per concurrent request) go to that address,
// and errors name both the name and the address.
TEST(TCPStore, AHostNameIsResolvedOnceAndNamedWithItsAddress) {
  auto master = make_master();
  const uint16_t port = master->port();
  TCPStore client("localhost", port, std::nullopt, false, 3s);
  std::vector<std::string> errors(4);
  std::vector<std::thread> parked;
  for (size_t i = 0; i < errors.size(); ++i)  // busy connections: each parked get opens its own
    parked.emplace_back([&, i] {
      try {
        client.get("never-set-" + std::to_string(i));
      } catch (const tdist::DistError& e) {
        errors[i] = e.what();
      }
    });
  std::this_thread::sleep_for(100ms);  // lets the gets park (if one does not, it fails just the same)
  master.reset();
  for (auto& t : parked) t.join();
  for (const std::string& e : errors)
    EXPECT_TRUE(contains(e, "localhost:" + std::to_string(port) + " at 127.0.0.1:" + std::to_string(port))) << e;
}

TEST(TCPStore, InvalidWorldSizeIsAValueError) {
  EXPECT_THROW(TCPStore("127.0.0.1", 0, 0, true, 1s), tdist::DistValueError);
}

TEST(TCPStore, ClientConnectTimeoutNamesHostPortAndTime) {
  uint16_t port = unused_port();
  auto start = std::chrono::steady_clock::now();
  try {
    TCPStore client("127.0.0.1", port, std::nullopt, false, 1s);
    FAIL() << "connected to a port nobody listens on";
  } catch (const DistNetworkError& e) {
    std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(port))) << msg;
    EXPECT_TRUE(contains(msg, "1000 ms")) << msg;
    EXPECT_TRUE(contains(msg, "waited")) << msg;
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 900ms);
}

TEST(TCPStore, SilentServerIsANetworkErrorNotAHang) {
  // Something listens (the kernel completes the handshake) but never answers.
  tdist::Fd silent = tdist::listen_tcp("127.0.0.1", 0);
  uint16_t port = tdist::local_port(silent.get());
  auto start = std::chrono::steady_clock::now();
  try {
    TCPStore client("127.0.0.1", port, std::nullopt, false, 1s);
    FAIL() << "a server that never answers was accepted";
  } catch (const DistNetworkError& e) {
    EXPECT_TRUE(contains(e.what(), "127.0.0.1:" + std::to_string(port))) << e.what();
    EXPECT_TRUE(contains(e.what(), "1000 ms")) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

TEST(TCPStore, ServerPortInUseIsANetworkError) {
  auto master = make_master();
  try {
    TCPStore second("127.0.0.1", master->port(), std::nullopt, true, 1s, false);
    FAIL() << "two servers on one port";
  } catch (const DistNetworkError& e) {
    EXPECT_TRUE(contains(e.what(), std::to_string(master->port()))) << e.what();
  }
}

// ---------------------------------------------------------------- master_listen_fd

// A TCP socket bound to a port the kernel picks on 127.0.0.1, not listening.
tdist::Fd bound_socket() {
  tdist::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
    throw std::runtime_error("cannot bind a socket");
  return fd;
}

bool fd_is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// The master serves on the socket it is given (bound, listening or not), and
// closes it with the server: the port is free again afterwards.
TEST(TCPStore, MasterListenFdServesOnTheGivenSocket) {
  for (bool listening : {false, true}) {
    SCOPED_TRACE(listening ? "listening socket" : "bound socket");
    tdist::Fd sock = bound_socket();
    if (listening) ASSERT_EQ(::listen(sock.get(), 16), 0);
    const uint16_t port = tdist::local_port(sock.get());
    const int fd = sock.release();
    {
      TCPStore master("127.0.0.1", port,
                      TCPStoreOptions{.world_size = 2, .is_master = true, .timeout = 30s, .wait_for_workers = false, .master_listen_fd = fd});
      EXPECT_EQ(master.port(), port);
      auto client = make_client(port);
      client->set("k", "from the client");
      EXPECT_EQ(master.get("k"), "from the client");
      client->queue_push("q", "v");
      EXPECT_EQ(master.queue_pop("q"), "v");
      EXPECT_TRUE(fd_is_open(fd));
    }
    EXPECT_FALSE(fd_is_open(fd)) << "the store did not close the socket it took over";
    tdist::Fd again = tdist::listen_tcp("127.0.0.1", port);  // throws if still bound
  }
}

TEST(TCPStore, MasterListenFdWithPortZeroReadsBackItsPort) {
  tdist::Fd sock = bound_socket();
  const uint16_t port = tdist::local_port(sock.get());
  TCPStore master("127.0.0.1", 0, std::nullopt, true, 30s, false, false, sock.release());
  EXPECT_EQ(master.port(), port);
  auto client = make_client(port);
  client->set("k", "v");
  EXPECT_EQ(master.get("k"), "v");
}

TEST(TCPStore, MasterListenFdThatDoesNotFitIsAValueError) {
  // Bound to another port than the one given.
  tdist::Fd sock = bound_socket();
  const uint16_t port = tdist::local_port(sock.get());
  const uint16_t other = port == 65535 ? port - 1 : port + 1;
  const int fd = sock.release();
  try {
    TCPStore master("127.0.0.1", other, TCPStoreOptions{.is_master = true, .timeout = 5s, .master_listen_fd = fd});
    ADD_FAILURE() << "a socket bound to another port was accepted";
  } catch (const tdist::DistValueError& e) {
    EXPECT_TRUE(contains(e.what(), "bound to port " + std::to_string(port))) << e.what();
    EXPECT_TRUE(contains(e.what(), "expected to be bound to port " + std::to_string(other))) << e.what();
  }
  EXPECT_FALSE(fd_is_open(fd)) << "the store takes the socket over, also when it refuses it";
  // Not a socket.
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ::close(pipe_fds[1]);
  EXPECT_THROW(TCPStore("127.0.0.1", 0, TCPStoreOptions{.is_master = true, .timeout = 5s, .master_listen_fd = pipe_fds[0]}),
               tdist::DistValueError);
  // Not bound.
  EXPECT_THROW(TCPStore("127.0.0.1", 0,
                        TCPStoreOptions{.is_master = true, .timeout = 5s,
                                        .master_listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)}),
               tdist::DistValueError);
  // Only the master takes one.
  tdist::Fd unused = bound_socket();
  EXPECT_THROW(TCPStore("127.0.0.1", 1, TCPStoreOptions{.timeout = 5s, .master_listen_fd = unused.get()}),
               tdist::DistValueError);
  EXPECT_TRUE(fd_is_open(unused.get()));
}

TEST(TCPStore, WaitForWorkersTimeoutSaysHowManyArrived) {
  auto start = std::chrono::steady_clock::now();
  try {
    TCPStore master("127.0.0.1", 0, 3, true, 1s);
    FAIL() << "wait_for_workers returned with 1 of 3 users";
  } catch (const DistStoreError& e) {
    std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "only 1 of 3")) << msg;
    EXPECT_TRUE(contains(msg, "1000 ms")) << msg;
    EXPECT_TRUE(contains(msg, "127.0.0.1:")) << msg;
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 900ms);
}

TEST(TCPStore, WaitForWorkersReturnsWhenAllArrive) {
  // The clients connect with retries while the master's constructor waits.
  uint16_t port = unused_port();
  std::unique_ptr<TCPStore> master;
  tt::run_in_threads(3, [&](int rank) {
    if (rank == 0) {
      master = std::make_unique<TCPStore>("127.0.0.1", port, 3, true, 30s);
      master->set("master-ready", "1");
    } else {
      TCPStore c("127.0.0.1", port, 3, false, 30s);
      c.get("master-ready");
    }
  });
}

TEST(TCPStore, GetTimeoutKeepsTheConnectionUsable) {
  auto master = make_master();
  auto client = make_client(master->port(), 1s);
  EXPECT_THROW(client->get("never"), DistStoreError);
  client->set("after", "ok");
  EXPECT_EQ(client->get("after"), "ok");
}

TEST(TCPStore, ClientSideLimitsAreValueErrors) {
  auto master = make_master();
  auto client = make_client(master->port());
  EXPECT_THROW(client->set(std::string(TCPStore::kMaxKeyBytes + 1, 'k'), "v"), tdist::DistValueError);
  client->set(std::string(TCPStore::kMaxKeyBytes, 'k'), "v");
  EXPECT_EQ(client->get(std::string(TCPStore::kMaxKeyBytes, 'k')), "v");
}

TEST(TCPStore, LargeValuesRoundTrip) {
  auto master = make_master();
  auto client = make_client(master->port());
  std::string big(24 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + 7);
  client->set("big", big);
  EXPECT_EQ(master->get("big"), big);
  client->append("big", "tail");
  EXPECT_EQ(master->get("big").size(), big.size() + 4);
}

TEST(TCPStore, ManyWaitersOnOneKey) {
  auto master = make_master();
  std::vector<std::unique_ptr<TCPStore>> clients;
  for (int i = 0; i < 6; ++i) clients.push_back(make_client(master->port()));
  tt::run_in_threads(6, [&](int i) {
    if (i == 0) master->set("go", "now");
    if (clients[i]->get("go") != "now") throw std::runtime_error("wrong value");
    clients[i]->wait({"go"});
  });
}

// ---------------------------------------------------------------- multi_tenant

TEST(TCPStore, MultiTenantInstancesShareOneServer) {
  TCPStore first("127.0.0.1", 0, std::nullopt, true, 30s, false, /*multi_tenant=*/true);
  auto second = std::make_unique<TCPStore>("127.0.0.1", first.port(), std::nullopt, true, 30s, false, true);
  EXPECT_EQ(second->port(), first.port());
  first.set("shared", "yes");
  EXPECT_EQ(second->get("shared"), "yes");
  auto client = make_client(first.port());
  second.reset();  // the server lives on with `first`
  EXPECT_EQ(client->get("shared"), "yes");
  client->set("still", "served");
  EXPECT_EQ(first.get("still"), "served");
}

TEST(TCPStore, MultiTenantServerEndsWithItsLastUser) {
  auto first = std::make_unique<TCPStore>("127.0.0.1", 0, std::nullopt, true, 30s, false, true);
  auto second = std::make_unique<TCPStore>("127.0.0.1", first->port(), std::nullopt, true, 30s, false, true);
  auto client = make_client(first->port(), 3s);
  first.reset();
  second.reset();
  EXPECT_THROW(client->get("anything"), DistNetworkError);
}

// ---------------------------------------------------------------- server gone

TEST(TCPStore, MasterDestroyedFailsBlockedClientWithNetworkError) {
  auto master = make_master();
  uint16_t port = master->port();
  auto client = make_client(port, 3s);
  std::optional<std::string> error;
  auto start = std::chrono::steady_clock::now();
  std::thread blocked([&] {
    try {
      client->get("never-set");
    } catch (const DistNetworkError& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = std::string("wrong error type: ") + e.what();
    }
  });
  master.reset();
  blocked.join();
  ASSERT_TRUE(error.has_value());
  EXPECT_TRUE(contains(*error, "127.0.0.1:" + std::to_string(port))) << *error;
  EXPECT_FALSE(contains(*error, "wrong error type")) << *error;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  // Later calls fail fast with the cause; a large send must not raise SIGPIPE.
  EXPECT_THROW(client->set("k", std::string(8 << 20, 'x')), DistNetworkError);
  EXPECT_THROW(client->num_keys(), DistNetworkError);
}

TEST(TCPStore, LargeSendToAVanishedServerIsANetworkErrorNotSIGPIPE) {
  auto master = make_master();
  auto client = make_client(master->port(), 3s);
  client->set("warm", "up");
  master.reset();
  EXPECT_THROW(client->set("big", std::string(32 << 20, 'x')), DistNetworkError);
}

// ---------------------------------------------------------------- misbehaving clients

class RawClient {
 public:
  explicit RawClient(uint16_t port)
      : fd_(tdist::connect_tcp("127.0.0.1", port, tdist::Deadline::after(10s), "raw test client")) {}
  void send(const std::string& bytes) { tdist::send_all(fd_.get(), bytes.data(), bytes.size(), tdist::Deadline::after(10s), "server"); }
  // The greeting of an open store (no job token): a nonce out, the server's
  // nonce, mode and proof back.
  void hello() {
    std::string b;
    sd::encode_request_head(b, sd::Command::kHello, 0, 1, sd::kMagic);
    sd::put_u64(b, 16);
    b += std::string(16, 'n');
    send(b);
    char head[sd::kResponseHeaderBytes];
    recv(head, sizeof(head));
    EXPECT_EQ(head[0], 0);
    for (uint32_t i = 0, n = sd::get_u32(head + 9); i < n; ++i) {
      char len[8];
      recv(len, sizeof(len));
      std::string value(sd::get_u64(len), '\0');
      recv(value.data(), value.size());
      if (i == 1) {
        EXPECT_EQ(value, "open");
      }
    }
  }
  void recv(void* p, size_t n) { tdist::recv_all(fd_.get(), p, n, tdist::Deadline::after(10s), "server"); }
  // True when the server closes the connection (EOF or reset) within 10 s.
  bool closed_by_server() {
    char buf[4096];
    auto deadline = tdist::Deadline::after(10s);
    for (;;) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, deadline.poll_ms()) <= 0) return false;
      ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
  }
  bool readable_within(std::chrono::milliseconds t) {
    pollfd p{fd_.get(), POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(t.count())) > 0;
  }

 private:
  tdist::Fd fd_;
};

class TCPStoreServerSurvives : public ::testing::Test {
 protected:
  void SetUp() override {
    master_ = make_master();
    other_ = make_client(master_->port());
    other_->set("before", "1");
  }
  // The other client's set/get still work, and the table is intact.
  void expect_still_serving(const std::string& tag) {
    other_->set("after-" + tag, tag);
    EXPECT_EQ(master_->get("after-" + tag), tag);
    EXPECT_EQ(other_->get("before"), "1");
    EXPECT_TRUE(other_->check({"before", "after-" + tag}));
  }
  uint16_t port() const { return master_->port(); }
  std::unique_ptr<TCPStore> master_, other_;
};

TEST_F(TCPStoreServerSurvives, ClientDisconnectingMidRequest) {
  {
    RawClient raw(port());
    raw.hello();
    std::string b;
    sd::encode_request_head(b, sd::Command::kSet, 1, 1, 0);
    raw.send(b.substr(0, 7));  // half a header
  }
  expect_still_serving("half-header");
  {
    RawClient raw(port());
    raw.hello();
    std::string b;
    sd::encode_request_head(b, sd::Command::kSet, 1, 1, 0);
    sd::encode_key(b, "partial");
    sd::put_u64(b, 1 << 20);
    b += std::string(1000, 'v');  // 1000 of the announced 1 MiB
    raw.send(b);
  }
  expect_still_serving("half-value");
  EXPECT_FALSE(other_->check({"partial"}));
}

TEST_F(TCPStoreServerSurvives, ClientDisconnectingWhileParked) {
  {
    RawClient raw(port());
    raw.hello();
    std::string b;
    sd::encode_request_head(b, sd::Command::kGet, 1, 0, 60000);
    sd::encode_key(b, "parked-key");
    raw.send(b);
    // No answer: the get is parked on the server (this also gives it time to park).
    EXPECT_FALSE(raw.readable_within(200ms));
  }
  // Setting the key the dead client waited for must not trip the server.
  other_->set("parked-key", "v");
  expect_still_serving("parked");
}

TEST_F(TCPStoreServerSurvives, GarbageBytes) {
  RawClient raw(port());
  raw.send("GET / HTTP/1.1\r\nHost: example\r\n\r\n");
  EXPECT_TRUE(raw.closed_by_server());
  expect_still_serving("garbage");
}

TEST_F(TCPStoreServerSurvives, GarbageAfterHello) {
  RawClient raw(port());
  raw.hello();
  std::string b(64, '\xee');
  raw.send(b);
  EXPECT_TRUE(raw.closed_by_server());
  expect_still_serving("garbage-after-hello");
}

TEST_F(TCPStoreServerSurvives, UnknownCommand) {
  RawClient raw(port());
  raw.hello();
  std::string b;
  b.push_back(static_cast<char>(200));
  sd::put_u32(b, 0);
  sd::put_u32(b, 0);
  sd::put_u64(b, 0);
  raw.send(b);
  EXPECT_TRUE(raw.closed_by_server());
  expect_still_serving("unknown-command");
}

TEST_F(TCPStoreServerSurvives, OversizedKey) {
  RawClient raw(port());
  raw.hello();
  std::string b;
  sd::encode_request_head(b, sd::Command::kSet, 1, 1, 0);
  sd::put_u32(b, static_cast<uint32_t>(TCPStore::kMaxKeyBytes + 1));
  b += std::string(100, 'k');
  raw.send(b);
  EXPECT_TRUE(raw.closed_by_server());
  expect_still_serving("oversized-key");
}

TEST_F(TCPStoreServerSurvives, OversizedValue) {
  RawClient raw(port());
  raw.hello();
  std::string b;
  sd::encode_request_head(b, sd::Command::kSet, 1, 1, 0);
  sd::encode_key(b, "k");
  sd::put_u64(b, uint64_t{TCPStore::kMaxValueBytes} + 1);
  raw.send(b);
  EXPECT_TRUE(raw.closed_by_server());
  expect_still_serving("oversized-value");
  // A value length near 2^64 too.
  RawClient raw2(port());
  raw2.hello();
  std::string c;
  sd::encode_request_head(c, sd::Command::kAppend, 1, 1, 0);
  sd::encode_key(c, "k");
  sd::put_u64(c, ~uint64_t{0});
  raw2.send(c);
  EXPECT_TRUE(raw2.closed_by_server());
  expect_still_serving("huge-value");
}

TEST_F(TCPStoreServerSurvives, TooManyKeys) {
  RawClient raw(port());
  raw.hello();
  std::string b;
  sd::encode_request_head(b, sd::Command::kMultiGet, TCPStore::kMaxKeysPerRequest + 1, 0, 0);
  raw.send(b);
  EXPECT_TRUE(raw.closed_by_server());
  expect_still_serving("too-many-keys");
}

TEST_F(TCPStoreServerSurvives, WrongShape) {
  RawClient raw(port());
  raw.hello();
  std::string b;
  sd::encode_request_head(b, sd::Command::kSet, 1, 0, 0);  // set without a value
  raw.send(b);
  EXPECT_TRUE(raw.closed_by_server());
  expect_still_serving("wrong-shape");
}

TEST_F(TCPStoreServerSurvives, RequestsSplitIntoSingleBytes) {
  RawClient raw(port());
  raw.hello();
  std::string b;
  sd::encode_request_head(b, sd::Command::kSet, 1, 1, 0);
  sd::encode_key(b, "trickled");
  sd::put_u64(b, 5);
  b += "value";
  for (char ch : b) raw.send(std::string(1, ch));
  EXPECT_EQ(other_->get("trickled"), "value");
  expect_still_serving("trickle");
}

// ---------------------------------------------------------------- processes

void run_ranks(int world, bool master_waits_for_workers) {
  tt::Shared<tt::PortBoard> board;
  uint16_t fixed = master_waits_for_workers ? unused_port() : 0;
  auto results = tt::run_in_processes(world, [&](int rank) {
    std::unique_ptr<TCPStore> store;
    if (rank == 0) {
      store = std::make_unique<TCPStore>("127.0.0.1", fixed,
                                         TCPStoreOptions{.world_size = world,
                                                         .is_master = true,
                                                         .timeout = 30s,
                                                         .wait_for_workers = master_waits_for_workers});
      board->publish(store->port());
    } else {
      int port = fixed != 0 ? fixed : board->wait(30s);
      store = std::make_unique<TCPStore>("127.0.0.1", static_cast<uint16_t>(port),
                                         TCPStoreOptions{.world_size = world, .timeout = 30s});
    }
    store->set("rank/" + std::to_string(rank), "hello from " + std::to_string(rank));
    std::vector<std::string> keys;
    for (int r = 0; r < world; ++r) keys.push_back("rank/" + std::to_string(r));
    auto values = store->multi_get(keys);
    for (int r = 0; r < world; ++r)
      if (values[r] != "hello from " + std::to_string(r)) throw std::runtime_error("bad value from rank " + std::to_string(r));
    int64_t arrived = store->add("arrived", 1);
    if (arrived == world) store->set("all-arrived", "1");
    store->wait({"all-arrived"});
    if (store->get("arrived") != std::to_string(world)) throw std::runtime_error("bad counter");
    // The master (and its server) goes last: the others' final request is
    // setting finished/<rank>.
    if (rank != 0) {
      store->set("finished/" + std::to_string(rank), "1");
      return;
    }
    std::vector<std::string> finished;
    for (int r = 1; r < world; ++r) finished.push_back("finished/" + std::to_string(r));
    store->wait(finished);
  });
  EXPECT_EQ(tt::describe_failures(results), "");
}

TEST(TCPStoreProcesses, WorldSizes2To4) {
  for (int world = 2; world <= 4; ++world) {
    SCOPED_TRACE("world size " + std::to_string(world));
    run_ranks(world, false);
  }
}

TEST(TCPStoreProcesses, MasterWaitsForWorkers) { run_ranks(3, true); }

TEST(TCPStoreProcesses, ClientStartedBeforeTheMasterConnectsWithRetries) {
  uint16_t port = unused_port();
  auto results = tt::run_in_processes(2, [&](int rank) {
    if (rank == 1) {
      TCPStore client("127.0.0.1", port, 2, false, 30s);  // usually starts before the server
      client.set("from-client", "1");
      client.get("from-master");
      client.set("client-done", "1");
    } else {
      TCPStore master("127.0.0.1", port, 2, true, 30s);
      master.get("from-client");
      master.set("from-master", "1");
      master.wait({"client-done"});  // keep the server up until the client is done
    }
  });
  EXPECT_EQ(tt::describe_failures(results), "");
}

TEST(TCPStoreProcesses, KilledClientDoesNotDisturbOthers) {
  tt::Shared<tt::PortBoard> board;
  auto results = tt::run_in_processes(3, [&](int rank) {
    if (rank == 0) {
      TCPStore master("127.0.0.1", 0, std::nullopt, true, 30s, false);
      board->publish(master.port());
      master.wait({"victim-parked", "survivor-done"});
      return;
    }
    uint16_t port = static_cast<uint16_t>(board->wait(30s));
    TCPStore client("127.0.0.1", port, std::nullopt, false, 30s);
    if (rank == 1) {
      // The main thread parks a get on the server; another thread then
      // announces the kill and kills the process.
      std::thread killer([port] {
        TCPStore announcer("127.0.0.1", port, std::nullopt, false, 30s);
        std::this_thread::sleep_for(200ms);  // give the get time to be parked (either way is a valid test)
        announcer.set("victim-parked", "1");
        ::raise(SIGKILL);
      });
      try {
        client.get("never");
      } catch (...) {
      }
      for (;;) ::pause();  // SIGKILL ends this process in any case
    }
    client.wait({"victim-parked"});
    client.set("x", "y");
    if (client.get("x") != "y") throw std::runtime_error("bad value");
    client.set("survivor-done", "1");
  });
  EXPECT_EQ(results[0].exit_code, 0) << results[0].describe();
  EXPECT_EQ(results[1].signal, SIGKILL) << results[1].describe();
  EXPECT_TRUE(results[2].ok()) << results[2].describe();
}

}  // namespace
