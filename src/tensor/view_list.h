// A list of views that a backend hands its engine, kept from one call to the
// next. A loop of flat collectives passes one buffer call after call
// (all_gather_into_tensor's output, reduce_scatter_tensor's input), and a
// loop of list collectives one list; cutting or copying it anew cost an
// allocation per view (a Tensor keeps its shape in a vector) and one for the
// list, with their frees: a third of the instructions of an 8-byte
// all_gather_into_tensor on 2 ranks (docs/tuning_log.md: Views kept between
// calls). A call with the same views as the last one gets the same list; any
// other is cut or copied into it. Not thread-safe: one per thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "tdist/tensor.h"
#include "tensor/split.h"

namespace tdist {

// Whether two lists hold the same views, in order (Tensor::same_view).
inline bool same_views(std::span<const Tensor> a, std::span<const Tensor> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const Tensor& x, const Tensor& y) { return x.same_view(y); });
}

class ViewList {
 public:
  // blocks_of(t, n), rows_of(t, splits, n), or a copy of `views`; valid
  // until the next call on this list.
  const std::vector<Tensor>& blocks(const Tensor& t, int n) {
    if (!cut_of(Kind::Blocks, t, {}, n)) {
      parts_ = blocks_of(t, n);
      keep(Kind::Blocks, t, {}, n);
    }
    return parts_;
  }
  const std::vector<Tensor>& rows(const Tensor& t, std::span<const int64_t> splits, int n) {
    if (!cut_of(Kind::Rows, t, splits, n)) {
      parts_ = rows_of(t, splits, n);
      keep(Kind::Rows, t, splits, n);
    }
    return parts_;
  }
  const std::vector<Tensor>& copy(std::span<const Tensor> views) {
    if (kind_ != Kind::Copy || !same_views(parts_, views)) {
      // Copy-assigns in place: the views' shapes reuse their buffers.
      parts_.assign(views.begin(), views.end());
      kind_ = Kind::Copy;
      owns_ = std::any_of(views.begin(), views.end(), [](const Tensor& v) { return v.keeps_memory_alive(); });
    }
    return parts_;
  }
  // Forgets views that keep memory alive (an adopted DLPack tensor, which its
  // caller may drop once the call returns); call after every use.
  void release() {
    if (!owns_) return;
    whole_ = Tensor();
    parts_.clear();
    kind_ = Kind::None;
    owns_ = false;
  }

 private:
  enum class Kind { None, Blocks, Rows, Copy };
  bool cut_of(Kind kind, const Tensor& t, std::span<const int64_t> splits, int n) const {
    return kind_ == kind && n_ == n && whole_.same_view(t) &&
           std::equal(splits_.begin(), splits_.end(), splits.begin(), splits.end());
  }
  void keep(Kind kind, const Tensor& t, std::span<const int64_t> splits, int n) {
    kind_ = kind;
    whole_ = t;
    n_ = n;
    splits_.assign(splits.begin(), splits.end());
    owns_ = t.keeps_memory_alive();
  }

  Kind kind_ = Kind::None;
  Tensor whole_;  // what blocks() or rows() cut
  int n_ = 0;
  std::vector<int64_t> splits_;
  std::vector<Tensor> parts_;
  bool owns_ = false;  // some view keeps memory alive
};

}  // namespace tdist
