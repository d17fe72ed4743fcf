#include "convert.h"

#include <stdexcept>

#include "cuda_streams.h"
#include "tdist/cuda.h"
#include "tdist/errors.h"

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace tdist_torch {

namespace {

[[noreturn]] void invalid(const std::string& op, const std::string& what) {
  // tdist's own error for bad arguments; it reaches Python as RuntimeError,
  // as Gloo's TORCH_CHECKs do, so code written for Gloo catches it.
  throw tdist::DistValueError("tdist (torch backend), " + op + ": " + what);
}

// The tdist device of `t`: the CPU, or cuda:N where this plugin carries CUDA
// tensors (torch and libtdist both built with CUDA: cuda_streams.h).
tdist::Device device_of(const at::Tensor& t, const std::string& op, const std::string& what) {
  if (t.device().is_cpu()) return {};
  if (t.device().is_cuda()) {
    if (!serves_cuda())
      invalid(op, what + " is on " + t.device().str() + (tdist::cuda::is_built()
                      ? "; this tdist plugin was built against a torch without CUDA: it serves CPU tensors only"
                      : "; this tdist was built without CUDA (CMake found no nvcc): its torch backend serves CPU "
                        "tensors only"));
    return tdist::Device{tdist::DeviceType::CUDA, t.device().index()};
  }
  invalid(op, what + " is on " + t.device().str() + "; the tdist backend serves CPU and CUDA tensors only");
}

}  // namespace

tdist::DType to_dtype(c10::ScalarType type, const std::string& op) {
  switch (type) {
    case c10::ScalarType::Bool: return tdist::DType::Bool;
    case c10::ScalarType::Byte: return tdist::DType::UInt8;
    case c10::ScalarType::Char: return tdist::DType::Int8;
    case c10::ScalarType::Short: return tdist::DType::Int16;
    case c10::ScalarType::Int: return tdist::DType::Int32;
    case c10::ScalarType::Long: return tdist::DType::Int64;
    case c10::ScalarType::Half: return tdist::DType::Float16;
    case c10::ScalarType::BFloat16: return tdist::DType::BFloat16;
    case c10::ScalarType::Float: return tdist::DType::Float32;
    case c10::ScalarType::Double: return tdist::DType::Float64;
    case c10::ScalarType::ComplexFloat: return tdist::DType::Complex64;
    case c10::ScalarType::ComplexDouble: return tdist::DType::Complex128;
    default:
      invalid(op, std::string("dtype ") + c10::toString(type) +
                      " is not supported (tdist carries bool, uint8, int8, int16, int32, int64, float16, "
                      "bfloat16, float32, float64, complex64, complex128)");
  }
}

tdist::Tensor to_view(const at::Tensor& t, const std::string& op, const std::string& what) {
  if (!t.defined()) invalid(op, what + " is undefined");
  if (t.layout() != c10::kStrided) invalid(op, what + " is not dense (sparse tensors are not supported)");
  const tdist::Device device = device_of(t, op, what);
  // Gloo refuses non-contiguous tensors too; a silent copy would hide that an
  // in-place result does not land where the caller looks.
  if (!t.is_contiguous()) invalid(op, what + " is not contiguous (call .contiguous() first)");
  if (t.is_conj() || t.is_neg()) invalid(op, what + " has a lazy conjugate/negative bit (call .resolve_conj())");
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  return tdist::Tensor(t.data_ptr(), to_dtype(t.scalar_type(), op), std::move(shape), device);
}

std::vector<tdist::Tensor> to_views(const std::vector<at::Tensor>& ts, const std::string& op, const std::string& what) {
  std::vector<tdist::Tensor> views;
  views.reserve(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) views.push_back(to_view(ts[i], op, what + " " + std::to_string(i)));
  return views;
}

tdist::ReduceOp to_reduce_op(const c10d::ReduceOp& op, const std::string& operation) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return tdist::ReduceOp::SUM;
    case c10d::ReduceOp::AVG: return tdist::ReduceOp::AVG;
    case c10d::ReduceOp::PRODUCT: return tdist::ReduceOp::PRODUCT;
    case c10d::ReduceOp::MIN: return tdist::ReduceOp::MIN;
    case c10d::ReduceOp::MAX: return tdist::ReduceOp::MAX;
    case c10d::ReduceOp::BAND: return tdist::ReduceOp::BAND;
    case c10d::ReduceOp::BOR: return tdist::ReduceOp::BOR;
    case c10d::ReduceOp::BXOR: return tdist::ReduceOp::BXOR;
    case c10d::ReduceOp::PREMUL_SUM: {
      // The factor: a double, or a one-element tensor (torch's PreMulSumSupplement, whose name
      // differs between releases: python/torch/CMakeLists.txt).
      auto* s = dynamic_cast<c10d::TDIST_TORCH_PREMUL_SUPPLEMENT*>(op.supplement_.get());
      if (s == nullptr) invalid(operation, "PREMUL_SUM without its factor");
      if (s->tensor_factor.defined()) {
        if (s->tensor_factor.numel() != 1) invalid(operation, "PREMUL_SUM needs a one-element factor tensor");
        return tdist::ReduceOp::premul_sum(s->tensor_factor.item<double>());
      }
      return tdist::ReduceOp::premul_sum(s->double_factor);
    }
    default: invalid(operation, "reduce op " + std::to_string(int(op.op_)) + " is not supported");
  }
}

}  // namespace tdist_torch
