// The collectives of the host segment that only move data: barrier, broadcast,
// all_gather, gather, scatter, all_to_all. Each round carries one piece per
// writer; readers copy it out after the round's sync, while the writers go on
// to fill the other parity's buffers with the next piece.
#include <algorithm>
#include <cstring>
#include <optional>

#include "shm_engine/chunking.h"
#include "shm_engine/collectives.h"
#include "util/bulk_copy.h"

namespace tdist::shm_engine {

namespace {

char* bytes_of(const Tensor& t) { return static_cast<char*>(t.data()); }

// The ways of HostSegment::all_gather_blocks and all_to_all_blocks.
constexpr int kOneCopy = 0;

// The size rank 0 picks a way of moving blocks of `bytes` for: 0 (one copy,
// untimed) below a slot, where one copy was as fast or faster in both
// placements of the cores measured (docs/tuning_log.md, "Ways picked by timing
// both") and timing cost more than it could save.
size_t timed_from(const HostSegment& a, size_t bytes) { return bytes >= a.slot_bytes() ? bytes : 0; }

// Every rank's block fits in its word (HostSegment::word): one round, no slots.
bool words_suffice(const std::vector<Tensor>& blocks) {
  for (const auto& b : blocks)
    if (b.nbytes() > HostSegment::kWordBytes) return false;
  return true;
}

// The rounds an all_to_all needs, as each rank publishes them in its first
// round (its signature's size) and every rank then takes the largest of.
struct Rounds {
  static constexpr uint64_t kMax = UINT32_MAX;
  size_t rounds = 1;         // through the segment
  size_t direct_rounds = 0;  // the blocks read in one copy would need there, if the reads fail (0: none)
  void add(size_t count, bool direct) {
    size_t& r = direct ? direct_rounds : rounds;
    r = std::max(r, count);
  }
  bool too_many() const { return rounds > kMax || direct_rounds > kMax; }
  bool any_direct() const { return direct_rounds > 0; }
  uint64_t packed() const { return rounds | uint64_t{direct_rounds} << 32; }
  void merge(uint64_t other) {
    rounds = std::max<size_t>(rounds, other & kMax);
    direct_rounds = std::max<size_t>(direct_rounds, other >> 32);
  }
};

}  // namespace

void barrier(HostSegment& a, CollectiveContext& ctx) { a.start(ctx, signature(OpCode::Barrier)); }

// The root alone writes in a round, so a piece fills every slot of it. Small
// data travels in the root's post instead (HostSegment::posts_carry; a word
// in its entry, with its arrival: HostSegment::word).
void broadcast(HostSegment& a, CollectiveContext& ctx, const Tensor& t, int root) {
  const size_t bytes = t.nbytes();
  const size_t piece = a.slot_bytes() * static_cast<size_t>(a.size());
  const Signature sig = signature(OpCode::Broadcast, static_cast<int>(t.dtype()), -1, root, bytes);
  const bool is_root = a.rank() == root;
  if (a.posts_carry(bytes)) {
    // A post round (HostSegment: Posts): the root leaves, the others wait for it alone.
    a.next_post_round(ctx);
    if (is_root) {
      a.post_and_leave(ctx, sig, t.data(), bytes, /*awaited=*/true);
      return;
    }
    const uint32_t r = a.post_and_await(ctx, sig, root);
    a.get_post(r, root, t.data(), bytes);
    return;
  }
  // Through the segment even where one copy is on: the root's copy in and
  // the readers' copies out overlap piece by piece, and the root leaves
  // without waiting, so a loop of broadcasts overlaps too; reading the root's
  // tensor in place took twice as long on 2 ranks (docs/tuning_log.md).
  const size_t rounds = rounds_for(bytes, piece);
  for (size_t j = 0; j < rounds; ++j) {
    const uint32_t r = a.next_round(ctx);
    const size_t at = j * piece, len = piece_len(bytes, at, piece);
    if (is_root) publish(a.slots(r), bytes_of(t) + at, len, rounds == 1 && streams(len));
    a.enter(ctx, j, sig, /*leave=*/is_root && j + 1 == rounds);
    if (!is_root && len > 0) copy(bytes_of(t) + at, a.slots(r), len);
  }
}

void all_gather(HostSegment& a, CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) {
  const int n = a.size(), me = a.rank();
  const size_t piece = a.slot_bytes();
  size_t total = 0, rounds = 1;
  for (const auto& o : outputs) {
    total += o.nbytes();
    rounds = std::max(rounds, rounds_for(o.nbytes(), piece));
  }
  const Signature sig = signature(OpCode::AllGather, static_cast<int>(input.dtype()), -1, -1, total);
  bulk_copy(bytes_of(outputs[me]), input.data(), input.nbytes());
  if (words_suffice(outputs)) {
    const uint32_t r = a.next_round(ctx);
    a.put_word(r, input.data(), input.nbytes());
    a.start(ctx, sig);
    for (int q = 0; q < n; ++q)
      if (q != me) a.get_word(r, q, outputs[q].data(), outputs[q].nbytes());
    return;
  }
  bool started = false;
  std::optional<TimedWay> timed;
  if (const size_t block = total / static_cast<size_t>(n); a.single_copy(block, /*oversubscribed_too=*/false)) {
    // Each rank reads every other rank's input where it lies (HostSegment: one
    // copy); with a core for each rank, unless rank 0 picks the segment
    // (HostSegment::all_gather_blocks), which then carries them from the next round on.
    const uint32_t r = a.next_round(ctx);
    a.put_block(r, input.data(), input.nbytes());
    const bool chosen = !a.oversubscribed();
    if (chosen) a.propose(r, a.all_gather_blocks(), timed_from(a, block));
    a.start(ctx, sig);
    for (int q = 0; q < n; ++q)
      if (q != me && a.block_size(q, r) != outputs[q].nbytes())
        a.fail(ctx, "size mismatch: " + a.describe_rank(q) + " contributes " + std::to_string(a.block_size(q, r)) +
                        " bytes where this rank's output for it holds " + std::to_string(outputs[q].nbytes()));
    const RankZeroChoice::Picked way = chosen ? a.picked(r, a.all_gather_blocks()) : RankZeroChoice::Picked{};
    if (way.timed) timed.emplace(a.all_gather_blocks());
    if (way.way == kOneCopy) {
      std::string why;
      for (int q = 0; q < n && why.empty(); ++q)
        if (q != me) why = a.read_block(q, r, outputs[q].data());
      if (a.all_read(ctx, why)) return;
    }
    started = true;
  }
  for (size_t j = 0; j < rounds; ++j) {
    const uint32_t r = a.next_round(ctx);
    const size_t at = j * piece;
    if (size_t len = piece_len(input.nbytes(), at, piece)) copy(a.slot(r, me), bytes_of(input) + at, len);
    a.enter(ctx, j, sig, /*leave=*/false, started);
    for (int q = 0; q < n; ++q)
      if (size_t len = piece_len(outputs[q].nbytes(), at, piece); q != me && len > 0)
        copy(bytes_of(outputs[q]) + at, a.slot(r, q), len);
  }
}

void gather(HostSegment& a, CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) {
  const int n = a.size(), me = a.rank();
  const size_t piece = a.slot_bytes(), bytes = input.nbytes();
  const Signature sig = signature(OpCode::Gather, static_cast<int>(input.dtype()), -1, root, bytes);
  if (me == root) bulk_copy(bytes_of(outputs[root]), input.data(), bytes);
  if (a.posts_carry(bytes)) {
    // A post round (HostSegment: Posts): the contributors leave, the root waits for them.
    if (me != root) {
      a.next_post_round(ctx);
      a.post_and_leave(ctx, sig, input.data(), bytes, /*awaited=*/false);
      return;
    }
    const uint32_t r = a.next_round(ctx);
    a.start(ctx, sig);
    for (int q = 0; q < n; ++q)
      if (q != root) a.get_post(r, q, outputs[q].data(), bytes);
    return;
  }
  for (size_t j = 0, rounds = rounds_for(bytes, piece); j < rounds; ++j) {
    const uint32_t r = a.next_round(ctx);
    const size_t at = j * piece, len = piece_len(bytes, at, piece);
    if (me != root && len > 0) copy(a.slot(r, me), bytes_of(input) + at, len);
    a.enter(ctx, j, sig, /*leave=*/me != root && j + 1 == rounds);
    if (me != root || len == 0) continue;
    for (int q = 0; q < n; ++q)
      if (q != root) copy(bytes_of(outputs[q]) + at, a.slot(r, q), len);
  }
}

// The root writes every other rank's piece into that rank's slot.
void scatter(HostSegment& a, CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) {
  const int n = a.size(), me = a.rank();
  const size_t piece = a.slot_bytes(), bytes = output.nbytes();
  const Signature sig = signature(OpCode::Scatter, static_cast<int>(output.dtype()), -1, root, bytes);
  if (me == root) bulk_copy(output.data(), inputs[root].data(), bytes);
  for (size_t j = 0, rounds = rounds_for(bytes, piece); j < rounds; ++j) {
    const uint32_t r = a.next_round(ctx);
    const size_t at = j * piece, len = piece_len(bytes, at, piece);
    if (me == root && len > 0)
      for (int q = 0; q < n; ++q)
        if (q != root) copy(a.slot(r, q), bytes_of(inputs[q]) + at, len);
    a.enter(ctx, j, sig, /*leave=*/me == root && j + 1 == rounds);
    if (me != root && len > 0) copy(bytes_of(output) + at, a.slot(r, me), len);
  }
}

// Each slot holds one part per destination. A rank knows only the sizes it
// sends and receives, so in the first round each tells d in the directory how
// much it sends to d and from where (checked by d), and publishes the rounds
// it needs; all run the largest count.
//
// With a core for each rank, a block of TDIST_SHM_SINGLE_COPY_BYTES or more
// is not copied into the segment at all: its receiver reads it whole from
// the sender's input after the first round (HostSegment: one copy), and a
// last round (all_read) keeps the inputs untouched until every read is over.
// Its sender and receiver decide alike from its size, which they agree on
// (checked). Through the segment such a block crosses between the ranks'
// cores twice, which costs 3x more where they share no cache
// (docs/tuning_log.md: "all_to_all in one copy with a core each"), and 1.4x
// less where they share one; so rank 0 picks (HostSegment::all_to_all_blocks) in
// the first round, and such blocks follow the others through the segment
// where it picks the segment.
void all_to_all(HostSegment& a, CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                const std::vector<Tensor>& inputs) {
  const int n = a.size(), me = a.rank();
  const size_t cap = part_bytes(a.slot_bytes(), n);
  // Decided once: a failed read turns one copy off for the group (all_read).
  const size_t direct_from = a.single_copy(SIZE_MAX, /*oversubscribed_too=*/false) ? a.single_copy_bytes() : SIZE_MAX;
  const auto direct = [&](size_t bytes) { return bytes != 0 && bytes >= direct_from; };
  Rounds need;
  size_t largest = 0;  // of the blocks meant for one copy: the size rank 0's pick is for
  for (int i = 0; i < n; ++i) {
    if (i == me) continue;  // copied here
    for (size_t bytes : {inputs[i].nbytes(), outputs[i].nbytes()}) {
      const bool one_copy = direct(bytes);
      need.add(rounds_for(bytes, cap), one_copy);
      if (one_copy) largest = std::max(largest, bytes);
    }
  }
  if (need.too_many()) a.fail(ctx, "a block of more than 2^32 - 1 pieces of " + std::to_string(cap) + " bytes");
  const Signature sig = signature(OpCode::AllToAll, static_cast<int>(inputs[me].dtype()), -1, -1, need.packed());
  bulk_copy(outputs[me].data(), inputs[me].data(), outputs[me].nbytes());
  // Piece j of every block that `moves` through the segment; the first round starts the operation.
  const auto move_pieces = [&](size_t j, const auto& moves, bool first) {
    const uint32_t r = a.next_round(ctx);
    const size_t at = j * cap;
    for (int d = 0; d < n; ++d) {
      if (d == me) continue;
      // How many bytes go to d, and where they lie (for one copy).
      if (first) *a.directory(r, me, d) = {inputs[d].nbytes(), reinterpret_cast<uintptr_t>(inputs[d].data())};
      if (size_t len = piece_len(inputs[d].nbytes(), at, cap); len > 0 && moves(inputs[d].nbytes()))
        copy(a.slot(r, me) + static_cast<size_t>(d) * cap, bytes_of(inputs[d]) + at, len);
    }
    if (first) {
      if (direct_from != SIZE_MAX) a.propose(r, a.all_to_all_blocks(), timed_from(a, largest));
      const uint32_t started = a.start(ctx, sig, /*sizes_may_differ=*/true);
      for (int q = 0; q < n; ++q) {
        if (q == me) continue;
        need.merge(a.size_of(q, started));
        const uint64_t sends = a.directory(started, q, me)->bytes;
        if (sends != outputs[q].nbytes())
          a.fail(ctx, "size mismatch: " + a.describe_rank(q) + " sends " + std::to_string(sends) +
                          " bytes to this rank, which expects " + std::to_string(outputs[q].nbytes()));
      }
    } else {
      a.sync(ctx);
    }
    for (int q = 0; q < n; ++q)
      if (size_t len = piece_len(outputs[q].nbytes(), at, cap); q != me && len > 0 && moves(outputs[q].nbytes()))
        copy(bytes_of(outputs[q]) + at, a.slot(r, q) + static_cast<size_t>(me) * cap, len);
    return r;
  };
  const auto in_segment = [&](size_t bytes) { return !direct(bytes); };
  const uint32_t first = move_pieces(0, in_segment, /*first=*/true);
  // Read wherever rank 0 proposed, so that it takes the others' reports of
  // the last timed call from the round they were put in.
  const RankZeroChoice::Picked way =
      direct_from != SIZE_MAX ? a.picked(first, a.all_to_all_blocks()) : RankZeroChoice::Picked{};
  std::string why;
  std::optional<TimedWay> timed;
  if (need.any_direct()) {
    if (way.timed) timed.emplace(a.all_to_all_blocks());
    if (way.way != kOneCopy) {
      for (size_t j = 1; j < need.rounds; ++j) move_pieces(j, in_segment, false);
      for (size_t j = 0; j < need.direct_rounds; ++j) move_pieces(j, direct, false);
      return;
    }
    for (int q = 0; q < n && why.empty(); ++q)
      if (q != me && direct(outputs[q].nbytes()))
        why = a.read_from(q, reinterpret_cast<const void*>(static_cast<uintptr_t>(a.directory(first, q, me)->address)),
                          outputs[q].data(), outputs[q].nbytes());
  } else if (need.rounds > 2 && a.single_copy((need.rounds - 1) * cap)) {
    // With more ranks than cores: past the first piece, each rank reads the
    // rest of its blocks from their senders' inputs, when some block needs
    // at least two more rounds and what would follow is at least the
    // threshold; for one more piece the extra round cost more than the copy
    // saved.
    for (int q = 0; q < n && why.empty(); ++q) {
      if (q == me || outputs[q].nbytes() <= cap) continue;
      const uint64_t address = a.directory(first, q, me)->address;
      why = a.read_from(q, reinterpret_cast<const char*>(static_cast<uintptr_t>(address)) + cap,
                        bytes_of(outputs[q]) + cap, outputs[q].nbytes() - cap);
    }
    if (a.all_read(ctx, why)) return;
    // Refused somewhere: the rest goes through the segment, from the second piece on.
  }
  for (size_t j = 1; j < need.rounds; ++j) move_pieces(j, in_segment, false);
  if (!need.any_direct() || a.all_read(ctx, why)) return;
  // Refused somewhere: the blocks meant for one copy go through the segment.
  for (size_t j = 0; j < need.direct_rounds; ++j) move_pieces(j, direct, false);
}

}  // namespace tdist::shm_engine
