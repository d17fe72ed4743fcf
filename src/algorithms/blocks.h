// Helpers shared by the algorithms: how a buffer is cut into parts, the
// blocks that circulate in a collective, and the rule that a
// collective aborts its transport before it frees buffers a receive may still
// write into.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <vector>

#include "tdist/tensor.h"
#include "algorithms/scratch.h"
#include "transport/transport.h"

namespace tdist {

// First element of part i when `count` elements are cut into `parts` parts
// whose sizes differ by at most one (the first count % parts parts are the
// larger). Every rank computes the same bounds from the same count.
inline size_t part_begin(size_t count, size_t parts, size_t i) {
  return count / parts * i + std::min(i, count % parts);
}
inline size_t part_count(size_t count, size_t parts, size_t i) {
  return part_begin(count, parts, i + 1) - part_begin(count, parts, i);
}

// A contiguous range of elements.
struct Span {
  char* data = nullptr;
  size_t count = 0;  // elements
};

// The n blocks a collective moves as units (one per rank or per part):
// block i is span[i]; blocks may differ in size.
struct Blocks {
  std::vector<Span> span;
  size_t esize = 1;

  size_t size() const { return span.size(); }
  size_t bytes(size_t i) const { return span[i].count * esize; }
  size_t max_count() const {
    size_t m = 0;
    for (const Span& s : span) m = std::max(m, s.count);
    return m;
  }
  bool equal_sizes() const {
    for (const Span& s : span)
      if (s.count != span[0].count) return false;
    return true;
  }
  // `count` elements at `base` cut into `parts` near-equal blocks (part_begin).
  static Blocks split(void* base, size_t count, size_t parts, size_t esize) {
    Blocks b{std::vector<Span>(parts), esize};
    for (size_t i = 0; i < parts; ++i)
      b.span[i] = {static_cast<char*>(base) + part_begin(count, parts, i) * esize, part_count(count, parts, i)};
    return b;
  }
  static Blocks of(const std::vector<Tensor>& tensors) {
    Blocks b{std::vector<Span>(tensors.size()), tensors.empty() ? 1 : tensors[0].element_size()};
    for (size_t i = 0; i < tensors.size(); ++i)
      b.span[i] = {static_cast<char*>(tensors[i].data()), static_cast<size_t>(tensors[i].numel())};
    return b;
  }
};

inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n > 0 && dst != src) std::memcpy(dst, src, n);
}

// Runs `body`, whose receives may land in scratch buffers that die with it. If
// it throws while such a receive may still be posted (a send failed first, or
// a reduction threw), the transport is aborted before the buffers go out of
// scope, so no late message is written into freed memory (abort joins the
// progress thread and fails every request). Transport::wait already aborts on
// its own errors; this covers every other exception.
template <typename F>
void abort_on_error(Transport& transport, F&& body) {
  try {
    body();
  } catch (...) {
    transport.abort(std::current_exception());
    throw;
  }
}

}  // namespace tdist
