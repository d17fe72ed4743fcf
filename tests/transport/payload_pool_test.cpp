// The pool that buffers early messages: buffers are large enough, large ones
// are reused by size class, small and huge ones are not kept, and the pool
// keeps no more than its budget.
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
  EXPECT_EQ(pool.pooled_bytes(), 0u);
}

TEST(PayloadPool, CapacityCoversTheRequestAndTheBytesAreUsable) {
  PayloadPool pool;
  for (size_t n : {size_t{1}, size_t{4097}, size_t{65535}, size_t{65536}, size_t{65537}, size_t{3} << 20,
                   size_t{5} << 20}) {
    auto b = pool.take(n);
    ASSERT_NE(b.data(), nullptr) << n;
    EXPECT_GE(b.capacity, n);
    std::memset(b.data(), 0x5a, n);  // under ASan, writing past the allocation fails here
    EXPECT_EQ(static_cast<unsigned char>(b.data()[n - 1]), 0x5a);
  }
}

TEST(PayloadPool, ReusesALargeBufferForTheNextMessageOfItsClass) {
  PayloadPool pool;
  auto a = pool.take(100000);  // class 128 KiB
  char* p = a.data();
  pool.give(std::move(a));
  EXPECT_EQ(pool.pooled_bytes(), size_t{128} << 10);
  auto b = pool.take(70000);  // the same class: the same storage
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(pool.pooled_bytes(), 0u);
  pool.give(std::move(b));
  auto c = pool.take(200000);  // another class: fresh storage, the 128 KiB one stays pooled
  EXPECT_NE(c.data(), p);
  EXPECT_EQ(pool.pooled_bytes(), size_t{128} << 10);
}

TEST(PayloadPool, KeepsNeitherSmallNorHugeBuffers) {
  PayloadPool pool;
  pool.give(pool.take(1000));
  pool.give(pool.take(size_t{64} << 20));
  EXPECT_EQ(pool.pooled_bytes(), 0u);
}

TEST(PayloadPool, KeepsNoMoreThanItsBudget) {
  PayloadPool pool;
  std::vector<PayloadPool::Buffer> held;
  for (int i = 0; i < 64; ++i) held.push_back(pool.take(1 << 20));
  for (auto& b : held) pool.give(std::move(b));
  EXPECT_EQ(pool.pooled_bytes(), size_t{32} << 20);  // the budget: 32 of the 64 kept
  auto b = pool.take(1 << 20);
  EXPECT_EQ(pool.pooled_bytes(), size_t{31} << 20);
}

}  // namespace
}  // namespace tdist
