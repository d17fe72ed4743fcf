// Views of one tensor as one part per rank: the flat forms of the
// collectives (all_gather_into_tensor, reduce_scatter_tensor,
// all_to_all_single) are their list forms over these. The front has checked
// that the parts fit (process_group/validate.h); these only cut.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tdist/tensor.h"

namespace tdist {

// n equal blocks of t's elements, in order.
std::vector<Tensor> blocks_of(const Tensor& t, int n);

// The rows of t's first dimension (its elements for a 0-d tensor) in n parts
// of splits[i] rows each; empty splits: n equal parts.
std::vector<Tensor> rows_of(const Tensor& t, std::span<const int64_t> splits, int n);

// The number of rows rows_of() counts in t.
int64_t rows_in(const Tensor& t);

// The elements of part i of rows_of(t, splits, n), without cutting t.
int64_t part_elements(const Tensor& t, std::span<const int64_t> splits, int n, int i);

}  // namespace tdist
