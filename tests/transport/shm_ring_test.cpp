// The shared-memory byte ring on its own: order, wrap-around, full and empty
// rings, and the sleep flags that decide when a doorbell is needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <thread>
#include <vector>

#include "transport/shm/shm_ring.h"

namespace tdist::testing {
namespace {

struct Ring {
  explicit Ring(size_t cap) : data(cap) {}
  ShmRingControl control;
  std::vector<char> data;
  // The two ends, as the writer's and the reader's process see them.
  ShmRing writer() { return ShmRing(&control, data.data(), data.size()); }
  ShmRing reader() { return ShmRing(&control, data.data(), data.size()); }
};

TEST(ShmRing, BytesComeOutInOrderAcrossWrapAround) {
  Ring r(64);
  ShmRing w = r.writer(), rd = r.reader();
  std::vector<char> in(1000), out;
  std::iota(in.begin(), in.end(), 0);
  size_t sent = 0;
  // Odd chunk sizes so that the positions wrap at every offset.
  for (size_t step = 1; out.size() < in.size(); step = step % 13 + 1) {
    sent += w.write_some(in.data() + sent, std::min(step * 3, in.size() - sent));
    size_t n = std::min(rd.available(), step * 2);
    std::vector<char> got(n);
    rd.read(got.data(), n);
    out.insert(out.end(), got.begin(), got.end());
  }
  EXPECT_EQ(out, in);
}

TEST(ShmRing, AFullRingTakesNothingUntilTheReaderMakesRoom) {
  Ring r(16);
  ShmRing w = r.writer(), rd = r.reader();
  char buf[40] = {};
  EXPECT_EQ(w.write_some(buf, 40), 16u);
  EXPECT_TRUE(w.full());
  EXPECT_EQ(w.write_some(buf, 1), 0u);
  rd.read(nullptr, 5);  // discard
  EXPECT_FALSE(w.full());
  EXPECT_EQ(w.write_some(buf, 40), 5u);
  EXPECT_EQ(rd.available(), 16u);
}

TEST(ShmRing, ADoorbellIsNeededOnlyAfterTheOtherSideRaisedItsFlag) {
  Ring r(32);
  ShmRing w = r.writer(), rd = r.reader();
  char c = 'x';
  w.write_some(&c, 1);
  EXPECT_FALSE(w.reader_needs_doorbell());  // the reader never went to sleep
  rd.read(&c, 1);
  EXPECT_FALSE(rd.reader_prepare_sleep());  // empty: may sleep
  w.write_some(&c, 1);
  EXPECT_TRUE(w.reader_needs_doorbell());
  EXPECT_FALSE(w.reader_needs_doorbell());  // cleared by the first ring
  EXPECT_TRUE(rd.reader_prepare_sleep());   // data waiting: do not sleep

  char big[32] = {};
  w.write_some(big, 32);
  EXPECT_FALSE(w.writer_prepare_sleep());  // full: may sleep
  rd.read(nullptr, 4);
  EXPECT_TRUE(rd.writer_needs_doorbell());
  EXPECT_FALSE(rd.writer_needs_doorbell());
}

// Numbered words that a writer thread streams through a ring: `src` and
// `total` for the writer, `dst` for the reader, `in` == `out` at the end.
struct Stream {
  Stream(size_t words, uint32_t first) : in(words), out(words) { std::iota(in.begin(), in.end(), first); }
  std::vector<uint32_t> in, out;
  const char* src = reinterpret_cast<const char*>(in.data());
  char* dst = reinterpret_cast<char*>(out.data());
  size_t total = in.size() * sizeof(uint32_t);
};

// The reader's side of the two-thread tests: reads `total` bytes as they come,
// at most `every_third` of them in every third read (odd offsets).
void read_all(ShmRing rd, char* dst, size_t total, size_t every_third) {
  for (size_t done = 0, step = 0; done < total; ++step) {
    size_t k = std::min({rd.available(), total - done, step % 3 == 0 ? every_third : total});
    rd.read(dst + done, k);
    done += k;
    if (k == 0) std::this_thread::yield();
  }
}

TEST(ShmRing, TwoThreadsStreamAMegabyteThroughASmallRing) {
  Ring r(4096);
  Stream st(256 * 1024, 7u);
  const char* src = st.src;
  char* dst = st.dst;
  const size_t total = st.total;
  std::thread writer([&] {
    ShmRing w = r.writer();
    for (size_t done = 0; done < total;) {
      size_t k = w.write_some(src + done, std::min<size_t>(1000, total - done));
      done += k;
      if (k == 0) std::this_thread::yield();
    }
  });
  read_all(r.reader(), dst, total, total);
  writer.join();
  EXPECT_EQ(st.out, st.in);
}

// Copies larger than a piece are published piece by piece; the bytes must come
// out the same whichever piece the reader catches, across the ring's end.
TEST(ShmRing, TwoThreadsStreamWritesOfManyPiecesThroughARingOfAFewPieces) {
  const size_t piece = ShmRing::kPieceBytes;
  Ring r(3 * piece + 4096);  // not a multiple of a piece: pieces straddle the end
  Stream st(2 * 1024 * 1024, 11u);
  const char* src = st.src;
  char* dst = st.dst;
  const size_t total = st.total;
  std::thread writer([&] {
    ShmRing w = r.writer();
    for (size_t done = 0, step = 0; done < total; ++step) {
      // A header and a payload of two and a half pieces, then writes of odd lengths.
      size_t k = 0;
      const size_t payload = std::min<size_t>(5 * piece / 2, total - done);
      if (step % 2 == 0 && payload > 24 && w.write_both(src + done, 24, src + done + 24, payload - 24))
        k = payload;
      else if (step % 2 == 1)
        k = w.write_some(src + done, std::min<size_t>(piece + 777 * (step % 5), total - done));
      done += k;
      if (k == 0) std::this_thread::yield();
    }
  });
  read_all(r.reader(), dst, total, 1000);
  writer.join();
  EXPECT_EQ(st.out, st.in);
}

// A message that write_both() places whole goes out in eighths of at least
// kLeastPieceBytes (ShmRing::piece_for): messages of 4-100 KiB through a ring
// of a few such pieces whose end they straddle, read as they come.
TEST(ShmRing, TwoThreadsStreamMiddleSizedMessagesInEighths) {
  EXPECT_EQ(ShmRing::piece_for(100), ShmRing::kLeastPieceBytes);
  EXPECT_EQ(ShmRing::piece_for(64 * 1024), 8u * 1024);
  EXPECT_EQ(ShmRing::piece_for(16u << 20), ShmRing::kPieceBytes);
  Ring r(128 * 1024 + 1000);
  Stream st(1024 * 1024, 5u);
  std::thread writer([&] {
    ShmRing w = r.writer();
    for (size_t done = 0, step = 0; done < st.total; ++step) {
      const size_t payload = std::min<size_t>(4096 + 9973 * (step % 10), st.total - done);
      if (payload > 24 && w.write_both(st.src + done, 24, st.src + done + 24, payload - 24))
        done += payload;
      else if (payload <= 24)
        done += w.write_some(st.src + done, payload);
      else
        std::this_thread::yield();
    }
  });
  read_all(r.reader(), st.dst, st.total, 777);
  writer.join();
  EXPECT_EQ(st.out, st.in);
}

TEST(ShmRing, AWriteOfBothThatFitsOnlyPartlyTakesNothing) {
  const size_t piece = ShmRing::kPieceBytes;
  Ring r(2 * piece);
  ShmRing w = r.writer(), rd = r.reader();
  std::vector<char> header(16, 'h'), payload(2 * piece, 'p');
  EXPECT_FALSE(w.write_both(header.data(), header.size(), payload.data(), payload.size()));
  EXPECT_EQ(rd.available(), 0u);
  payload.resize(2 * piece - header.size());
  EXPECT_TRUE(w.write_both(header.data(), header.size(), payload.data(), payload.size()));
  EXPECT_TRUE(w.full());
  std::vector<char> got(2 * piece);
  rd.read(got.data(), got.size());
  EXPECT_TRUE(std::equal(header.begin(), header.end(), got.begin()));
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), got.begin() + header.size()));
}

}  // namespace
}  // namespace tdist::testing
