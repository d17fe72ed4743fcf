#include "backends/nccl/nccl_types.h"

#include "tdist/errors.h"

namespace tdist::nccl {

namespace {

// NCCL's own type for a dtype, or false where it has none.
bool native_type(DType dtype, ncclDataType_t& out) {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8: out = ncclUint8; return true;
    case DType::Int8: out = ncclInt8; return true;
    case DType::Int32: out = ncclInt32; return true;
    case DType::Int64: out = ncclInt64; return true;
    case DType::Float16: out = ncclFloat16; return true;
    case DType::BFloat16: out = ncclBfloat16; return true;
    case DType::Float32: out = ncclFloat32; return true;
    case DType::Float64: out = ncclFloat64; return true;
    default: return false;
  }
}

[[noreturn]] void refuse(ReduceOp op, DType dtype, const std::string& where, const std::string& why) {
  throw DistBackendError(where + ": nccl cannot " + std::string(op.name()) + " " + std::string(dtype_name(dtype)) +
                         " (" + why + ")");
}

}  // namespace

Moved moved_as(DType dtype, size_t numel) {
  ncclDataType_t type;
  if (native_type(dtype, type)) return {type, numel};
  return {ncclUint8, numel * dtype_size(dtype)};
}

Reduced reduced_as(ReduceOp op, DType dtype, size_t numel, const std::string& where) {
  const ReduceOp::Kind kind = op.kind();
  if (kind == ReduceOp::BAND || kind == ReduceOp::BOR || kind == ReduceOp::BXOR)
    refuse(op, dtype, where, "NCCL has no bitwise reductions; torch's NCCL backend refuses them too");
  Reduced r{ncclFloat32, numel, ncclSum};
  DType element = dtype;
  if (is_complex(dtype)) {
    if (kind != ReduceOp::SUM && kind != ReduceOp::AVG && kind != ReduceOp::PREMUL_SUM)
      refuse(op, dtype, where, "complex numbers reduce through NCCL as pairs of reals, which only SUM, AVG and "
                               "PREMUL_SUM act on part by part");
    element = dtype == DType::Complex64 ? DType::Float32 : DType::Float64;
    r.count = numel * 2;
  }
  if (!native_type(element, r.type))
    refuse(op, dtype, where, "NCCL has no " + std::string(dtype_name(dtype)) + " type to reduce");
  if (dtype == DType::Bool) {
    // Logical or and and, which MAX and MIN of 0/1 bytes are.
    switch (kind) {
      case ReduceOp::SUM:
      case ReduceOp::MAX: r.op = ncclMax; return r;
      case ReduceOp::PRODUCT:
      case ReduceOp::MIN: r.op = ncclMin; return r;
      default: refuse(op, dtype, where, "bool has no average or scaled sum");
    }
  }
  switch (kind) {
    case ReduceOp::SUM: r.op = ncclSum; break;
    case ReduceOp::PRODUCT: r.op = ncclProd; break;
    case ReduceOp::MIN: r.op = ncclMin; break;
    case ReduceOp::MAX: r.op = ncclMax; break;
    case ReduceOp::AVG: r.op = ncclAvg; break;
    case ReduceOp::PREMUL_SUM:
      if (!is_floating(element))
        refuse(op, dtype, where, "NCCL's PreMulSum takes floating-point types only, as torch's NCCL backend");
      r.premul = true;
      break;
    default: refuse(op, dtype, where, "unknown reduce op");
  }
  return r;
}

RedOp::RedOp(const Api& api, const Reduced& r, double factor, DType dtype, ncclComm_t comm, const std::string& where)
    : api_(api), comm_(comm), op_(r.op) {
  if (!r.premul) return;
  // The factor in the element type the reduction runs in (complex: its reals).
  union {
    Half h;
    BFloat16 b;
    float f;
    double d;
  } scalar{};
  switch (r.type) {
    case ncclFloat16: scalar.h = to_half(static_cast<float>(factor)); break;
    case ncclBfloat16: scalar.b = to_bfloat16(static_cast<float>(factor)); break;
    case ncclFloat32: scalar.f = static_cast<float>(factor); break;
    default: scalar.d = factor; break;
  }
  const ncclResult_t rc = api.RedOpCreatePreMulSum(&op_, &scalar, r.type, ncclScalarHostImmediate, comm);
  if (rc != ncclSuccess)
    throw DistBackendError((where.empty() ? "" : where + ": ") + "ncclRedOpCreatePreMulSum for " + std::string(dtype_name(dtype)) +
                           " failed: " + api.GetErrorString(rc));
  made_ = true;
}

RedOp::~RedOp() {
  if (made_) api_.RedOpDestroy(op_, comm_);
}

}  // namespace tdist::nccl
