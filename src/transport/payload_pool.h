// Buffers for messages that arrive before their receive is posted. Large ones
// are recycled: a fresh allocation of tens of KiB or more per message costs
// page faults and zero-filling (glibc hands such blocks back to the kernel
// when freed), and a receiver that fell behind its sender then spent more per
// message than the sender and stayed behind (docs/tuning_log.md: Transport).
// Small ones come from malloc's own caches, which are fast.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

namespace tdist {

class PayloadPool {
 public:
  struct Buffer {
    std::unique_ptr<char[]> bytes;
    size_t capacity = 0;
    char* data() const { return bytes.get(); }
  };

  // A buffer of at least n bytes, not initialized (empty for 0). Throws std::bad_alloc.
  Buffer take(size_t n) {
    if (n == 0) return {};
    if (n < kMinPooled || n > kMaxPooled) return Buffer{std::unique_ptr<char[]>(new char[n]), n};
    const size_t c = size_class(n);
    auto& free = free_[c];
    if (!free.empty()) {
      Buffer b{std::move(free.back()), class_bytes(c)};
      free.pop_back();
      pooled_ -= b.capacity;
      return b;
    }
    return Buffer{std::unique_ptr<char[]>(new char[class_bytes(c)]), class_bytes(c)};
  }

  // Keeps b for reuse if it is of a pooled size and the pool has room.
  void give(Buffer b) {
    if (!b.bytes || b.capacity < kMinPooled || b.capacity > kMaxPooled) return;
    const size_t c = size_class(b.capacity);
    if (class_bytes(c) != b.capacity || pooled_ + b.capacity > kBudgetBytes) return;
    pooled_ += b.capacity;
    free_[c].push_back(std::move(b.bytes));
  }

  // Bytes held for reuse.
  size_t pooled_bytes() const { return pooled_; }

 private:
  // Power-of-two classes from 64 KiB to 4 MiB; larger messages are rare (they
  // go by rendezvous over TCP) and are freed.
  static constexpr size_t kMinShift = 16, kMaxShift = 22;
  static constexpr size_t kMinPooled = size_t{1} << kMinShift, kMaxPooled = size_t{1} << kMaxShift;
  static constexpr size_t kBudgetBytes = size_t{32} << 20;
  static size_t size_class(size_t n) {  // the smallest class holding n bytes
    size_t c = 0;
    while ((kMinPooled << c) < n) ++c;
    return c;
  }
  static size_t class_bytes(size_t c) { return kMinPooled << c; }
  std::array<std::vector<std::unique_ptr<char[]>>, kMaxShift - kMinShift + 1> free_;
  size_t pooled_ = 0;
};

}  // namespace tdist
