// Buffers for messages that arrive before their receive is posted, recycled.
// A fresh allocation per message costs page faults and zero-filling (glibc
// hands freed blocks of tens of KiB back to the kernel): a receiver that fell
// behind its sender then spent more per message than the sender and stayed
// behind (TCP broadcast of 64 KiB, 2 ranks: 30-100 µs per message in that
// state, 13 µs otherwise).
#pragma once

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
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i].capacity >= n && (best == free_.size() || free_[i].capacity < free_[best].capacity)) best = i;
    if (best < free_.size()) {
      Buffer b = std::move(free_[best]);
      free_[best] = std::move(free_.back());
      free_.pop_back();
      pooled_ -= b.capacity;
      return b;
    }
    // Power-of-two capacities, so that a buffer fits the next messages of a similar size.
    size_t cap = kMinBytes;
    while (cap < n) cap *= 2;
    if (cap > kMaxPooledBytes) cap = n;
    return Buffer{std::unique_ptr<char[]>(new char[cap]), cap};
  }

  // Bytes held for reuse.
  size_t pooled_bytes() const { return pooled_; }

  // Keeps b for reuse unless it is too large or the pool is full.
  void give(Buffer b) {
    if (!b.bytes || b.capacity > kMaxPooledBytes || pooled_ + b.capacity > kBudgetBytes) return;
    pooled_ += b.capacity;
    free_.push_back(std::move(b));
  }

 private:
  static constexpr size_t kMinBytes = 4096;
  static constexpr size_t kMaxPooledBytes = size_t{4} << 20;  // larger ones are rare (rendezvous) and freed
  static constexpr size_t kBudgetBytes = size_t{32} << 20;
  std::vector<Buffer> free_;
  size_t pooled_ = 0;
};

}  // namespace tdist
