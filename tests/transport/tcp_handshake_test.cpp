// The mesh handshake (src/transport/tcp/tcp_handshake.h) against a hostile
// neighbour: ranks run as processes over a real TCPStore and sockets; a third
// process plays the stranger. It connects to rank 0's mesh port before the
// real rank 1 does, knowing all that the store holds (assume the worst: it
// read the address record) but not the job token.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <string>
#include <vector>

#include "backends/process_world.h"
#include "common/scoped_env.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"
#include "util/socket.h"

namespace tdist::testing {
namespace {

const Millis kTimeout{20000};
Deadline deadline() { return Deadline::after(kTimeout); }

// What the stranger says and when the real rank 1 may start.
struct Board {
  PortBoard store_port;
  std::atomic<int> stranger_read{0};  // the stranger read rank 0's record (the last rank to read deletes it)
  std::atomic<int> stranger_done{0};
  std::atomic<int> refused{0};  // attacks that rank 0 refused, as the stranger saw it
};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= text.size();) {
    size_t end = std::min(text.find('\n', at), text.size());
    out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::shared_ptr<TCPStore> store_for(Board& b, bool master) {
  TCPStoreOptions o;
  o.world_size = 3;
  o.is_master = master;
  o.timeout = kTimeout;
  o.wait_for_workers = false;
  if (master) {
    auto s = std::make_shared<TCPStore>("127.0.0.1", 0, o);
    b.store_port.publish(s->port());
    return s;
  }
  return std::make_shared<TCPStore>("127.0.0.1", static_cast<uint16_t>(b.store_port.wait()), o);
}

// Every process of a test waits for "finished"; rank 0 serves the store, so
// it leaves only once the other `others` have read it (no sleep to hope by).
void leave_together(TCPStore& store, int who, int others) {
  store.wait({"finished"}, kTimeout);
  if (who != 0) {
    store.add("left", 1);
    return;
  }
  const auto give_up = std::chrono::steady_clock::now() + kTimeout;
  while (store.add("left", 0) < others && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// Rank 0 and rank 1 exchange a message both ways; each checks what it got.
void exchange(TcpTransport& t) {
  const int peer = 1 - t.rank();
  std::vector<int32_t> out(1000), in(1000, -1);
  for (int i = 0; i < 1000; ++i) out[i] = t.rank() * 100000 + i;
  auto s = t.isend(peer, 7, out.data(), out.size() * 4);
  t.recv(peer, 7, in.data(), in.size() * 4, deadline());
  t.wait(*s, deadline());
  for (int i = 0; i < 1000; ++i)
    if (in[i] != peer * 100000 + i) throw std::runtime_error("rank " + std::to_string(t.rank()) + " got forged data");
}

// The stranger's attacks on rank 0's mesh port; returns how many were refused.
// Its connections are made (queued in the listen backlog) before rank 1 dials.
int attack(TCPStore& store, std::atomic<int>& connected) {
  store.wait({"tcp/0"}, kTimeout);
  auto record = lines(store.get("tcp/0"));  // host id, nonce, port, addresses, sockets
  const uint64_t nonce = std::stoull(record.at(1));
  const uint16_t port = static_cast<uint16_t>(std::stoul(record.at(2)));
  int refused = 0;
  Fd first = connect_tcp("127.0.0.1", port, deadline(), "stranger");
  Fd second = connect_tcp("127.0.0.1", port, deadline(), "stranger");
  connected = 1;

  // 1. A hand-made hello as rank 1 with the published nonce and no proof.
  {
    Fd fd = std::move(first);
    wire::Challenge c{};
    recv_all(fd.get(), &c, sizeof(c), deadline(), "rank 0");
    EXPECT_EQ(c.flags & wire::kChallengeWantsToken, wire::kChallengeWantsToken);
    wire::Hello h{};
    h.magic = wire::kHelloMagic;
    h.rank = 1;
    h.size = 2;
    h.store_nonce = nonce;
    send_all(fd.get(), &h, sizeof(h), deadline(), "rank 0");
    wire::Welcome w{};
    try {
      recv_all(fd.get(), &w, sizeof(w), deadline(), "rank 0");
      if (!w.accepted) ++refused;
    } catch (const DistNetworkError&) {
      ++refused;  // closed without an answer: refused too
    }
  }
  // 2. The library's own dialler with a guessed token.
  {
    Fd fd = std::move(second);
    try {
      tcp_handshake::dial(fd.get(), {1, 0, 2, 0}, nonce, std::string("a guess"), deadline(), "rank 0");
    } catch (const DistNetworkError&) {
      ++refused;  // refused, or closed unanswered once rank 0 had the real rank 1
    }
  }
  return refused;
}

TEST(TcpHandshake, AStrangerWithTheStoreRecordButNotTheTokenIsRefused) {
  ScopedEnv token("TDIST_JOB_TOKEN", "the-job-secret");
  ScopedEnv shm("TDIST_SHM", "0");
  Shared<Board> board;
  auto results = run_in_processes(
      3,
      [&](int who) {
        auto store = store_for(*board, who == 0);
        if (who == 2) {
          // The stranger: the store is open to it (the worst case), the token is not.
          ::unsetenv("TDIST_JOB_TOKEN");
          board->refused = attack(*store, board->stranger_done);
          return;
        }
        if (who == 1)
          while (!board->stranger_done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        TcpTransportOptions o;
        o.label = "rank " + std::to_string(who);
        o.timeout = kTimeout;
        auto t = TcpTransport::connect(*store, who, 2, o);
        exchange(*t);
        // Rank 0 serves the store: it leaves once rank 1 has added, rank 1's last call to the store
        // (a wait after it raced rank 0's exit and failed on the closed connection).
        store->add("done", 1);
        while (who == 0 && store->add("done", 0) < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      },
      std::chrono::seconds(60));
  EXPECT_EQ(describe_failures(results), "");
  EXPECT_EQ(board->refused.load(), 2);
}

// Without a job token anyone who reads the store may dial (torch's open
// mode), but a Hello whose rank or socket is impossible is refused before
// any of it is used: ranks out of range (negative as a signed number, too),
// this rank itself, and a socket number of a pair that has no connection.
TEST(TcpHandshake, AHelloNamingAnImpossibleRankOrSocketIsRefused) {
  ScopedEnv no_token("TDIST_JOB_TOKEN", nullptr);
  ScopedEnv shm("TDIST_SHM", "0");
  Shared<Board> board;
  auto results = run_in_processes(
      3,
      [&](int who) {
        auto store = store_for(*board, who == 0);
        if (who == 2) {
          store->wait({"tcp/0"}, kTimeout);
          auto record = lines(store->get("tcp/0"));
          const uint64_t nonce = std::stoull(record.at(1));
          const uint16_t port = static_cast<uint16_t>(std::stoul(record.at(2)));
          board->stranger_read = 1;
          struct Claim {
            uint32_t rank, size, lane;
          };
          for (Claim c : {Claim{0xFFFFFFFFu, 2, 0}, Claim{0x80000000u, 2, 0}, Claim{2, 2, 0}, Claim{0, 2, 0},
                          Claim{1, 2, 99}, Claim{1, 0xFFFFFFFFu, 0}}) {
            Fd fd = connect_tcp("127.0.0.1", port, deadline(), "stranger");
            wire::Challenge challenge{};
            recv_all(fd.get(), &challenge, sizeof(challenge), deadline(), "rank 0");
            wire::Hello h{};
            h.magic = wire::kHelloMagic;
            h.rank = c.rank;
            h.size = c.size;
            h.lane = c.lane;
            h.store_nonce = nonce;
            send_all(fd.get(), &h, sizeof(h), deadline(), "rank 0");
            wire::Welcome w{};
            try {
              recv_all(fd.get(), &w, sizeof(w), deadline(), "rank 0");
              if (w.accepted == wire::kWelcomeAccepted || w.accepted == wire::kWelcomeSuperseded)
                throw std::runtime_error("rank 0 accepted a Hello as rank " + std::to_string(c.rank) + " of " +
                                         std::to_string(c.size) + ", socket " + std::to_string(c.lane + 1));
            } catch (const DistNetworkError&) {
              // closed without an answer: refused too
            }
            board->refused.fetch_add(1);
          }
          board->stranger_done = 1;
          leave_together(*store, who, 2);
          return;
        }
        while (who == 1 && !board->stranger_read) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        TcpTransportOptions o;
        o.label = "rank " + std::to_string(who);
        o.timeout = kTimeout;
        auto t = TcpTransport::connect(*store, who, 2, o);  // publishes; the pair connects on first use
        while (!board->stranger_done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        exchange(*t);  // rank 0 lived through the claims and still connects
        if (store->add("done", 1) == 2) store->set("finished", "1");
        leave_together(*store, who, 2);
      },
      std::chrono::seconds(60));
  EXPECT_EQ(describe_failures(results), "");
  EXPECT_EQ(board->refused.load(), 6);
}

TEST(TcpHandshake, SilentConnectionsDuringInitCostNothing) {
  // Each silent connection would hold a serial accept loop for its whole
  // handshake time; more of them than fit in the timeout must not matter, nor
  // more than the acceptor holds in handshake at once (the rest wait in the
  // backlog, and the silent ones make room after a second).
  ScopedEnv token("TDIST_JOB_TOKEN", "the-job-secret");
  ScopedEnv shm("TDIST_SHM", "0");
  Shared<Board> board;
  const int silent = 80;  // > 64 in handshake at once; 80 x 5 s handshake time > the 15 s timeout
  auto results = run_in_processes(
      3,
      [&](int who) {
        auto store = store_for(*board, who == 0);
        if (who == 2) {
          store->wait({"tcp/0"}, kTimeout);
          const uint16_t port = static_cast<uint16_t>(std::stoul(lines(store->get("tcp/0")).at(2)));
          std::vector<Fd> fds;
          for (int i = 0; i < silent; ++i) fds.push_back(connect_tcp("127.0.0.1", port, deadline(), "silent"));
          board->stranger_done = 1;
          leave_together(*store, who, 2);  // stay silent until the ranks are done
          return;
        }
        if (who == 1)
          while (!board->stranger_done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        TcpTransportOptions o;
        o.label = "rank " + std::to_string(who);
        o.timeout = Millis(15000);
        auto t = TcpTransport::connect(*store, who, 2, o);
        // Rank 1 dials first, through the silent crowd at rank 0's listener
        // (were rank 0 first, its own dial would connect the pair).
        if (who == 0) std::this_thread::sleep_for(std::chrono::seconds(3));
        exchange(*t);
        if (store->add("done", 1) == 2) store->set("finished", "1");
        leave_together(*store, who, 2);
      },
      std::chrono::seconds(60));
  EXPECT_EQ(describe_failures(results), "");
}

TEST(TcpHandshake, RanksWithDifferentTokensFailWithAnErrorSayingSo) {
  ScopedEnv shm("TDIST_SHM", "0");
  Shared<Board> board;
  auto results = run_in_processes(
      2,
      [&](int who) {
        ::setenv("TDIST_JOB_TOKEN", who == 0 ? "token-a" : "token-b", 1);
        TCPStoreOptions so;
        so.world_size = 2;
        so.is_master = who == 0;
        so.timeout = kTimeout;
        so.wait_for_workers = false;
        ::unsetenv("TDIST_JOB_TOKEN");  // the store is not what this test is about
        std::shared_ptr<TCPStore> store;
        if (who == 0) {
          store = std::make_shared<TCPStore>("127.0.0.1", 0, so);
          board->store_port.publish(store->port());
        } else {
          store = std::make_shared<TCPStore>("127.0.0.1", static_cast<uint16_t>(board->store_port.wait()), so);
        }
        ::setenv("TDIST_JOB_TOKEN", who == 0 ? "token-a" : "token-b", 1);
        TcpTransportOptions o;
        o.label = "rank " + std::to_string(who);
        o.timeout = Millis(10000);  // a bound for a hang: both dials are refused at once
        // Kept until both ranks are done: each dials the other on first use,
        // and a transport closed early would reset the other's dial.
        std::unique_ptr<TcpTransport> t;
        try {
          t = TcpTransport::connect(*store, who, 2, o);
          exchange(*t);
        } catch (const DistNetworkError& e) {
          // Both dial on first use. The rank whose dial is refused learns why;
          // the other may instead see that rank close its end as it fails.
          const std::string what = e.what();
          const std::string other = "rank " + std::to_string(1 - who);
          if (what.find("job tokens differ") != std::string::npos) board->refused.fetch_add(1);
          else if (what.find("closed by " + other) == std::string::npos &&
                   what.find(other + " at") == std::string::npos)
            throw std::runtime_error("rank " + std::to_string(who) + "'s error names neither the tokens nor " +
                                     other + ": " + what);
          store->add("failed", 1);
          if (who == 0) store->wait({"rank1-done"}, kTimeout);
          else store->set("rank1-done", "1");
          return;
        }
        throw std::runtime_error("rank " + std::to_string(who) + " connected with a different token");
      },
      std::chrono::seconds(60));
  EXPECT_EQ(describe_failures(results), "");
  EXPECT_GE(board->refused.load(), 1) << "no rank's error says that the job tokens differ";
}

// A forged address record (anyone who can write the store): interfaces
// listed without their listeners, or a port out of range, is refused by
// name before anything is dialled or indexed.
TEST(TcpHandshake, AForgedAddressRecordIsRefusedNamingItsRank) {
  const std::string base = "host\n1\n4000\n127.0.0.1\n1\n";
  for (const std::string& forged : {base + "eth0,eth1\n", base + "eth0,eth1\n127.0.0.1|4000",
                                    base + "eth0,eth1\n127.0.0.1|70000;127.0.0.1|4000",
                                    base + "eth0\n127.0.0.1|4000;127.0.0.1|4001"}) {
    HashStore store;
    store.set("tcp/0", forged);
    TcpTransportOptions o;
    o.label = "rank 1";
    o.timeout = Millis(5000);
    try {
      TcpTransport::connect(store, 1, 2, o);
      ADD_FAILURE() << "accepted the record '" << forged << "'";
    } catch (const DistNetworkError& e) {
      EXPECT_NE(std::string(e.what()).find("malformed address record of rank 0"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tdist::testing
