// The shared-memory segment of a process group whose ranks are all on one host:
// collectives copy into a segment every rank maps and read each other's data
// there, instead of sending messages over the transport.
//
// Rounds. Every collective is a sequence of rounds that all ranks step through
// alike (the number depends only on arguments every rank passes equally). In
// round r a rank first writes what the collective says it writes (its slot of
// parity r & 1, or the whole buffer for a root), then arrives (publishes r in
// its counter, release) and waits until every rank has arrived at r
// (acquire). After that it may read any slot of parity r & 1 and write its
// part of result(r). Because a rank arrives at r+1 only after it has finished
// round r, the buffers of parity r & 1 are free again once everyone has
// arrived at r+1: one synchronisation per round, no acknowledgements.
//
// Leaving. A rank that only writes in an operation's last round (a broadcast
// root, a rank that contributes to a reduce or gather without the result) may
// arrive and leave without waiting for the others: its data is in the segment
// already. It then waits for that round (and checks the others' signatures
// of it) before it writes for a later one: the parity it writes next is free
// once every rank arrived at the round it left. So it runs at most one call
// ahead (docs/tuning_log.md: Shared-memory engine), and hears of a
// disagreement in the round it left from its next operation on the group, as
// an MPI or Gloo broadcast root would.
//
// Posts. A broadcast, reduce or gather of at most a word per rank runs in a
// post round instead (layout.h: PostEntry): each rank writes its signature
// and word into its post entry for the round and arrives; a broadcast's
// non-roots wait for the root alone and check its signature, a reduce's or
// gather's root waits for everyone and checks all, and the others (the
// broadcast's root, the contributors) leave at once. Entries are used by
// round modulo kPostDepth, so a rank that leaves need only wait for the
// round that last used its entry: a loop of small broadcasts runs its root
// up to kPostDepth - 1 calls ahead, as an MPI root's eager sends do, where
// the one-word slots of the rank's line let it run one ahead. Before it
// writes a slot or its line again, a rank waits for every rank to arrive at
// its last round, as after Leaving. Whoever reads a rank's signature or word
// for a round takes its post entry when the entry is for that round.
// Every pair of ranks still compares signatures in every round (each
// broadcast non-root with the root, which every other rank checks against),
// but a rank that waits for the root alone completes its round without
// waiting for a third rank that called something else: that rank fails the
// round, and this one its next operation, as a root that left does.
//
// Failure. A rank that cannot complete a round (deadline, lost peer, arguments
// that differ between ranks) marks the shared abort block with that round and
// wakes everyone; the others then fail at once, naming it. No rank completes
// a round that another failed: each reads the block after every round it
// waited for, and a rank that gives up first looks once more whether everyone
// arrived after all, withdrawing its verdict if so (the round then completes
// everywhere; see AbortBlock). So a rank that arrives after the others gave up
// fails that very operation and gets no result, instead of a result nobody
// else has.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/collective.h"
#include "shm_engine/layout.h"
#include "shm_engine/measured_choice.h"
#include "tdist/store.h"
#include "util/deadline.h"
#include "util/shm_segment.h"

