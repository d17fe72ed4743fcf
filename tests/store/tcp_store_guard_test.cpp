// The TCPStore against strangers and greedy requests: the job token gates
// every command, limits turn oversized requests into errors for the asker
// only, and connections that never authenticate cannot lock the job out.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/harness.h"
#include "common/scoped_env.h"
#include "store/store_errors.h"
#include "store/tcp_store_protocol.h"
#include "tdist/errors.h"
#include "tdist/store.h"
#include "util/socket.h"

namespace {

using namespace std::chrono_literals;
using tdist::DistStoreError;
using tdist::TCPStore;
using tdist::TCPStoreOptions;
using tdist::testing::ScopedEnv;

std::unique_ptr<TCPStore> master(std::chrono::milliseconds timeout = 20s) {
  return std::make_unique<TCPStore>("127.0.0.1", 0,
                                    TCPStoreOptions{.is_master = true, .timeout = timeout, .wait_for_workers = false});
}
std::unique_ptr<TCPStore> client(uint16_t port, std::chrono::milliseconds timeout = 20s) {
  return std::make_unique<TCPStore>("127.0.0.1", port, TCPStoreOptions{.timeout = timeout});
}
using tdist::testing::contains;
using tdist::testing::store_error;

// The server reads the token when it starts, each client when it connects.
TEST(TCPStoreToken, ClientsWithoutTheTokenOrWithAnotherOneAreRefusedBeforeAnyCommand) {
  std::unique_ptr<TCPStore> server;
  {
    ScopedEnv token("TDIST_JOB_TOKEN", "job-secret");
    server = master();
    auto member = client(server->port());
    member->set("member-key", "1");
  }
  std::string none = store_error([&] { client(server->port(), 3s); });
  EXPECT_TRUE(contains(none, "requires the job token")) << none;
  {
    ScopedEnv token("TDIST_JOB_TOKEN", "a-guess");
    std::string wrong = store_error([&] { client(server->port(), 3s); });
    EXPECT_TRUE(contains(wrong, "different job token")) << wrong;
  }
  EXPECT_EQ(server->num_keys(), 1);  // nothing the refused clients asked ran
  EXPECT_EQ(server->get("member-key"), "1");
}

TEST(TCPStoreToken, AClientWithATokenRefusesAnOpenServer) {
  auto server = master();  // no token: open, as torch's
  ScopedEnv token("TDIST_JOB_TOKEN", "job-secret");
  std::string e = store_error([&] { client(server->port(), 3s); });
  EXPECT_TRUE(contains(e, "runs without a job token")) << e;
}

TEST(TCPStoreToken, ARawRequestBeforeAuthenticatingGetsAnErrorAndTheConnectionCloses) {
  ScopedEnv token("TDIST_JOB_TOKEN", "job-secret");
  auto server = master();
  tdist::Fd fd = tdist::connect_tcp("127.0.0.1", server->port(), tdist::Deadline::after(5s), "raw client");
  // A set with no hello and no proof: the connection is dropped unserved.
  std::string b;
  b.push_back(2);                        // SET
  b += std::string("\1\0\0\0\1\0\0\0", 8);  // one key, one value
  b += std::string(8, '\0');             // arg
  b += std::string("\1\0\0\0k", 5);
  b += std::string("\1\0\0\0\0\0\0\0v", 9);
  tdist::send_all(fd.get(), b.data(), b.size(), tdist::Deadline::after(5s), "server");
  char buf[256];
  pollfd p{fd.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  EXPECT_EQ(::recv(fd.get(), buf, sizeof(buf), 0), 0);  // closed
  EXPECT_FALSE(server->check({"k"}));
}

TEST(TCPStoreLimits, AMultiGetNamingALargeKeyManyTimesIsAnErrorAndTheServerLivesOn) {
  ScopedEnv answer("TDIST_STORE_MAX_ANSWER_BYTES", std::to_string(16 << 20));
  auto server = master();
  auto attacker = client(server->port());
  attacker->set("big", std::string(256 << 10, 'x'));
  std::vector<std::string> keys(4096, "big");  // a 1 GiB answer from a 20 KiB request
  std::string e = store_error([&] { attacker->multi_get(keys); });
  EXPECT_TRUE(contains(e, "above the limit of 16777216")) << e;
  EXPECT_TRUE(contains(e, "TDIST_STORE_MAX_ANSWER_BYTES")) << e;
  EXPECT_EQ(attacker->multi_get({"big", "big"}).size(), 2u);  // its connection still works
  auto other = client(server->port());
  other->set("after", "1");
  EXPECT_EQ(server->get("after"), "1");
}

TEST(TCPStoreLimits, AParkedGetWhoseKeyArrivesTooLargeIsAnError) {
  ScopedEnv answer("TDIST_STORE_MAX_ANSWER_BYTES", "1000");
  auto server = master();
  auto waiter = client(server->port());
  std::thread setter([&] {
    std::this_thread::sleep_for(200ms);  // orders the set after the get; asserts nothing
    client(server->port())->set("late", std::string(5000, 'x'));
  });
  std::string e = store_error([&] { waiter->get("late"); });
  setter.join();
  EXPECT_TRUE(contains(e, "TDIST_STORE_MAX_ANSWER_BYTES")) << e;
}

TEST(TCPStoreLimits, TotalMemoryAndAppendPastTheValueLimitAreErrors) {
  ScopedEnv memory("TDIST_STORE_MAX_BYTES", std::to_string(1 << 20));
  auto server = master();
  auto c = client(server->port());
  c->set("a", std::string(600 << 10, 'a'));
  std::string e = store_error([&] { c->set("b", std::string(600 << 10, 'b')); });
  EXPECT_TRUE(contains(e, "TDIST_STORE_MAX_BYTES")) << e;
  EXPECT_FALSE(c->check({"b"}));
  e = store_error([&] { c->append("a", std::string(600 << 10, 'a')); });
  EXPECT_TRUE(contains(e, "TDIST_STORE_MAX_BYTES")) << e;
  EXPECT_EQ(c->get("a").size(), size_t{600 << 10});
  EXPECT_TRUE(c->delete_key("a"));  // freed room is usable again
  c->set("b", std::string(600 << 10, 'b'));
}

TEST(TCPStoreLimits, AppendCannotGrowAValuePastTheValueLimit) {
  // A value of almost 1 GiB crosses loopback: slow under ASan on a loaded machine.
  auto server = master(std::chrono::minutes(3));
  auto c = client(server->port(), std::chrono::minutes(3));
  c->set("v", std::string(TCPStore::kMaxValueBytes - 10, '\0'));
  std::string e = store_error([&] { c->append("v", std::string(11, 'x')); });
  EXPECT_TRUE(contains(e, "above the value limit")) << e;
  c->delete_key("v");
}

// Clients that ask for large answers and never read them: what the server
// holds for them is bounded, and the next asker gets an error, not the memory.
TEST(TCPStoreLimits, AnswersHeldForClientsThatDoNotReadAreBounded) {
  ScopedEnv buffered("TDIST_STORE_MAX_BUFFERED_BYTES", std::to_string(17 << 20));
  auto server = master();
  auto c = client(server->port());
  c->set("big", std::string(16 << 20, 'x'));
  namespace sd = tdist::store_detail;
  auto greedy = [&] {  // greets (an open store), asks for "big", never reads the answer
    // A small receive window, set before connecting: the kernel takes little of the answer.
    tdist::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int small = 4096;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server->port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    auto deadline = tdist::Deadline::after(10s);
    std::string b;
    sd::encode_request_head(b, sd::Command::kHello, 0, 1, sd::kMagic);
    sd::put_u64(b, 16);
    b += std::string(16, 'n');
    tdist::send_all(fd.get(), b.data(), b.size(), deadline, "server");
    char head[sd::kResponseHeaderBytes];
    tdist::recv_all(fd.get(), head, sizeof(head), deadline, "server");
    for (uint32_t i = 0, n = sd::get_u32(head + 9); i < n; ++i) {
      char len[8];
      tdist::recv_all(fd.get(), len, sizeof(len), deadline, "server");
      std::string value(sd::get_u64(len), '\0');
      tdist::recv_all(fd.get(), value.data(), value.size(), deadline, "server");
    }
    b.clear();
    sd::encode_request_head(b, sd::Command::kGet, 1, 0, 10000);
    sd::encode_key(b, "big");
    tdist::send_all(fd.get(), b.data(), b.size(), deadline, "server");
    pollfd p{fd.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 10000), 1);  // its answer has started: the rest waits in the server
    return fd;
  };
  tdist::Fd first = greedy();
  std::string e = store_error([&] { c->get("big"); });
  EXPECT_TRUE(contains(e, "TDIST_STORE_MAX_BUFFERED_BYTES")) << e;
  first.reset();  // the server lets go of its answer
  c->set("after", "1");
  EXPECT_EQ(server->get("after"), "1");
}

// 2,000 connections that never authenticate, against a server whose process
// may hold 1,024 descriptors: a member of the job still gets served.
TEST(TCPStoreLimits, AFloodOfSilentConnectionsDoesNotLockTheJobOut) {
  rlimit hard{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &hard), 0);
  if (hard.rlim_max != RLIM_INFINITY && hard.rlim_max < 2100) GTEST_SKIP() << "needs 2,100 descriptors";
  ScopedEnv token("TDIST_JOB_TOKEN", "job-secret");
  tdist::testing::Shared<tdist::testing::PortBoard> board;
  tdist::testing::Shared<std::atomic<int>> flooded, served;
  auto results = tdist::testing::run_in_processes(
      3,
      [&](int who) {
        if (who == 0) {  // the job's rank 0, hosting the store
          rlimit r{1024, hard.rlim_max};
          ::setrlimit(RLIMIT_NOFILE, &r);
          auto server = master();
          board->publish(server->port());
          server->wait({"done"}, 60s);
          return;
        }
        const uint16_t port = static_cast<uint16_t>(board->wait());
        if (who == 1) {  // the stranger: 2,000 connections that say nothing
          rlimit r{2100, hard.rlim_max};
          ::setrlimit(RLIMIT_NOFILE, &r);
          std::vector<tdist::Fd> fds;
          for (int i = 0; i < 2000; ++i) fds.push_back(tdist::connect_tcp("127.0.0.1", port, tdist::Deadline::after(20s), "flood"));
          *flooded = 1;
          while (!*served) std::this_thread::sleep_for(10ms);
          return;
        }
        while (!*flooded) std::this_thread::sleep_for(10ms);
        auto member = client(port, 30s);
        member->set("k", "v");
        if (member->get("k") != "v") throw std::runtime_error("wrong value");
        *served = 1;
        member->set("done", "1");
      },
      std::chrono::seconds(90));
  EXPECT_EQ(tdist::testing::describe_failures(results), "");
}

}  // namespace
