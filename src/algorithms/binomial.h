// The binomial tree over relative positions 0..n-1 (position 0 is the root)
// used by broadcast, reduce, gather and scatter: position v's parent is
// v - lowbit(v); its children are v + m for the powers of two m below
// lowbit(v) (the root: below n) with v + m < n; the subtree of v is the
// contiguous range [v, min(v + lowbit(v), n)).
#pragma once

#include <algorithm>
#include <vector>

namespace tdist {

struct BinomialTree {
  int n = 1, v = 0;
  int low = 1;  // lowbit(v); for the root the smallest power of two >= n

  BinomialTree(int size, int position) : n(size), v(position) {
    while (low < n && !(v & low)) low <<= 1;
  }
  bool is_root() const { return v == 0; }
  int parent() const { return v - low; }
  int subtree_end() const { return std::min(v + low, n); }
  // Children, nearest first: child c's subtree is [c, min(c + (c - v), n)).
  std::vector<int> children() const {
    std::vector<int> out;
    for (int m = 1; m < low && v + m < n; m <<= 1) out.push_back(v + m);
    return out;
  }
  static int subtree_end_of(int child, int parent, int n) { return std::min(child + (child - parent), n); }
};

}  // namespace tdist