namespace tdist::shm_engine {

// What an operation is, compared between ranks in its first round so that
// ranks calling different collectives or sizes fail with a clear error instead
// of reading garbage. `size` is compared too unless the collective lets it
// differ (all_to_all, where it carries the rounds each rank needs).
struct Signature {
  uint64_t what = 0;  // see signature() in host_segment.cpp: op code, dtype, reduce op, root
  uint64_t size = 0;
};
Signature signature(OpCode code, int dtype = -1, int reduce_op = -1, int root = -1, uint64_t size = 0);

// The sizes one copy moves (HostSegment: one copy), as the group agreed: from
// `bytes` (0: none) to below `below`. Each rank tells the others its own as
// text ("bytes-below"); the group takes the narrowest range.
struct SingleCopyRange {
  size_t bytes = 0;
  size_t below = SIZE_MAX;
  static SingleCopyRange from_settings();  // TDIST_SHM_SINGLE_COPY_BYTES, TDIST_SHM_SINGLE_COPY_MAX_BYTES
  std::string text() const { return std::to_string(bytes) + "-" + std::to_string(below); }
  static SingleCopyRange parse(const std::string& text);  // std::invalid_argument or std::out_of_range
  SingleCopyRange narrowed(const SingleCopyRange& o) const {
    return {bytes < o.bytes ? bytes : o.bytes, below < o.below ? below : o.below};
  }
};

class HostSegment {
 public:
  // Sets the group's segment up through its (group-scoped) store: rank 0 creates
  // the segment and publishes its name, the others map it, all report, and
  // the segment is used only if every rank succeeded. Returns null (on every
  // rank alike) when it is not used: TDIST_SHM=0, a rank on another host, a
  // group of one, or a failure, which rank 0 logs once. /dev/shm holds no name
  // of it afterwards either way: every rank that mapped it removes the name,
  // and a rank whose set-up fails (throws, or cannot map) removes what
  // provably dead processes left there (util/shm_leftovers.h).
  static std::unique_ptr<HostSegment> setup(Store& store, Transport& transport, const std::string& label,
                                      const std::vector<int>& global_ranks, Millis timeout);
  ~HostSegment();
  HostSegment(const HostSegment&) = delete;
  HostSegment& operator=(const HostSegment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return layout_.slot_bytes; }
  // Up to this size a reduction folds everything in one round (TDIST_SHM_ONE_ROUND_BYTES).
  size_t one_round_bytes() const { return one_round_bytes_; }
  // More ranks on this machine than it has cores (the same answer on every rank of a host).
  bool oversubscribed() const { return oversubscribed_; }

