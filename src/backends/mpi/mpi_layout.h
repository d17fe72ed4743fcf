// Where the parts of a list operation (one tensor per rank) lie, as MPI's
// v-collectives take them: one buffer, a count and a displacement per rank.
// Parts that are views of one tensor (all_gather_into_tensor, rows of
// all_to_all_single, any lists cut from one buffer) are used where they lie;
// other lists go through one staging buffer, copied in before and out after.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tdist/tensor.h"

namespace tdist::mpi {

// t's element count as MPI's int; DistBackendError naming `who` (the rank and
// group) and `op` above 2^31-1.
int element_count(const Tensor& t, const char* op, const std::string& who);

class Layout {
 public:
  static std::shared_ptr<Layout> of(const std::vector<Tensor>& parts, const char* op, const std::string& who);

  bool staged() const { return force_; }
  // Equal parts, part i at element i x count of base().
  bool equal_in_order() const;
  void* base() { return staged() ? static_cast<void*>(staging_.data()) : base_; }
  const int* counts() const { return counts_.data(); }
  const int* displs() const { return displs_.data(); }
  int count(size_t i) const { return counts_[i]; }
  // Whether any part shares bytes with t.
  bool overlaps(const Tensor& t) const;
  // Goes through a staging buffer (parts in rank order) even where the parts
  // could be used. Only while the operation is issued.
  void force_stage();
  void stage_in();   // parts -> staging buffer (inputs), when staged
  void unstage();    // staging buffer -> parts (outputs), when staged

 private:
  std::vector<Tensor> parts_;
  // For errors, while the operation is issued (force_stage): the backend's
  // label ("rank 3 in group default_pg"), which outlives it, and the operation.
  const std::string* who_ = nullptr;
  const char* op_ = "";
  size_t element_size_ = 1;
  char* base_ = nullptr;
  std::vector<int> counts_, displs_;
  std::vector<char> staging_;
  bool force_ = false;
};

}  // namespace tdist::mpi
