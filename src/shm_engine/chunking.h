// Cutting data into the pieces the segment's rounds carry.
#pragma once

#include <cstddef>
#include <cstring>

#include "util/bulk_copy.h"

namespace tdist::shm_engine {

inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Rounds needed to move `bytes` through pieces of `piece` bytes; at least one,
// so that even empty collectives synchronise and compare their arguments.
inline size_t rounds_for(size_t bytes, size_t piece) { return bytes == 0 ? 1 : ceil_div(bytes, piece); }

// Bytes [at, at + piece) of a buffer of `total` bytes, clipped: how many there are.
inline size_t piece_len(size_t total, size_t at, size_t piece) {
  return at >= total ? 0 : (total - at < piece ? total - at : piece);
}

inline void copy(void* dst, const void* src, size_t n) {
  if (n > 0 && dst != src) std::memcpy(dst, src, n);
}

// A piece that is all of an operation's data and crosses to the other cores
// in one round: from 16 KiB and below 512 KiB it goes into the segment with
// streaming stores. On the 2-core VM measured, a core reads lines that another
// core's cache holds modified at 6-11 GB/s and reads them from memory faster:
// broadcast of 64 KiB on 2 ranks 8.1-10.5 -> 4.9-5.5 µs. Pieces of pipelined
// operations, and larger ones, then wait on memory instead and lose
// (docs/tuning_log.md: Streaming a lone piece).
inline bool streams(size_t piece_bytes) { return piece_bytes >= (16u << 10) && piece_bytes < (512u << 10); }
inline void publish(void* dst, const void* src, size_t n, bool stream) {
  if (stream && n > 0)
    stream_copy(dst, src, n);
  else
    copy(dst, src, n);
}

// A per-destination part of a slot (reduce_scatter, all_to_all, scatter):
// slot_bytes / n rounded down to whole cache lines, so that the parts of
// different ranks never share a line.
inline size_t part_bytes(size_t slot_bytes, int n) { return slot_bytes / static_cast<size_t>(n) / 64 * 64; }

// Rank r's share [begin, end) of `count` elements when n ranks split them in
// pieces of whole cache lines (`unit` elements each), so that ranks writing
// neighbouring shares never write the same line.
struct Share {
  size_t begin, end;
};
inline Share share_of(size_t count, size_t unit, int n, int r) {
  size_t units = ceil_div(count, unit);
  size_t b = units * static_cast<size_t>(r) / static_cast<size_t>(n) * unit;
  size_t e = units * static_cast<size_t>(r + 1) / static_cast<size_t>(n) * unit;
  if (b > count) b = count;
  if (e > count) e = count;
  return {b, e};
}

}  // namespace tdist::shm_engine