  // One copy. Whether blocks of `block_bytes` go straight from the owner's
  // memory to the reader's (from TDIST_SHM_SINGLE_COPY_BYTES on; with more
  // ranks than cores only below TDIST_SHM_SINGLE_COPY_MAX_BYTES; the same on
  // every rank; off for good once a read failed anywhere): the owner puts the block's address and size in
  // its slot of the operation's first round (put_block; all_to_all in the
  // directory), each reader copies it
  // (read_block, read_from), and all_read() ends the operation with a second
  // round that tells everyone whether every read succeeded and keeps the
  // owners' buffers untouched until the reads are over. Broadcast stays in
  // the segment, where the root's copy in and the readers' copies out overlap.
  // `oversubscribed_too`: also with more ranks than cores (the same answer on
  // every rank of a host), where reading everything in place took longer for
  // all_gather than the segment's pieces (docs/tuning_log.md). With a core
  // each, large blocks go in one copy too: through the segment they cost
  // twice as much and more where the ranks' cores share no cache
  // (docs/tuning_log.md, "Point-to-point in one copy", "One copy for large
  // blocks with a core each").
  bool single_copy(size_t block_bytes, bool oversubscribed_too = true) const {
    return single_copy_.bytes != 0 && block_bytes >= single_copy_.bytes &&
           (!oversubscribed_ || (oversubscribed_too && block_bytes < single_copy_.below));
  }
  // Choices that turn on where the ranks run (measured_choice.h), made by
  // rank 0 and followed by every rank: rank 0 propose()s its pick in its word
  // of the operation's first round (before arriving), and every rank reads
  // picked() there after the round's wait. Each rank's setting is read when
  // the group is made; rank 0's decides.
  //   two_rank_all_reduce (TDIST_SHM_TWO_RANK_ALL_REDUCE): an all_reduce above
  //     a slot on 2 ranks with a core each; way 0 in shares, 1 in place.
  //   all_gather_blocks, all_to_all_blocks (TDIST_SHM_LARGE_BLOCKS): their
  //     blocks that would go in one copy, with a core for each rank; way 0 in
  //     one copy, 1 through the segment (timed apart: which is faster need
  //     not be the same for both).
  RankZeroChoice& two_rank_all_reduce() { return two_rank_all_reduce_; }
  RankZeroChoice& all_gather_blocks() { return all_gather_blocks_; }
  RankZeroChoice& all_to_all_blocks() { return all_to_all_blocks_; }
  // Rank 0 puts its pick for a call of `bytes` in its word of `round` (0: it
  // has nothing the choice is about, or too little to time: way 0), with
  // whether the call is timed; every other rank puts how long its part of the
  // last timed call took, if it has not yet (each rank times the same calls:
  // rank 0 reads the others' words only when it timed the last one).
  void propose(uint32_t round, RankZeroChoice& choice, size_t bytes) {
    std::atomic<uint64_t>& mine = line(rank_).word[round & 1];
    if (rank_ == 0 && (bytes == 0 || choice.told != RankZeroChoice::kTimed)) {  // inline: small data, untimed
      mine.store(bytes == 0 ? 0 : static_cast<uint64_t>(choice.told), std::memory_order_relaxed);
      return;
    }
    if (rank_ == 0) return propose_as_rank_zero(round, choice, bytes);
    if (choice.last_ns == 0) return;
    mine.store(static_cast<uint64_t>(choice.last_ns), std::memory_order_relaxed);
    choice.last_ns = 0;
  }
  // After the round's wait: rank 0's pick. Rank 0 also records the last call
  // it timed: the longest part.
  RankZeroChoice::Picked picked(uint32_t round, RankZeroChoice& choice) {
    if (rank_ == 0 && choice.last_ns != 0) record_last_call(round, choice);
    const uint64_t w = word(round, 0);
    return {static_cast<int>(w & 1), (w & kPickTimed) != 0};
  }
  // The least block that goes in one copy (TDIST_SHM_SINGLE_COPY_BYTES, as agreed; 0: none).
  size_t single_copy_bytes() const { return single_copy_.bytes; }
  void put_block(uint32_t round, const void* data, size_t n) {
    const uint64_t where[2] = {reinterpret_cast<uintptr_t>(data), n};
    std::memcpy(slot(round, rank_), where, sizeof where);
  }
  // The size of rank r's block of `round` (after the round's wait).
  size_t block_size(int r, uint32_t round) const {
    uint64_t where[2];
    std::memcpy(where, slot(round, r), sizeof where);
    return static_cast<size_t>(where[1]);
  }
  // Copies rank r's block of `round` (block_size(r, round) bytes, which the
  // caller checked) to `out`; "" once done, else why not (this reader's part
  // of the verdict).
  std::string read_block(int r, uint32_t round, void* out) const;
  // The same for `n` bytes at `remote` in rank r's memory (an address r published).
  std::string read_from(int r, const void* remote, void* out, size_t n) const;
  // The second round: true when every rank's reads succeeded (`why` is this
  // rank's failure, "" if none). False on every rank alike otherwise: one
  // copy is then off for the group, which copies through the segment, and
  // the caller moves this operation's data that way, its first round a sync().
  bool all_read(CollectiveContext& ctx, const std::string& why);

  // The round the next call to start() or sync() enters; call it before
  // writing for that round (after a round this rank left, it waits for it).
  uint32_t next_round(CollectiveContext& ctx) {
    settle(ctx);
    return round_ + 1;
  }
  // Buffers of a round: `slot` is rank r's (slot_bytes), `slots` all n of them
  // back to back, `result` one more slot_bytes the ranks share.
  char* slots(uint32_t round) const { return base_ + layout_.slots_offset(round & 1); }
  char* slot(uint32_t round, int r) const { return slots(round) + static_cast<size_t>(r) * layout_.slot_bytes; }
  char* result(uint32_t round) const { return base_ + layout_.result_offset(round & 1); }
  // What rank `from` tells rank `to` in `round` (layout.h: DirectoryEntry);
  // written and read as a slot is.
  DirectoryEntry* directory(uint32_t round, int from, int to) const {
    return reinterpret_cast<DirectoryEntry*>(base_ + layout_.directory_entry_offset(round & 1, from, to));
  }

