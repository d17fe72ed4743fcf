// Benchmark buffers and result checking: aligned allocation, the input pattern
// (small integers that depend on rank and index, exact in every type), the
// expected result of each collective computed locally, and the mismatch count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "bench_types.h"

namespace tbench {

// Page-aligned bytes; pages are touched on fill, not on allocation.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);
  void* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
  size_t size_ = 0;
};

// Rank `rank`'s input element `index` (the value as an integer; the type's
// conversion applies). PROD uses 1s and 2s so that products stay exact.
int64_t pattern_value(Op op, int rank, uint64_t index);

// data[i] = pattern_value(op, rank, i), i < count.
void fill_pattern(Dt dt, Op op, int rank, void* data, size_t count);
// Bytes that never match a pattern result (0xA5 in every byte).
void poison(void* data, size_t bytes);

// What one rank checks after one operation.
struct CheckSpec {
  Coll coll;
  Dt dt;
  Op op;             // ignored for non-reducing collectives
  int world_size;
  int rank;
  int root;
  size_t count;      // the row's count (whole buffer for chunked collectives)
};
// Number of elements of `result` (result_count of them, as the collective
// defines this rank's result) that differ from the expectation.
int64_t count_wrong(const CheckSpec& spec, const void* result, size_t result_count);

// The element count of this rank's result and input for a row, used by both
// runners: e.g. reduce: count on the root, 0 elsewhere.
size_t result_count(Coll c, size_t count, int world_size, int rank, int root);

// 16-bit float conversions (round to nearest even), for the pattern and checks.
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);

}  // namespace tbench
