// Element-wise reduction kernels (layer 5): one table of (ReduceOp x DType) functions.
//
// Semantics, per dtype:
//  - integers wrap around on overflow (two's complement), as in torch and NCCL;
//  - bool: SUM and MAX are logical or, PRODUCT and MIN logical and, BAND/BOR/BXOR logical;
//    any non-zero byte reads as true, results are 0 or 1;
//  - float MIN/MAX propagate NaN like torch.minimum/maximum: when either input is NaN the
//    result is NaN (the first such input); otherwise min/max, where for equal inputs
//    (-0.0 vs +0.0) the second one is returned;
//  - float16 and bfloat16 are computed in float, in blocks, and rounded back to nearest even;
//  - complex uses std::complex arithmetic (full C99 Annex G product).
// AVG and PREMUL_SUM combine like SUM; `finalize` then divides by the number of contributors
// (integers: truncating division, like NCCL) or multiplies by op.factor().
// Unsupported combinations (see reduce_op_supported) throw DistValueError naming op and dtype.
#pragma once

#include <cstddef>

#include "tdist/dtype.h"
#include "tdist/reduce_op.h"
#include "tdist/tensor.h"

namespace tdist::reduction {

// acc[i] = acc[i] (op) in[i], i < count. acc and in must not overlap.
void accumulate(ReduceOp op, DType dtype, void* acc, const void* in, size_t count);

// out[i] = a[i] (op) b[i], i < count. out may be a or b (exactly); no other overlap.
void combine(ReduceOp op, DType dtype, void* out, const void* a, const void* b, size_t count);

// After `contributors` inputs were combined into data: AVG divides by contributors (> 0),
// PREMUL_SUM multiplies by op.factor(); other ops do nothing.
void finalize(ReduceOp op, DType dtype, void* data, size_t count, int contributors);

// Whether finalize does anything for op (AVG, PREMUL_SUM).
inline bool needs_finalize(ReduceOp op) { return op.kind() == ReduceOp::AVG || op.kind() == ReduceOp::PREMUL_SUM; }

// Tensor forms: check dtype, element count and device (CPU) match, then run the kernels.
void accumulate(ReduceOp op, const Tensor& acc, const Tensor& in);
void combine(ReduceOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void finalize(ReduceOp op, const Tensor& data, int contributors);

namespace internal {
// "f16c" when float16 blocks are converted with the CPU's F16C instructions, "portable" when
// with the branch-free code of tensor/half.h (both round to nearest even).
const char* float16_conversion();
// For tests: false forces the portable conversion where F16C exists; true restores F16C if
// the CPU has it. Not meant to be called while kernels run on other threads.
void set_float16_f16c(bool enabled);
}  // namespace internal

}  // namespace tdist::reduction
