// The reduction kernels on CUDA devices (reduce_kernels.cu): the device side of
// device::Runtime's accumulate/combine/finalize, with the semantics of the CPU
// kernels (src/reduce/reduction_kernels.h) bit for bit:
//  - integers wrap; bool is logic (any non-zero byte is true, results 0 or 1);
//  - float MIN/MAX propagate NaN like torch (a NaN first input wins, then a NaN second);
//  - float16/bfloat16 are computed in float and rounded to nearest even after every step,
//    so combining n inputs gives what n-1 CPU combines give;
//  - complex SUM, PRODUCT (C99 Annex G), AVG, PREMUL_SUM; products never fused into an FMA;
//  - finalize: AVG divides (integers: truncating division in int64), PREMUL_SUM multiplies
//    by op.factor() converted to the element type (float for float16/bfloat16).
// Launches only: they queue on `stream` and never synchronise. The caller has checked that
// op is defined on dtype (check_reduce_op) and made the stream's device current.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "tdist/dtype.h"
#include "tdist/reduce_op.h"

namespace tdist::device::kernels {

// combine reads at most this many inputs in one pass.
inline constexpr int kMaxCombineInputs = 16;

// out[i] = ins[0][i] op ins[1][i] op ... op ins[n-1][i], for i < count, 1 <= n <= 16.
// out may be one of the inputs (exactly); no other overlap. accumulate is
// combine(out = acc, ins = {acc, in}). `max_blocks` bounds the grid (the
// kernels stride over the rest). Returns the launch's error (cudaSuccess when
// count is 0), cudaErrorInvalidValue for an op, dtype or n without a kernel.
cudaError_t launch_combine(ReduceOp op, DType dtype, void* out, const void* const* ins, int n, size_t count,
                           int max_blocks, cudaStream_t stream);

// AVG: data[i] /= contributors; PREMUL_SUM: data[i] *= op.factor(); other ops: nothing.
cudaError_t launch_finalize(ReduceOp op, DType dtype, void* data, size_t count, int contributors, int max_blocks,
                            cudaStream_t stream);

}  // namespace tdist::device::kernels
