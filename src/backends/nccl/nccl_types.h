// How tdist's dtypes and reduce ops travel through NCCL, and what NCCL
// cannot do (refused before anything is enqueued, naming op and dtype).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <string>

#include "tdist/dtype.h"
#include "tdist/reduce_op.h"
#include "backends/nccl/nccl_library.h"

namespace tdist::nccl {

// NCCL's element type and count for `numel` elements of `dtype` in an
// operation that only moves data (broadcast, gathers, point-to-point): any
// dtype goes, as bytes where NCCL has no type of its own (int16, complex).
struct Moved {
  ncclDataType_t type;
  size_t count;
};
Moved moved_as(DType dtype, size_t numel);

// The same for a reduction with `op`: bool as uint8 with SUM -> MAX and
// PRODUCT -> MIN (logical or / and, as torch's NCCL does), complex as pairs of
// its float type (SUM, AVG and PREMUL_SUM act on each part alike). Throws
// DistBackendError "<where>: nccl cannot <op> <dtype> (...)" for what NCCL
// cannot do: BAND, BOR, BXOR (torch's NCCL refuses them too), int16,
// PRODUCT/MIN/MAX of complex, AVG of bool, PREMUL_SUM of integers.
struct Reduced {
  ncclDataType_t type;
  size_t count;
  ncclRedOp_t op;       // for PREMUL_SUM: replaced by the op that RedOp makes
  bool premul = false;  // PREMUL_SUM: needs a RedOp made on the communicator
};
Reduced reduced_as(ReduceOp op, DType dtype, size_t numel, const std::string& where);

// PREMUL_SUM's operator (ncclRedOpCreatePreMulSum with the factor in the
// element type), made on `comm` and destroyed when this goes (NCCL allows it
// as soon as the last operation using it is enqueued); for other ops the
// mapped op, with nothing to destroy.
class RedOp {
 public:
  RedOp(const Api& api, const Reduced& r, double factor, DType dtype, ncclComm_t comm, const std::string& where);
  ~RedOp();
  RedOp(const RedOp&) = delete;
  RedOp& operator=(const RedOp&) = delete;
  ncclRedOp_t get() const { return op_; }

 private:
  const Api& api_;
  ncclComm_t comm_;
  ncclRedOp_t op_;
  bool made_ = false;
};

}  // namespace tdist::nccl
