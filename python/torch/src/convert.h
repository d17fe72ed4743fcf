// `op` in the functions below is the context errors start with, e.g.
// "rank 1 in group default_pg: all_reduce".
//
// Conversions between torch's types (at::Tensor, at::ScalarType,
// c10d::ReduceOp) and tdist's (Tensor views, DType, ReduceOp). Tensors are
// mapped without copies: a tdist::Tensor is a view of the at::Tensor's memory,
// valid while the at::Tensor (kept by the plugin's Work) is alive.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "tdist/dtype.h"
#include "tdist/reduce_op.h"
#include "tdist/tensor.h"

namespace tdist_torch {

// The dtype tdist uses for `type`; tdist::DistValueError naming `op` and the type when tdist has none.
tdist::DType to_dtype(c10::ScalarType type, const std::string& op);

// A view of `t`'s memory, on tdist's device for `t`'s (cpu, cuda:N). `t` must be
// a dense, contiguous tensor on the CPU or, where the plugin serves CUDA, a CUDA device; otherwise
// tdist::DistValueError naming `op`, `what` ("tensor", "output tensor 2") and the problem.
tdist::Tensor to_view(const at::Tensor& t, const std::string& op, const std::string& what = "tensor");
std::vector<tdist::Tensor> to_views(const std::vector<at::Tensor>& ts, const std::string& op, const std::string& what);

// tdist's operator for `op` (SUM..BXOR, AVG, PREMUL_SUM with its factor).
tdist::ReduceOp to_reduce_op(const c10d::ReduceOp& op, const std::string& operation);

}  // namespace tdist_torch
