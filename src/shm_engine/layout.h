// The shared-memory segment of one process group whose ranks all run on one
// host: the layout of its segment.
//
//   Header | AbortBlock | RankLine x n | PostEntry x n x kPostDepth | (pad to 4 KiB) |
//   post payloads: n x kPostDepth x kPostBytes |
//   directory, parity 0 and 1: n x n x DirectoryEntry (pad to 4 KiB) | slots, parity 0: n x S |
//   slots, parity 1: n x S | result, parity 0: S | result, parity 1: S
//
// Collectives advance in rounds that every rank counts alike (see host_segment.h):
// round r uses the slots and the result area of parity r & 1, so that a rank
// may fill round r+1's buffers while slower ranks still read round r's. Each
// rank's counter sits in a line of its own, so that arriving never invalidates
// another rank's line.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tdist::shm_engine {

// 128 bytes: adjacent-line prefetchers move 64-byte lines in pairs, so a
// counter alone in 64 bytes would still share traffic with its neighbour.
inline constexpr size_t kLine = 128;
inline constexpr size_t kPage = 4096;
inline constexpr uint32_t kMagic = 0x74415245;  // "tARE"
inline constexpr uint32_t kVersion = 8;

// Written once by the creator before it publishes the segment's name.
struct alignas(kLine) Header {
  uint32_t magic;
  uint32_t version;
  uint32_t ranks;
  uint32_t reserved;
  uint64_t slot_bytes;
  uint64_t total_bytes;
};

// The first rank to fail an operation claims the block and leaves its reason,
// so that every other rank stops waiting at once and can say who failed and
// why. `state` holds the whole verdict in one word (abort_state below), read
// with one load after every round: the first round that fails (on every
// rank: no rank completes it, nor any later one), who failed, and whether the
// verdict is final. A claim starts pending: its owner then looks once more
// whether every rank arrived at that round after all, and either withdraws it
// (the round completes everywhere) or makes it final (HostSegment::claim_abort).
struct alignas(kLine) AbortBlock {
  std::atomic<uint64_t> state;  // 0: nothing failed
  char reason[4 * kLine - sizeof(uint64_t)];  // complete once `state` is final
};

namespace abort_state {
inline constexpr uint64_t kFinal = uint64_t{1} << 63;
// `owner`: the group rank that failed; `round`: the first round that fails.
inline constexpr uint64_t make(int owner, uint32_t round, bool final) {
  return (static_cast<uint64_t>(owner + 1) << 32) | round | (final ? kFinal : 0);
}
inline constexpr int owner(uint64_t s) { return static_cast<int>((s >> 32) & 0x7fffffff) - 1; }
inline constexpr uint32_t round(uint64_t s) { return static_cast<uint32_t>(s); }
inline constexpr bool is_final(uint64_t s) { return (s & kFinal) != 0; }
// Whether the final verdict `s` fails `r` (rounds wrap: compared as a signed difference).
inline constexpr bool fails(uint64_t s, uint32_t r) {
  return s != 0 && static_cast<int32_t>(r - round(s)) >= 0;
}
}  // namespace abort_state

struct alignas(kLine) RankLine {
  // The last round this rank arrived at (it wrote its data for that round);
  // released by the rank, acquired by the others. Wraps around: compared as a
  // signed difference.
  std::atomic<uint32_t> round;
  // The CPU this rank last arrived from: a waiter that runs on the same one
  // yields at once instead of polling (the rank it awaits likely waits for
  // this very CPU).
  std::atomic<uint32_t> cpu;
  // What this rank's current operation is (see Signature in host_segment.h), by the
  // parity of the operation's first round: written before arriving there,
  // read by the others after it.
  std::atomic<uint64_t> what[2];
  std::atomic<uint64_t> size[2];
  // A collective's data when it is at most 8 bytes per rank (a scalar: a
  // loss, a count, a flag), by the parity of its round, in place of the slot:
  // the waiter's one cache miss on this line brings the arrival, the
  // signature and the data together, where a slot costs a second miss after
  // it (see HostSegment::word).
  std::atomic<uint64_t> word[2];
  // Ranks blocked in futex_wait on `round`: the owner makes the wake syscall
  // only when this is non-zero.
  std::atomic<uint32_t> sleepers;
  // The last round this rank posted in (PostEntry), written before it arrives
  // there: a reader of round r looks at the post entry only when this is at
  // least r, so that rounds without posts cost no look at a second line.
  std::atomic<uint32_t> posted;
  // The owner's process (util/process_identity.h), written once when it maps
  // the segment: a waiter tells a rank that died from a slow one without a
  // socket to it. Read only on the slow path, past the first line.
  std::atomic<int32_t> pid;
  std::atomic<uint64_t> started;
  std::atomic<uint64_t> pid_ns;
  // 1 once the owner destroyed its group (HostSegment::leave): a goodbye, so that
  // a rank waiting for it fails at once naming it as gone, not as crashed.
  std::atomic<uint32_t> left;
  // The tag (operation and sequence number) of `what`'s operation, by the same
  // parity: read only for the error of a mismatch, so past the first line.
  std::atomic<uint64_t> tag[2];
};
// Everything a waiter reads is in the first 64-byte line.
static_assert(offsetof(RankLine, posted) + sizeof(uint32_t) <= 64);
static_assert(sizeof(RankLine) == kLine);

