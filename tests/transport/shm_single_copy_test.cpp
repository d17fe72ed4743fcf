// Large point-to-point messages between ranks of one host in one copy
// (transport/shm/shm_single_copy.h): every size both ways with the threshold
// at 1 byte, more messages in flight than the pair has slots, receives posted
// late (the announcement waits, then is read whole into a buffer), small and
// large messages keeping their order, forked processes (the kernel's
// cross-memory attach between two address spaces), a pid trusted only where
// it holds the nonce given, and a rank whose probe fails keeping every
// message in the rings.
#include "transport/shm/shm_single_copy.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "backends/process_world.h"
#include "backends/world.h"
#include "common/scoped_env.h"
#include "transport/exchange_sizes.h"
#include "transport/shm/shm_path.h"

namespace tdist::testing {
namespace {

// Whether the kernel lets this process read and write a child's memory
// (a container's seccomp profile or ptrace_scope 3 may not): where it does
// not, the pairs keep their rings and the counts below cannot be checked.
std::string cross_memory_refused() {
  std::atomic<uint64_t>* word = new_probe_word();
  const SingleCopyIdentity me = single_copy_identity(*word);
  word->store(me.nonce);
  int done[2];
  if (pipe(done) != 0) return "pipe failed";
  const pid_t child = fork();
  if (child == 0) {
    char c;
    (void)!read(done[0], &c, 1);
    _exit(0);
  }
  SingleCopyIdentity other = me;
  other.pid = child;  // the child's copy of the word holds the nonce too
  const std::string why = probe_single_copy(other, me.nonce);
  (void)!write(done[1], "x", 1);
  waitpid(child, nullptr, 0);
  close(done[0]);
  close(done[1]);
  return why;
}

#define SKIP_WITHOUT_CROSS_MEMORY()                                 \
  if (const std::string why = cross_memory_refused(); !why.empty()) \
  GTEST_SKIP() << "cross-memory attach is refused here (" << why << "): messages stay in the rings"

const std::vector<size_t> kSizes = {0, 1, 4095, 65535, 65536, 65537, 100003, size_t{1} << 20, (size_t{3} << 20) + 5};

// Each rank of a pair checks the other before they send in one copy: the
// lower one while they connect, the higher one when it first polls the pair
// after that (before it reads the lower one's first message). After one
// exchange and a barrier, both verdicts are in.
void connect_pairs(ProcessGroup& pg) { exchange_sizes(pg, {8}); }

TEST(ShmSingleCopy, EverySizeBothWays) {
  SKIP_WITHOUT_CROSS_MEMORY();
  ScopedEnv threshold("TDIST_SHM_P2P_SINGLE_COPY_BYTES", "1");
  ScopedEnv ring("TDIST_SHM_RING_BYTES", "4096");
  for (int n : {2, 3}) {
    std::atomic<uint64_t> counted{0};
    with_thread_world(n, [&](ProcessGroup& pg) {
      connect_pairs(pg);
      pg.barrier()->wait();
      const uint64_t before = single_copy_messages_received();
      if (pg.rank() == 0) counted = before;
      pg.barrier()->wait();
      exchange_sizes(pg, kSizes);
      pg.barrier()->wait();
      if (pg.rank() == 0) counted = single_copy_messages_received() - counted;
    });
    // The ranks are threads of this process: 8 non-empty sizes each way of each pair.
    EXPECT_EQ(counted.load(), 8u * static_cast<uint64_t>(n * (n - 1))) << n << " ranks";
  }
}

// Rank 0 sends 3 x kSlots messages at once, larger and smaller ones
// interleaved on one tag; rank 1 posts its receives only after a barrier
// (each announcement waits, then is read whole), then again posted first.
TEST(ShmSingleCopy, MoreMessagesInFlightThanSlotsKeepTheirOrder) {
  ScopedEnv threshold("TDIST_SHM_P2P_SINGLE_COPY_BYTES", "65536");
  with_thread_world(2, [](ProcessGroup& pg) {
    constexpr int kCount = 3 * static_cast<int>(SingleCopyControl::kSlots);
    auto size_of = [](int i) { return i % 3 == 2 ? size_t{100} : size_t{70000} + static_cast<size_t>(i); };
    for (bool receives_first : {false, true}) {
      std::vector<std::vector<uint8_t>> msgs;
      std::vector<std::shared_ptr<Work>> works;
      msgs.reserve(kCount);
      if (pg.rank() == 0) {
        if (receives_first) pg.barrier()->wait();
        for (int i = 0; i < kCount; ++i) {
          msgs.push_back(pattern(size_of(i), i));
          works.push_back(pg.send(bytes(msgs.back()), 1, 7));
        }
        if (!receives_first) pg.barrier()->wait();
        for (auto& w : works) w->wait();
      } else {
        if (!receives_first) pg.barrier()->wait();
        for (int i = 0; i < kCount; ++i) {
          msgs.emplace_back(size_of(i), 0);
          works.push_back(pg.recv(bytes(msgs.back()), 0, 7));
        }
        if (receives_first) pg.barrier()->wait();
        for (auto& w : works) w->wait();
        for (int i = 0; i < kCount; ++i)
          ASSERT_EQ(msgs[static_cast<size_t>(i)], pattern(size_of(i), i))
              << "message " << i << (receives_first ? " (receives first)" : " (sends first)");
      }
    }
  });
}

// Two processes: the copies cross address spaces. Blocking and async, both
// ways at once, and a ping-pong whose next message may arrive before its
// receive is posted.
TEST(ShmSingleCopy, BetweenProcesses) {
  SKIP_WITHOUT_CROSS_MEMORY();
  Shared<PortBoard> board;
  auto results = run_in_processes(2, [&](int rank) {
    init_process_world(*board, rank, 2, std::chrono::seconds(60));
    const int peer = 1 - rank;
    // Connects the pair; rank 1 answers after it checked rank 0 (connect_pairs).
    std::vector<uint8_t> hello(8, 1);
    if (rank == 0) {
      send(bytes(hello), PeerRank(1));
      recv(bytes(hello), PeerRank(1));
    } else {
      recv(bytes(hello), PeerRank(0));
      send(bytes(hello), PeerRank(0));
    }
    const uint64_t before = single_copy_messages_received();
    for (size_t size : {size_t{256} << 10, (size_t{4} << 20) + 4097}) {
      std::vector<uint8_t> out = message_from(size, rank, peer), in(size, 0);
      auto r = irecv(bytes(in), PeerRank(peer), nullptr, 1);
      auto s = isend(bytes(out), PeerRank(peer), nullptr, 1);
      r->wait();
      s->wait();
      if (in != message_from(size, peer, rank))
        throw std::runtime_error("exchange of " + std::to_string(size) + " differs");
      for (int round = 0; round < 5; ++round) {
        std::vector<uint8_t> msg = pattern(size, 1000 + round), got(size, 0);
        if (rank == 0) {
          send(bytes(msg), PeerRank(1), nullptr, 2);
          recv(bytes(got), PeerRank(1), nullptr, 3);
        } else {
          recv(bytes(got), PeerRank(0), nullptr, 2);
          send(bytes(got), PeerRank(0), nullptr, 3);
        }
        if (got != msg) throw std::runtime_error("ping-pong round " + std::to_string(round) + " differs");
      }
    }
    if (single_copy_messages_received() - before < 12)
      throw std::runtime_error("only " + std::to_string(single_copy_messages_received() - before) +
                               " of 12 messages came in one copy");
    destroy_process_group();
  });
  EXPECT_EQ(describe_failures(results), "");
}

// A peer proves its pid by the nonce it was given: another process of the
// same user (here a forked child, which may be read and written) does not
// hold it, so a peer that names it is refused.
TEST(ShmSingleCopy, APidIsTrustedOnlyWhereItHoldsTheNonceGiven) {
  SKIP_WITHOUT_CROSS_MEMORY();
  std::atomic<uint64_t>* word = new_probe_word();
  SingleCopyIdentity me = single_copy_identity(*word);
  const uint64_t given = me.nonce;
  word->store(given);  // as the peer stores the nonce it was given
  EXPECT_EQ(probe_single_copy(me, given), "");
  EXPECT_NE(probe_single_copy(me, given + 1).find("does not hold the nonce"), std::string::npos);
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  if (child == 0) {
    word->store(0);  // the child's copy no longer holds it
    char c = 1;
    (void)!write(ready[1], &c, 1);
    (void)!read(done[0], &c, 1);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  SingleCopyIdentity impostor = me;
  impostor.pid = child;  // a third process at the same address
  EXPECT_NE(probe_single_copy(impostor, given).find("does not hold the nonce"), std::string::npos);
  c = 1;
  (void)!write(done[1], &c, 1);
  waitpid(child, nullptr, 0);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
}

// What a path asks of its mesh, recorded: here only how the path fails.
struct RecordingHost final : PathHost {
  std::string failed;
  char* begin_message(int, const wire::MessageHeader&, MessageSlot&) override { return nullptr; }
  char* begin_posted_message(int, const wire::MessageHeader&, MessageSlot&, bool& waiting) override {
    waiting = false;
    return nullptr;
  }
  void end_message(int, MessageSlot&) override {}
  void path_failed(int, std::exception_ptr error) override {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      failed = e.what();
    }
  }
  void doorbell_locked(int) override {}
  void doorbell(int) override {}
  std::string describe_peer(int peer) const override { return "rank " + std::to_string(peer); }
};

// A peer that announces a message in one copy without having been verified
// (its verdicts in the segment say yes, as a hostile peer may write them) is
// a protocol error: the receiver copies nothing from a pid it has not checked.
TEST(ShmSingleCopy, AnAnnouncementFromAPeerNotVerifiedIsABadHeader) {
  constexpr size_t kRing = 4096;
  ShmSegment made = ShmSegment::create("p2p", ShmLink::segment_bytes(kRing));
  ShmLink::init_controls(made, kRing);
  ShmSegment mapped = ShmSegment::open(made.name(), ShmLink::segment_bytes(kRing));
  made.unlink();
  ShmLink low(std::move(made), kRing, /*is_low=*/true);
  auto high = std::make_unique<ShmLink>(std::move(mapped), kRing, /*is_low=*/false);
  high->verdicts->low.store(1);
  high->verdicts->high.store(1);
  high->peer = SingleCopyIdentity{::getpid(), 0, 0, 0};  // no probe word: the check fails
  RecordingHost host;
  ShmPath path(std::move(high), host, 0);
  const wire::MessageHeader announce{wire::kShmSingleCopyMagic, 0, 1, size_t{1} << 20, 0};
  const char none = 0;
  ASSERT_TRUE(low.tx.write_both(&announce, sizeof announce, &none, 0));
  path.poll();
  EXPECT_NE(host.failed.find("bad message header"), std::string::npos) << host.failed;
}

TEST(ShmSingleCopy, ARankThatMayNotReachItsPeerKeepsTheRings) {
  Shared<PortBoard> board;
  auto results = run_in_processes(2, [&](int rank) {
    ScopedEnv fail("TDIST_TEST_SHM_SINGLE_COPY_FAIL", rank == 1 ? "1" : "0");
    init_process_world(*board, rank, 2, std::chrono::seconds(60));
    const uint64_t before = single_copy_messages_received();
    const size_t size = (size_t{1} << 20) + 3;
    std::vector<uint8_t> out = message_from(size, rank, 1 - rank), in(size, 0);
    auto r = irecv(bytes(in), PeerRank(1 - rank), nullptr, 1);
    send(bytes(out), PeerRank(1 - rank), nullptr, 1);
    r->wait();
    if (in != message_from(size, 1 - rank, rank)) throw std::runtime_error("the message differs");
    // Both ends agree: neither sends in one copy when one of them cannot.
    if (single_copy_messages_received() != before) throw std::runtime_error("a message came in one copy");
    destroy_process_group();
  });
  EXPECT_EQ(describe_failures(results), "");
}

}  // namespace
}  // namespace tdist::testing
