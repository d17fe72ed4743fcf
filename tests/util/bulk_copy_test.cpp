// bulk_copy: the streaming path (forced on small sizes in a fresh process, since
// the threshold is read once per process) copies exactly the bytes asked for,
// whatever the alignment of either end, and overlapping ranges move as memmove.
#include "util/bulk_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/harness.h"

namespace tdist::testing {
namespace {

void with_threshold(const char* value, const std::function<void()>& fn) {
  auto results = run_in_processes(1, [&](int) {
    if (value) setenv("TDIST_BULK_COPY_BYTES", value, 1); else unsetenv("TDIST_BULK_COPY_BYTES");
    fn();
  });
  ASSERT_TRUE(results[0].ok()) << results[0].describe();
}

uint8_t pattern(size_t i) { return static_cast<uint8_t>(i * 131 + (i >> 8) * 7 + 1); }

// Copies n bytes between buffers at the given misalignments and checks the
// destination and the guard bytes around it.
void check_copy(size_t n, size_t src_off, size_t dst_off) {
  constexpr size_t kGuard = 128;
  std::vector<uint8_t> src(n + src_off + kGuard), dst(n + dst_off + 2 * kGuard, 0xEE);
  for (size_t i = 0; i < src.size(); ++i) src[i] = pattern(i);
  uint8_t* d = dst.data() + kGuard + dst_off;
  bulk_copy(d, src.data() + src_off, n);
  for (size_t i = 0; i < n; ++i)
    if (d[i] != pattern(i + src_off))
      throw std::runtime_error("byte " + std::to_string(i) + " of " + std::to_string(n) + " (src+" +
                               std::to_string(src_off) + ", dst+" + std::to_string(dst_off) + ") is wrong");
  for (size_t i = 0; i < kGuard + dst_off; ++i)
    if (dst[i] != 0xEE) throw std::runtime_error("a byte before the destination changed");
  for (size_t i = kGuard + dst_off + n; i < dst.size(); ++i)
    if (dst[i] != 0xEE) throw std::runtime_error("a byte after the destination changed");
}

TEST(BulkCopy, StreamingCopiesExactlyAtEveryAlignment) {
  with_threshold("4096", [] {
    if (bulk_copy_threshold() != 4096) throw std::runtime_error("TDIST_BULK_COPY_BYTES=4096 not taken");
    for (size_t n : {size_t{4096}, size_t{4097}, size_t{4159}, size_t{65536 + 13}, size_t{(1 << 20) + 7}})
      for (size_t src_off : {0, 1, 17, 63})
        for (size_t dst_off : {0, 5, 32, 63}) check_copy(n, src_off, dst_off);
  });
}

TEST(BulkCopy, StreamingCopiesShorterThanALine) {
  with_threshold("1", [] {
    for (size_t n : {size_t{1}, size_t{2}, size_t{63}, size_t{64}, size_t{65}, size_t{127}})
      for (size_t dst_off : {0, 1, 62, 63}) check_copy(n, 3, dst_off);
  });
}

TEST(BulkCopy, BelowTheThresholdAndEmptyCopies) {
  with_threshold("4096", [] {
    for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{4095}}) check_copy(n, 3, 9);
    std::vector<uint8_t> buf(64, 7);
    bulk_copy(buf.data(), buf.data(), buf.size());  // same place: nothing to do
    bulk_copy(nullptr, nullptr, 0);
    if (buf != std::vector<uint8_t>(64, 7)) throw std::runtime_error("a copy onto itself changed the bytes");
  });
}

TEST(BulkCopy, OverlappingRangesMoveLikeMemmove) {
  with_threshold("4096", [] {
    for (long shift : {-4097L, -64L, -1L, 1L, 64L, 4097L}) {
      const size_t n = 3 * 4096 + 11, base = 8192;
      std::vector<uint8_t> buf(n + 2 * base), expected;
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(i);
      expected = buf;
      std::memmove(expected.data() + base + shift, expected.data() + base, n);
      bulk_copy(buf.data() + base + shift, buf.data() + base, n);
      if (buf != expected) throw std::runtime_error("overlapping copy by " + std::to_string(shift) + " is wrong");
    }
  });
}

TEST(BulkCopy, ThresholdFromTheEnvironmentOrTheCache) {
  with_threshold("0", [] {
    if (bulk_copy_threshold() != SIZE_MAX) throw std::runtime_error("TDIST_BULK_COPY_BYTES=0 must switch streaming off");
    check_copy(100000, 1, 2);
  });
  with_threshold(nullptr, [] {
    if (bulk_copy_threshold() < (size_t{1} << 20))
      throw std::runtime_error("the default threshold is at least 1 MiB, got " + std::to_string(bulk_copy_threshold()));
  });
}

}  // namespace
}  // namespace tdist::testing
