// The pool that buffers early messages: buffers are large enough, reused, and
// the pool keeps no more than its budget.
#include "transport/payload_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace tdist {
namespace {

TEST(PayloadPool, EmptyForZeroBytes) {
  PayloadPool pool;
  auto b = pool.take(0);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.capacity, 0u);
  pool.give(std::move(b));  // nothing to keep
}

TEST(PayloadPool, CapacityCoversTheRequestAndTheBytesAreUsable) {
  PayloadPool pool;
  for (size_t n : {size_t{1}, size_t{4095}, size_t{4097}, size_t{65536}, size_t{65537}, size_t{5} << 20}) {
    auto b = pool.take(n);
    ASSERT_NE(b.data(), nullptr) << n;
    EXPECT_GE(b.capacity, n);
    std::memset(b.data(), 0x5a, n);  // under ASan, writing past the allocation fails here
    EXPECT_EQ(static_cast<unsigned char>(b.data()[n - 1]), 0x5a);
  }
}

TEST(PayloadPool, ReusesAReturnedBufferThatFits) {
  PayloadPool pool;
  auto a = pool.take(60000);
  char* p = a.data();
  pool.give(std::move(a));
  auto b = pool.take(50000);  // a similar size: the same storage
  EXPECT_EQ(b.data(), p);
  auto c = pool.take(50000);  // the pool is empty again: fresh storage
  EXPECT_NE(c.data(), p);
}

TEST(PayloadPool, PicksTheSmallestBufferThatFits) {
  PayloadPool pool;
  auto big = pool.take(1 << 20), small = pool.take(8192);
  char *big_p = big.data(), *small_p = small.data();
  pool.give(std::move(big));
  pool.give(std::move(small));
  EXPECT_EQ(pool.take(5000).data(), small_p);
  EXPECT_EQ(pool.take(5000).data() == big_p, true);
}

TEST(PayloadPool, KeepsNoHugeBuffersAndNoMoreThanItsBudget) {
  PayloadPool pool;
  pool.give(pool.take(size_t{64} << 20));
  EXPECT_EQ(pool.pooled_bytes(), 0u);  // too large to keep
  std::vector<PayloadPool::Buffer> held;
  for (int i = 0; i < 64; ++i) held.push_back(pool.take(1 << 20));
  for (auto& b : held) pool.give(std::move(b));
  EXPECT_EQ(pool.pooled_bytes(), size_t{32} << 20);  // the budget: 32 of the 64 kept
  auto b = pool.take(1 << 20);
  EXPECT_EQ(pool.pooled_bytes(), size_t{31} << 20);
}

}  // namespace
}  // namespace tdist
