// A single-producer single-consumer byte ring in shared memory: the data path
// between two ranks of one host. The writer appends bytes, the reader consumes
// them in order, so the transport's framing (header + payload) runs over it
// unchanged. Each side keeps its own position in a separate cache line.
//
// Large copies move in pieces, each published as soon as it is in place, so
// that the reader copies one piece out while the writer copies the next in
// (docs/tuning_log.md: Transport, rings copy in pieces).
//
// Sleeping: a side that is about to block (in epoll) raises its flag, then
// re-checks the ring; the other side checks the flag after moving its
// position and, if raised, clears it and sends a doorbell over the pair's TCP
// socket. The fences make it impossible for both to miss each other (the
// classic store-then-load pattern, sequentially consistent on both sides).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tdist {

struct ShmRingControl {
  alignas(64) std::atomic<uint64_t> head{0};  // bytes ever written (writer)
  alignas(64) std::atomic<uint64_t> tail{0};  // bytes ever consumed (reader)
  alignas(64) std::atomic<uint32_t> reader_sleeping{0};
  alignas(64) std::atomic<uint32_t> writer_sleeping{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory rings need address-free atomics");

class ShmRing {
 public:
  // What one copy moves before its side's position is published: at most
  // kPieceBytes, and for a message that write_both() places whole, an eighth
  // of it from kLeastPieceBytes up, so that the reader starts on a message of
  // 8-512 KiB after its first eighth rather than after 64 KiB of it
  // (docs/tuning_log.md: Transport, rings copy in pieces).
  static constexpr size_t kPieceBytes = 64 * 1024;
  static constexpr size_t kLeastPieceBytes = 4 * 1024;
  static size_t piece_for(size_t message) { return std::clamp(message / 8, kLeastPieceBytes, kPieceBytes); }

  ShmRing() = default;
  ShmRing(ShmRingControl* control, char* data, size_t capacity)
      : ctl_(control), data_(data), cap_(capacity),
        head_(control->head.load(std::memory_order_relaxed)),
        tail_(control->tail.load(std::memory_order_relaxed)), seen_tail_(tail_) {}

  // ---- writer side ----
  // Copies up to n bytes in, in pieces of piece_bytes; returns how many fitted.
  size_t write_some(const void* src, size_t n, size_t piece_bytes = kPieceBytes) {
    size_t k = std::min(n, room(n));
    for (size_t done = 0; done < k;) {
      const size_t piece = std::min(k - done, piece_bytes);
      copy_in(head_, static_cast<const char*>(src) + done, piece);
      head_ += piece;
      done += piece;
      ctl_->head.store(head_, std::memory_order_release);
    }
    return k;
  }
  // Writes a and then b when both fit (a is published with b's first piece);
  // otherwise writes nothing and returns false.
  bool write_both(const void* a, size_t na, const void* b, size_t nb) {
    if (room(na + nb) < na + nb) return false;
    const size_t piece = piece_for(nb);
    const size_t first = std::min(nb, piece);
    copy_in(head_, static_cast<const char*>(a), na);
    if (first > 0) copy_in(head_ + na, static_cast<const char*>(b), first);
    head_ += na + first;
    ctl_->head.store(head_, std::memory_order_release);
    if (nb > first) write_some(static_cast<const char*>(b) + first, nb - first, piece);
    return true;
  }
  bool full() const { return head_ - ctl_->tail.load(std::memory_order_acquire) == cap_; }
  // After writing: true when the reader may be asleep (the flag is cleared:
  // the caller must ring the doorbell).
  bool reader_needs_doorbell() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ctl_->reader_sleeping.load(std::memory_order_relaxed) != 0 &&
           ctl_->reader_sleeping.exchange(0, std::memory_order_acq_rel) != 0;
  }
  // Before blocking on a full ring: true if space appeared meanwhile.
  bool writer_prepare_sleep() {
    ctl_->writer_sleeping.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return !full();
  }

  // ---- reader side ----
  // Clamped to the capacity: the peer's head lives in shared memory, and a
  // corrupted value must not make the reader copy past the ring.
  size_t available() const {
    return std::min<size_t>(static_cast<size_t>(ctl_->head.load(std::memory_order_acquire) - tail_), cap_);
  }
  // Starts fetching the lines the next message's head and first bytes will be
  // read from, before the writer's position is read: a reader that polls then
  // waits for one cache line transfer per message instead of two in a row.
  // The offset is worked out once per position, not on every poll (a
  // division: the capacity need not be a power of two).
  void prefetch_next() {
    if (prefetch_tail_ != tail_) {
      prefetch_tail_ = tail_;
      prefetch_at_ = static_cast<size_t>(tail_ % cap_);
    }
    __builtin_prefetch(data_ + prefetch_at_);
    __builtin_prefetch(data_ + (prefetch_at_ + 64 < cap_ ? prefetch_at_ + 64 : 0));
  }
  // Copies n bytes out (dst may be null: discard); n <= available().
  void read(void* dst, size_t n) {
    for (size_t done = 0; done < n;) {
      const size_t piece = dst ? std::min(n - done, kPieceBytes) : n;
      if (dst) copy_out(static_cast<char*>(dst) + done, piece);
      tail_ += piece;
      done += piece;
      ctl_->tail.store(tail_, std::memory_order_release);
    }
  }
  // After reading: true when the writer waits for space (flag cleared).
  bool writer_needs_doorbell() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ctl_->writer_sleeping.load(std::memory_order_relaxed) != 0 &&
           ctl_->writer_sleeping.exchange(0, std::memory_order_acq_rel) != 0;
  }
  // Before blocking: true if data arrived meanwhile (then do not sleep).
  bool reader_prepare_sleep() {
    ctl_->reader_sleeping.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return available() > 0;
  }
  void reader_awake() { ctl_->reader_sleeping.store(0, std::memory_order_relaxed); }

 private:
  // Free space, at least `want` if there is that much: the reader's position
  // is read from shared memory (a cache miss once the reader moved it) only
  // when the one seen last leaves too little.
  // A position past the writer's (only a corrupted segment has one) counts as
  // a full ring rather than as room to write past the ring's end.
  size_t room(size_t want) {
    size_t used = static_cast<size_t>(head_ - seen_tail_);
    if (used <= cap_ && cap_ - used >= want) return cap_ - used;
    seen_tail_ = ctl_->tail.load(std::memory_order_acquire);
    used = static_cast<size_t>(head_ - seen_tail_);
    return used <= cap_ ? cap_ - used : 0;
  }
  void copy_in(uint64_t pos, const char* src, size_t n) {
    size_t at = static_cast<size_t>(pos % cap_);
    size_t first = std::min(n, cap_ - at);
    std::memcpy(data_ + at, src, first);
    if (n > first) std::memcpy(data_, src + first, n - first);
  }
  void copy_out(char* dst, size_t n) {
    size_t at = static_cast<size_t>(tail_ % cap_);
    size_t first = std::min(n, cap_ - at);
    std::memcpy(dst, data_ + at, first);
    if (n > first) std::memcpy(dst + first, data_, n - first);
  }

  ShmRingControl* ctl_ = nullptr;
  char* data_ = nullptr;
  size_t cap_ = 0;
  uint64_t head_ = 0;  // writer's own position
  uint64_t tail_ = 0;  // reader's own position
  uint64_t seen_tail_ = 0;  // writer: the reader's position when last read
  uint64_t prefetch_tail_ = ~uint64_t{0};  // reader: the position prefetch_at_ is of
  size_t prefetch_at_ = 0;
};

}  // namespace tdist
