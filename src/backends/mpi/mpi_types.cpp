#include "backends/mpi/mpi_types.h"

#include <array>
#include <mutex>

#include "tdist/errors.h"
#include "reduce/reduction_kernels.h"

namespace tdist::mpi {

namespace {

// float16 and bfloat16: two bytes each, distinct types so that a
// user-defined op can tell them apart.
struct Halves {
  MPI_Datatype float16 = MPI_DATATYPE_NULL, bfloat16 = MPI_DATATYPE_NULL;
};

std::mutex g_mu;
Halves g_halves;                                    // guarded by g_mu
std::array<MPI_Op, ReduceOp::PREMUL_SUM + 1> g_ops;  // guarded by g_mu; MPI_OP_NULL: not made yet
bool g_ops_ready = false;

Halves& halves() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_halves.float16 == MPI_DATATYPE_NULL) {
    MPI_Type_contiguous(2, MPI_BYTE, &g_halves.float16);
    MPI_Type_commit(&g_halves.float16);
    MPI_Type_contiguous(2, MPI_BYTE, &g_halves.bfloat16);
    MPI_Type_commit(&g_halves.bfloat16);
  }
  return g_halves;
}

// MPI's own type for dtype; MPI_DATATYPE_NULL for the two made here.
MPI_Datatype native_datatype(DType dtype) {
  switch (dtype) {
    case DType::Bool: return MPI_C_BOOL;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Int8: return MPI_INT8_T;
    case DType::Int16: return MPI_INT16_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Complex64: return MPI_C_FLOAT_COMPLEX;
    case DType::Complex128: return MPI_C_DOUBLE_COMPLEX;
    case DType::Float16:
    case DType::BFloat16: return MPI_DATATYPE_NULL;
  }
  return MPI_DATATYPE_NULL;
}

// Runs once per call of a user-defined op (each chunk MPI reduces): one lock at most.
DType dtype_from(MPI_Datatype type) {
  for (int d = 0; d < kNumDTypes; ++d)
    if (native_datatype(static_cast<DType>(d)) == type) return static_cast<DType>(d);
  const Halves& h = halves();
  if (type == h.float16) return DType::Float16;
  if (type == h.bfloat16) return DType::BFloat16;
  throw DistBackendError("mpi backend: a reduction was handed an MPI datatype it did not make");
}

// MPI's user function: inout[i] = in[i] (op) inout[i]; every op here commutes.
template <ReduceOp::Kind K>
void user_reduce(void* in, void* inout, int* len, MPI_Datatype* type) {
  reduction::accumulate(ReduceOp(K), dtype_from(*type), inout, in, static_cast<size_t>(*len));
}

MPI_User_function* user_function(ReduceOp::Kind k) {
  switch (k) {
    case ReduceOp::PRODUCT: return &user_reduce<ReduceOp::PRODUCT>;
    case ReduceOp::MIN: return &user_reduce<ReduceOp::MIN>;
    case ReduceOp::MAX: return &user_reduce<ReduceOp::MAX>;
    case ReduceOp::BAND: return &user_reduce<ReduceOp::BAND>;
    case ReduceOp::BOR: return &user_reduce<ReduceOp::BOR>;
    case ReduceOp::BXOR: return &user_reduce<ReduceOp::BXOR>;
    default: return &user_reduce<ReduceOp::SUM>;  // SUM, AVG, PREMUL_SUM
  }
}

MPI_Op user_op(ReduceOp::Kind k) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_ops_ready) {
    g_ops.fill(MPI_OP_NULL);
    g_ops_ready = true;
  }
  if (g_ops[k] == MPI_OP_NULL) MPI_Op_create(user_function(k), /*commute=*/1, &g_ops[k]);
  return g_ops[k];
}

MPI_Op native_op(ReduceOp::Kind k) {
  switch (k) {
    case ReduceOp::PRODUCT: return MPI_PROD;
    case ReduceOp::MIN: return MPI_MIN;
    case ReduceOp::MAX: return MPI_MAX;
    case ReduceOp::BAND: return MPI_BAND;
    case ReduceOp::BOR: return MPI_BOR;
    case ReduceOp::BXOR: return MPI_BXOR;
    default: return MPI_SUM;
  }
}

}  // namespace

MPI_Datatype datatype_of(DType dtype) {
  if (dtype == DType::Float16) return halves().float16;
  if (dtype == DType::BFloat16) return halves().bfloat16;
  return native_datatype(dtype);
}

MPI_Op op_of(ReduceOp op, DType dtype) {
  const ReduceOp::Kind k = op.kind();
  switch (dtype) {
    case DType::Bool:
    case DType::Float16:
    case DType::BFloat16:
      return user_op(k);  // MPI has no such types (bool: tdist's SUM is a logical or)
    case DType::Float32:
    case DType::Float64:
      // MPI's MIN/MAX leave NaN to the implementation; torch propagates it.
      return k == ReduceOp::MIN || k == ReduceOp::MAX ? user_op(k) : native_op(k);
    default:
      return native_op(k);  // integers and complex: MPI's ops give the same results
  }
}

void release_types() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_halves.float16 != MPI_DATATYPE_NULL) {
    MPI_Type_free(&g_halves.float16);
    MPI_Type_free(&g_halves.bfloat16);
  }
  g_halves = Halves{};
  if (g_ops_ready)
    for (MPI_Op& op : g_ops)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
  g_ops_ready = false;
}

}  // namespace tdist::mpi
