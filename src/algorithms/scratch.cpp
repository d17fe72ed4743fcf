#include "algorithms/scratch.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tdist {

namespace {

// What one thread keeps between collectives: a few buffers, at most
// kKeptBytes in all (the smallest go first). A collective needs at most
// three at once.
constexpr size_t kKeptBuffers = 4;
constexpr size_t kKeptBytes = size_t{64} << 20;
// Small requests are rounded up so that buffers can serve calls of nearby
// sizes.
constexpr size_t kGranule = 64 * 1024;

struct Kept {
  std::unique_ptr<char[]> data;
  size_t capacity;
};

std::vector<Kept>& kept() {
  thread_local std::vector<Kept> pool;
  return pool;
}

}  // namespace

Scratch::Scratch(size_t bytes) {
  if (bytes == 0) return;
  auto& pool = kept();
  // The smallest kept buffer that fits.
  auto best = pool.end();
  for (auto it = pool.begin(); it != pool.end(); ++it)
    if (it->capacity >= bytes && (best == pool.end() || it->capacity < best->capacity)) best = it;
  if (best != pool.end()) {
    data_ = std::move(best->data);
    capacity_ = best->capacity;
    pool.erase(best);
    return;
  }
  capacity_ = (bytes + kGranule - 1) / kGranule * kGranule;
  data_ = std::make_unique_for_overwrite<char[]>(capacity_);
}

Scratch::~Scratch() { release(); }

Scratch& Scratch::operator=(Scratch&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::move(o.data_);
    capacity_ = std::exchange(o.capacity_, 0);
  }
  return *this;
}

void Scratch::release() {
  if (!data_ || capacity_ > kKeptBytes) return;  // unique_ptr frees it
  auto& pool = kept();
  pool.push_back(Kept{std::move(data_), capacity_});
  capacity_ = 0;
  // Keep the largest buffers within the limits.
  std::sort(pool.begin(), pool.end(), [](const Kept& a, const Kept& b) { return a.capacity > b.capacity; });
  size_t total = 0, keep = 0;
  while (keep < pool.size() && keep < kKeptBuffers && total + pool[keep].capacity <= kKeptBytes)
    total += pool[keep++].capacity;
  pool.resize(keep);
}

}  // namespace tdist