  // The word of rank r for `round` (RankLine::word, or its post entry): a
  // collective whose every rank's contribution is at most kWordBytes writes
  // it instead of its slot before arriving, and reads the others' after the
  // round's wait.
  static constexpr size_t kWordBytes = sizeof(uint64_t);
  void put_word(uint32_t round, const void* data, size_t n) {
    line(rank_).word[round & 1].store(word_of(data, n), std::memory_order_relaxed);
  }
  uint64_t word(uint32_t round, int r) const {
    if (const PostEntry* e = posted_for(r, round)) return e->word.load(std::memory_order_relaxed);
    return line(r).word[round & 1].load(std::memory_order_relaxed);
  }
  void get_word(uint32_t round, int r, void* out, size_t n) const {
    const uint64_t v = word(round, r);
    if (n > 0) std::memcpy(out, &v, n);
  }

  // Post rounds (Posts above), for at most kPostBytes per rank.
  // next_post_round() is next_round() for them: it waits only for the round
  // that last used this rank's entry (and payload). post_and_leave() writes the entry
  // (signature, and the data: a word in the entry, more in its payload) and
  // arrives (`awaited`: by ranks that wait for this one alone, a broadcast's
  // root); post_and_await() writes it (signature), arrives, waits for `root`
  // alone and checks its signature. After the round's wait and signature
  // check, get_post() copies rank r's n bytes of `round`, and post_data()
  // points at them when n > kWordBytes (r posted them; a payload stays until r
  // reuses its entry, after everyone arrived at the next round).
  static constexpr size_t kPostBytes = shm_engine::kPostBytes;
  // Whether a rooted operation of `bytes` per rank runs in a post round: a
  // word always; more up to the layout's payload (kPostBytes up to 128 ranks)
  // with 3 ranks or more. With 2 the root already runs one call ahead of the
  // one other rank through the slots, and posts of 512 B-1 KiB took 0.05-0.1
  // us longer there (docs/tuning_log.md: Posts carry up to 2 KiB).
  bool posts_carry(size_t bytes) const { return bytes <= kWordBytes || (bytes <= post_bytes_ && size_ > 2); }
  uint32_t next_post_round(CollectiveContext& ctx);
  uint32_t post_and_leave(CollectiveContext& ctx, Signature sig, const void* data, size_t n, bool awaited);
  uint32_t post_and_await(CollectiveContext& ctx, Signature sig, int root);
  const char* post_data(uint32_t round, int r) const { return base_ + layout_.payload_offset(r, round); }
  void get_post(uint32_t round, int r, void* out, size_t n) const {
    if (n <= kWordBytes)
      get_word(round, r, out, n);
    else
      std::memcpy(out, post_data(round, r), n);
  }

  // The first round of an operation: publishes `sig`, arrives, waits for every
  // rank and checks that all called the same operation. Returns the round.
  uint32_t start(CollectiveContext& ctx, Signature sig, bool sizes_may_differ = false);
  // Any later round: arrives and waits for every rank. Returns the round.
  uint32_t sync(CollectiveContext& ctx);
  // The same for the last round of an operation in which this rank has
  // nothing left to read: arrive and leave (see Leaving above).
  uint32_t start_and_leave(CollectiveContext& ctx, Signature sig);
  uint32_t sync_and_leave(CollectiveContext& ctx);
  // Round j of an operation that runs in rounds: the first starts it, the
  // others sync (so does the first of a fallback after one copy failed:
  // `started`); `leave` for a rank with nothing to read in it.
  uint32_t enter(CollectiveContext& ctx, size_t j, Signature sig, bool leave = false, bool started = false) {
    if (j == 0 && !started) return leave ? start_and_leave(ctx, sig) : start(ctx, sig);
    return leave ? sync_and_leave(ctx) : sync(ctx);
  }
  // The size rank r published for the operation that started at `first`.
  uint64_t size_of(int r, uint32_t first) const;

