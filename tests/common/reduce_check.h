// all_reduce of one dtype, op and size against the reduction computed
// locally (every rank's inputs combined in rank order, then finalized): the
// body every backend's tests share (tests/backends threads, tests/mpi under mpirun).
#pragma once

#include <stdexcept>
#include <string>

#include "backends/world.h"
#include "reduce/reduction_kernels.h"

namespace tdist::testing {

inline long input_value(ReduceOp op, int rank, size_t i) {
  switch (op.kind()) {
    case ReduceOp::PRODUCT: return 1 + static_cast<long>((rank + i) % 2);
    case ReduceOp::BAND: case ReduceOp::BOR: case ReduceOp::BXOR: return static_cast<long>((rank * 7 + i * 3) % 16);
    default: return static_cast<long>(((rank + 1) * (i % 5 + 1)) % 13);
  }
}

// The expected result: inputs of ranks 0..n-1 combined in order, then finalized.
inline Buffer expected(ReduceOp op, DType dtype, size_t count, int n) {
  Buffer acc(dtype, count, [&](size_t i) { return input_value(op, 0, i); });
  for (int r = 1; r < n; ++r) {
    Buffer in(dtype, count, [&](size_t i) { return input_value(op, r, i); });
    reduction::combine(op, dtype, acc.data(), acc.data(), in.data(), count);
  }
  reduction::finalize(op, dtype, acc.data(), count, n);
  return acc;
}

inline void check_all_reduce(ProcessGroup& pg, ReduceOp op, DType dtype, size_t count) {
  Buffer buf(dtype, count, [&](size_t i) { return input_value(op, pg.rank(), i); });
  pg.all_reduce(buf.tensor(), op)->wait();
  Buffer want = expected(op, dtype, count, pg.size());
  long diff = buf.first_difference(want);
  if (diff >= 0)
    throw std::runtime_error(std::string("all_reduce ") + std::string(op.name()) + " " +
                             std::string(dtype_name(dtype)) + " x" + std::to_string(count) + " on " +
                             std::to_string(pg.size()) + " ranks: element " + std::to_string(diff) + " is " +
                             buf.at(diff) + ", expected " + want.at(diff));
}

}  // namespace tdist::testing
