// The recipe for a new data path, played by a test: "mailbox"
// (mailbox_path.h) is registered from this binary only, named in
// TDIST_TRANSPORTS, and carries the messages of the pairs it reaches, while
// the pairs it does not reach fall back to the socket. Collectives and
// point-to-point give the right results either way.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "backends/process_world.h"
#include "backends/world.h"
#include "common/scoped_env.h"
#include "process_group/coll_util.h"
#include "transport/data_path.h"
#include "transport/mailbox_path.h"
#include "transport/shm_rings.h"

namespace tdist::testing {
namespace {

void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

Tensor floats(std::vector<float>& v) { return Tensor(v.data(), DType::Float32, {static_cast<int64_t>(v.size())}); }

// all_reduce, broadcast, all_to_all and send/recv between every pair, of a
// small and a large size, each checked against what it must give.
void run_operations(ProcessGroup& pg) {
  const int n = pg.size(), me = pg.rank();
  for (size_t count : {size_t{3}, size_t{300'000}}) {
    std::vector<float> sum(count);
    for (size_t i = 0; i < count; ++i) sum[i] = static_cast<float>(me + 1) * static_cast<float>(i % 7);
    pg.all_reduce(floats(sum))->wait();
    const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
    for (size_t i = 0; i < count; ++i)
      require(sum[i] == ranks_sum * static_cast<float>(i % 7),
              "all_reduce element " + std::to_string(i) + " of " + std::to_string(count));

    for (int root = 0; root < n; ++root) {
      std::vector<float> b(count, me == root ? static_cast<float>(root + 10) : -1.0f);
      pg.broadcast(floats(b), root)->wait();
      for (size_t i = 0; i < count; ++i)
        require(b[i] == static_cast<float>(root + 10), "broadcast from root " + std::to_string(root));
    }

    std::vector<std::vector<float>> in(n, std::vector<float>(count, -1.0f)), out(n);
    std::vector<Tensor> ins, outs;
    for (int peer = 0; peer < n; ++peer) {
      out[peer].assign(count, static_cast<float>(me * 100 + peer));
      outs.push_back(floats(in[peer]));
      ins.push_back(floats(out[peer]));
    }
    pg.all_to_all(outs, ins, AllToAllOptions{})->wait();
    for (int peer = 0; peer < n; ++peer)
      require(in[peer][count - 1] == static_cast<float>(peer * 100 + me), "all_to_all from " + std::to_string(peer));

    std::vector<std::shared_ptr<Work>> works;
    std::vector<std::vector<float>> got(n, std::vector<float>(count, -1.0f)), sent(n);
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      sent[peer].assign(count, static_cast<float>(me * 10 + peer));
      works.push_back(pg.recv(floats(got[peer]), peer, 5));
      works.push_back(pg.send(floats(sent[peer]), peer, 5));
    }
    for (auto& w : works) w->wait();
    for (int peer = 0; peer < n; ++peer)
      if (peer != me)
        require(got[peer][0] == static_cast<float>(peer * 10 + me) && got[peer][count - 1] == got[peer][0],
                "send/recv from " + std::to_string(peer));
  }
}

class MailboxPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_mailbox_path();
    mailbox_stats().reset();
    mailbox_reaches() = [](int, int) { return true; };
  }
  void TearDown() override { mailbox_reaches() = [](int, int) { return true; }; }
  // No shared memory: the collectives then run over the transport (not in a
  // shared segment), so their messages take the paths under test.
  ScopedEnv no_shm_{"TDIST_SHM", "0"};
};

TEST_F(MailboxPathTest, ARegisteredPathIsKnownToTransportsAndListedInErrors) {
  {
    ScopedEnv list("TDIST_TRANSPORTS", "mailbox,tcp");
    EXPECT_EQ(data_path_order(), (std::vector<std::string>{"mailbox", "tcp"}));
  }
  ScopedEnv list("TDIST_TRANSPORTS", "mailbox,ib");
  const std::string msg = value_error_of([] { data_path_order(); }, "mailbox,ib");
  EXPECT_TRUE(contains(msg, "unknown transport 'ib'") && contains(msg, "mailbox") && contains(msg, "tcp")) << msg;
}

TEST_F(MailboxPathTest, CarriesEveryPairsMessagesWhenListedFirst) {
  ScopedEnv list("TDIST_TRANSPORTS", "mailbox,tcp");
  for (int n : {2, 3, 4}) {
    mailbox_stats().reset();
    with_thread_world(n, run_operations);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b) {
          EXPECT_GT(mailbox_stats().sent[a][b].load(), 0u) << "world " << n << ": " << a << " -> " << b;
        }
  }
}

TEST_F(MailboxPathTest, APeerItDoesNotReachFallsBackToTheSocket) {
  ScopedEnv list("TDIST_TRANSPORTS", "mailbox,tcp");
  mailbox_reaches() = [](int rank, int peer) { return rank != 3 && peer != 3; };
  with_thread_world(4, run_operations);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      if (a == 3 || b == 3) {
        EXPECT_EQ(mailbox_stats().sent[a][b].load(), 0u) << a << " -> " << b;
      } else {
        EXPECT_GT(mailbox_stats().sent[a][b].load(), 0u) << a << " -> " << b;
      }
    }
}

TEST_F(MailboxPathTest, ListedAfterTcpItCarriesNothing) {
  ScopedEnv list("TDIST_TRANSPORTS", "tcp,mailbox");
  with_thread_world(3, run_operations);
  EXPECT_EQ(mailbox_stats().total(), 0u);
}

}  // namespace
}  // namespace tdist::testing