  // Fails the current operation: aborts the segment at this round with the
  // reason and throws DistBackendError("shared-memory <op> #<seq> (round r):
  // <what>").
  [[noreturn]] void fail(CollectiveContext& ctx, const std::string& what);
  // Marks the segment failed (first caller wins) and wakes every waiter, so
  // that every rank fails the round this rank arrived at last (unless every
  // rank arrived at it) or else the next, and every later one, naming this rank. For a failure outside the segment (the
  // group failed elsewhere); may be called from any thread.
  void abort(const std::string& reason);
  // "rank 5 (group rank 2)": for error messages.
  std::string describe_rank(int r) const;
  // Rank r's process has exited (known only on one host and pid namespace).
  bool process_gone(int r) const;
  // Wakes this process's waiters (they re-check their deadline and the
  // transport): for a group being destroyed.
  void wake_all();
  // Says goodbye: this rank leaves the group (destroy_process_group). A rank
  // that waits for it fails at once, naming it as having left; a round it
  // arrived at before leaving still completes.
  void leave();

 private:
  HostSegment(ShmSegment segment, Layout layout, int rank, std::vector<int> global_ranks, std::string label,
              SingleCopyRange single_copy);
  RankLine& line(int r) const { return lines_[r]; }
  bool has_left(int r) const { return lines_[r].left.load(std::memory_order_acquire) != 0; }
  bool arrived(int r, uint32_t round) const {
    return static_cast<int32_t>(lines_[r].round.load(std::memory_order_acquire) - round) >= 0;
  }
  // The first rank from `from` on (wrapping) that has not arrived; -1 if
  // none. `only` >= 0: a wait for that rank alone (a post round's root).
  int first_missing(uint32_t round, int from, int only = -1) const;
  int next_missing(uint32_t round, int q, int only = -1) const;
  void arrive(uint32_t round);
  // The first round of an operation: publishes its signature and arrives.
  uint32_t publish_and_arrive(CollectiveContext& ctx, Signature sig);
  void wait_all(uint32_t round, CollectiveContext& ctx, int only = -1);
  void wait_slow(uint32_t round, int missing, CollectiveContext& ctx, int only);
  // Rank q's signature for the operation that started at `first`, and the
  // tag (operation and number) of that operation, for errors.
  Signature signature_of(int q, uint32_t first) const {
    if (const PostEntry* e = posted_for(q, first))
      return {e->what.load(std::memory_order_relaxed), e->size.load(std::memory_order_relaxed)};
    const RankLine& l = line(q);
    return {l.what[first & 1].load(std::memory_order_relaxed), l.size[first & 1].load(std::memory_order_relaxed)};
  }
  uint64_t tag_of(int q, uint32_t first) const;
  // `only` >= 0: rank `only`'s signature alone.
  void check_signatures(CollectiveContext& ctx, uint32_t first, Signature mine, bool sizes_may_differ,
                        uint64_t left = 0, int only = -1);
  // Rank r's post entry for `round`, or null if its entry holds another round.
  const PostEntry* post_for(int r, uint32_t round) const {
    const PostEntry& e = posts_[static_cast<size_t>(r) * kPostDepth + round % kPostDepth];
    return e.round.load(std::memory_order_seq_cst) == wide(round) ? &e : nullptr;
  }
  // The same after rank r arrived at `round`, looking at the entry only if r
  // posted in that round or later (RankLine::posted, in the line the wait read).
  const PostEntry* posted_for(int r, uint32_t round) const {
    if (static_cast<int32_t>(line(r).posted.load(std::memory_order_relaxed) - round) < 0) return nullptr;
    return post_for(r, round);
  }
  // `round` (within 2^31 of this rank's last) counted in 64 bits, which never wrap.
  uint64_t wide(uint32_t round) const {
    return round64_ + static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(round - round_)));
  }
  static uint64_t word_of(const void* data, size_t n) {
    uint64_t v = 0;
    if (n > 0) std::memcpy(&v, data, n);  // an empty tensor may have no data
    return v;
  }
  uint32_t post(CollectiveContext& ctx, Signature sig, const void* data, size_t n, bool awaited);
  // Rank 0's word in a round that carries a pick: the way in bit 0, and this bit when the call is timed.
  static constexpr uint64_t kPickTimed = 2;
  void propose_as_rank_zero(uint32_t round, RankZeroChoice& choice, size_t bytes);
  void record_last_call(uint32_t round, RankZeroChoice& choice);
  // After waiting for `round`: fails if another rank failed it (or earlier).
  void check_verdict(uint32_t round, CollectiveContext& ctx) {
    if (abort_->state.load(std::memory_order_seq_cst) != 0) check_verdict_slow(round, ctx);
  }
  void check_verdict_slow(uint32_t round, CollectiveContext& ctx);
  // Claims the abort block: `round` and every later one fail (see
  // AbortBlock and abort_block.cpp). Returns false only when the claim was
  // withdrawn; otherwise a verdict is final (this one or an earlier one).
  enum class Claim {
    Final,             // this rank saw the round fail (arguments differ)
    UnlessAllArrived,  // it waits at `round`: withdraw if everyone (or `only`) arrived after all
    AfterMyArrivals,   // from outside the segment: rounds this rank arrived at may complete
  };
  bool claim_abort(uint32_t round, const std::string& reason, Claim how, int only = -1);
  // The block's state once its owner has decided (0: nothing failed).
  uint64_t verdict() const;
  // fail() for a wait that cannot go on: returns instead of throwing if the
  // round completed after all (everyone, or `only`, arrived).
  void give_up(CollectiveContext& ctx, const std::string& what, int only = -1);
  std::string failure_message(CollectiveContext& ctx, const std::string& what) const;
  // Waits for every rank to arrive at this rank's last round, if it has not
  // seen them there (it left it, or waited for a root alone), and checks
  // their signatures of a round it left.
  void settle(CollectiveContext& ctx) {
    if (confirmed_ != round_) settle_slow(ctx);
  }
  void settle_slow(CollectiveContext& ctx);
  std::string aborted_by(uint64_t verdict) const;
  std::string missing_ranks(uint32_t round, int only = -1) const;

  ShmSegment segment_;
  Layout layout_;
  int rank_;
  int size_;
  std::vector<int> global_ranks_;
  std::string label_;
  char* base_;
  AbortBlock* abort_;
  RankLine* lines_;
  PostEntry* posts_;       // kPostDepth per rank
  uint32_t round_ = 0;     // the last round this rank arrived at
  uint64_t round64_ = 0;   // the same, counted in 64 bits (post entries name their round so)
  uint32_t confirmed_ = 0;  // the last round this rank saw every rank arrive at
  bool left_checks_ = false;  // it left round_ and must still check the others' signatures of it
  Signature left_sig_{};
  uint64_t left_tag_ = 0;  // the tag (operation and number) of the operation left
  uint32_t cpu_ = 0;    // the CPU it arrived from
  std::chrono::nanoseconds poll_only_;  // how long to poll before yielding too
  std::chrono::nanoseconds spin_;       // how long to poll (and yield) before sleeping
  size_t one_round_bytes_ = 0;          // read when the group is made: asked on every reduction
  SingleCopyRange single_copy_;         // agreed when the group is made
  bool oversubscribed_ = false;         // more ranks than the host has cores
  size_t post_bytes_ = 0;               // layout_.post_bytes()
  bool test_read_fails_ = false;        // TDIST_TEST_SHM_SINGLE_COPY_FAIL
  RankZeroChoice two_rank_all_reduce_;
  RankZeroChoice all_gather_blocks_;
  RankZeroChoice all_to_all_blocks_;
  Clock::time_point next_liveness_check_{};  // wait_slow: when to look at the missing ranks' processes again
};

}  // namespace tdist::shm_engine