// A rank's post for one round of a small rooted operation (a broadcast, reduce
// or gather of at most kPostBytes per rank), where nobody waits for every rank
// (HostSegment: Posts): its signature, its data (up to 8 bytes; more in its
// payload, below) and the round it is for. Each rank has kPostDepth of them,
// used by round modulo kPostDepth, so that a rank that waits for nobody (a
// broadcast's root, a reduce's contributors) runs up to kPostDepth - 1
// operations ahead of the slowest rank. One line each: a reader's one miss
// brings everything of the round when the data is a word.
inline constexpr uint32_t kPostDepth = 64;
// The data of a post of more than 8 bytes: one payload per post entry, in a
// region of its own (128 KiB a rank, touched only as far as posts use it).
// With 4 ranks on 2 cores a broadcast of 64 bytes to 2 KiB through the slots
// took about 4 us (every rank must meet, and then wake, each call) against
// 0.5-1 in a post round (docs/tuning_log.md: Posts carry up to 2 KiB).
// Groups of more than 128 ranks on a host get smaller payloads
// (Layout::post_bytes), so that the region stays within kMaxPostRegion.
inline constexpr size_t kPostBytes = 2048;
inline constexpr size_t kMaxPostRegion = 16u << 20;
struct alignas(64) PostEntry {
  // The round this entry holds, counted in 64 bits so that it never wraps
  // (0: none); written before the owner arrives there.
  std::atomic<uint64_t> round;
  std::atomic<uint64_t> what;
  std::atomic<uint64_t> size;
  std::atomic<uint64_t> word;
  std::atomic<uint64_t> tag;
};
static_assert(sizeof(PostEntry) == 64);

// What a rank tells one destination about its block in a round, beside the
// slots so that a slot's n parts stay S / n bytes each: all_to_all's blocks of
// a power of two bytes then fill whole rounds (a header inside the part made
// a block of two parts take three rounds).
struct DirectoryEntry {
  uint64_t bytes;    // what the rank sends to the destination
  uint64_t address;  // where those bytes lie in the sender (for one copy)
};

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "atomics in shared memory must be lock-free (address-free)");

// Offsets of every part for `ranks` ranks and slots of `slot_bytes`.
struct Layout {
  int ranks = 0;
  size_t slot_bytes = 0;

  // The slot size asked for (TDIST_SHM_SLOT_BYTES), capped so that a group
  // never maps more than kMaxTotal bytes whatever its size; at least a page,
  // and 256 bytes per rank (slots split into one part per rank).
  static constexpr size_t kMaxTotal = 64u << 20;
  static Layout for_group(int ranks, size_t requested_slot_bytes) {
    Layout l{ranks, 0};
    const size_t fixed = l.data_offset();
    size_t cap = (fixed < kMaxTotal ? kMaxTotal - fixed : 0) / (2 * (static_cast<size_t>(ranks) + 1));
    size_t slot = requested_slot_bytes < cap ? requested_slot_bytes : cap;
    size_t least = (std::max<size_t>(kPage, 256 * static_cast<size_t>(ranks)) + kPage - 1) / kPage * kPage;
    l.slot_bytes = slot < least ? least : slot / kPage * kPage;
    return l;
  }

  static size_t abort_offset() { return sizeof(Header); }
  static size_t lines_offset() { return sizeof(Header) + sizeof(AbortBlock); }
  size_t posts_offset() const { return lines_offset() + static_cast<size_t>(ranks) * sizeof(RankLine); }
  size_t payloads_offset() const {
    size_t end = posts_offset() + static_cast<size_t>(ranks) * kPostDepth * sizeof(PostEntry);
    return (end + kPage - 1) / kPage * kPage;
  }
  // The bytes of each post payload: kPostBytes, halved while the ranks'
  // payloads would take more than kMaxPostRegion; 0 (posts carry words
  // only) below 64. The same on every rank: it depends on `ranks` alone.
  size_t post_bytes() const {
    size_t p = kPostBytes;
    while (p >= 64 && static_cast<size_t>(ranks) * kPostDepth * p > kMaxPostRegion) p /= 2;
    return p >= 64 ? p : 0;
  }
  // Rank r's payload for the post entry of `round`.
  size_t payload_offset(int r, uint32_t round) const {
    return payloads_offset() + (static_cast<size_t>(r) * kPostDepth + round % kPostDepth) * post_bytes();
  }
  size_t directory_offset() const {
    return payloads_offset() + static_cast<size_t>(ranks) * kPostDepth * post_bytes();
  }
  // Rank `from`'s entry for `to`, by parity.
  size_t directory_entry_offset(uint32_t parity, int from, int to) const {
    const size_t n = static_cast<size_t>(ranks);
    return directory_offset() + ((parity * n + static_cast<size_t>(from)) * n + static_cast<size_t>(to)) *
                                    sizeof(DirectoryEntry);
  }
  size_t data_offset() const {
    const size_t n = static_cast<size_t>(ranks);
    return directory_offset() + (2 * n * n * sizeof(DirectoryEntry) + kPage - 1) / kPage * kPage;
  }
  size_t slots_offset(uint32_t parity) const { return data_offset() + parity * ranks * slot_bytes; }
  size_t result_offset(uint32_t parity) const { return data_offset() + (2 * ranks + parity) * slot_bytes; }
  size_t total_bytes() const { return data_offset() + 2 * (static_cast<size_t>(ranks) + 1) * slot_bytes; }
};

}  // namespace tdist::shm_engine
