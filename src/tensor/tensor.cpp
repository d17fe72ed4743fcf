// Tensor: a non-owning, contiguous view; construction checks, slices, views and DLPack import.
#include "tdist/tensor.h"

#include <dlpack/dlpack.h>

#include <string>

#include "tdist/errors.h"

namespace tdist {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Number of elements of `shape`; throws DistValueError on a negative dimension or overflow
// (the byte size must fit in int64 too). `what` names the caller in the message.
int64_t checked_numel(const std::vector<int64_t>& shape, size_t element_size, const char* what) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw DistValueError(std::string(what) + ": dimension " + std::to_string(i) + " of shape " + shape_str(shape) +
                           " is negative");
    }
    if (__builtin_mul_overflow(n, shape[i], &n)) {
      throw DistValueError(std::string(what) + ": shape " + shape_str(shape) + " has too many elements");
    }
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(element_size), &bytes)) {
    throw DistValueError(std::string(what) + ": shape " + shape_str(shape) + " has too many bytes");
  }
  return n;
}

std::string dl_device_name(int type) {
  switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLVPI: return "kDLVPI";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLExtDev: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    default: return "device type " + std::to_string(type);
  }
}

// DLPack 0.6 has no kDLBool; later versions use code 6 for it.
constexpr uint8_t kDLBoolCode = 6;

DType dl_dtype(DLDataType t) {
  const int bits = t.bits;
  switch (t.code) {
    case kDLInt:
      if (bits == 8) return DType::Int8;
      if (bits == 16) return DType::Int16;
      if (bits == 32) return DType::Int32;
      if (bits == 64) return DType::Int64;
      break;
    case kDLUInt:
      if (bits == 8) return DType::UInt8;
      if (bits == 1) return DType::Bool;  // TVM's bool: 1 bit of value in one byte
      break;
    case kDLFloat:
      if (bits == 16) return DType::Float16;
      if (bits == 32) return DType::Float32;
      if (bits == 64) return DType::Float64;
      break;
    case kDLBfloat:
      if (bits == 16) return DType::BFloat16;
      break;
    case kDLComplex:
      if (bits == 64) return DType::Complex64;
      if (bits == 128) return DType::Complex128;
      break;
    case kDLBoolCode:
      if (bits == 8 || bits == 1) return DType::Bool;
      break;
    default:
      throw DistValueError("Tensor::from_dlpack: unsupported DLPack dtype code " + std::to_string(t.code) +
                           " (bits " + std::to_string(bits) +
                           "); supported codes: 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool");
  }
  static const char* const kCodeNames[] = {"int", "uint", "float", "opaque handle", "bfloat", "complex", "bool"};
  throw DistValueError(std::string("Tensor::from_dlpack: unsupported DLPack dtype ") + kCodeNames[t.code] +
                       " (code " + std::to_string(t.code) + ") with " + std::to_string(bits) +
                       " bits; tdist has int8/16/32/64, uint8, bool, float16/32/64, bfloat16, complex64/128");
}

Device dl_device(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory: an ordinary CPU pointer
      return Device{DeviceType::CPU, -1};
    case kDLCUDA:
      if (d.device_id < 0) {
        throw DistValueError("Tensor::from_dlpack: kDLCUDA device_id " + std::to_string(d.device_id) +
                             " is negative");
      }
      return Device{DeviceType::CUDA, d.device_id};
    default:
      throw DistValueError("Tensor::from_dlpack: unsupported DLPack device " +
                           dl_device_name(static_cast<int>(d.device_type)) + " (device_id " +
                           std::to_string(d.device_id) + "); supported: kDLCPU, kDLCUDA, kDLCUDAHost");
  }
}

}  // namespace

Tensor::Tensor(void* data, DType dtype, std::vector<int64_t> shape, Device device)
    : data_(data), dtype_(dtype), shape_(std::move(shape)), device_(device) {
  if (!is_valid(dtype_)) {
    throw DistValueError("Tensor: invalid dtype code " + std::to_string(static_cast<unsigned>(dtype_)));
  }
  if (device_.index < -1) {
    throw DistValueError("Tensor: device index " + std::to_string(device_.index) + " is negative (use -1 for the " +
                         "current device)");
  }
  if (device_.type != DeviceType::CPU && device_.type != DeviceType::CUDA) {
    throw DistValueError("Tensor: invalid device type code " + std::to_string(static_cast<unsigned>(device_.type)));
  }
  numel_ = checked_numel(shape_, dtype_size(dtype_), "Tensor");
}

Tensor Tensor::slice(int64_t offset, int64_t count) const {
  if (offset < 0 || count < 0 || offset > numel_ || count > numel_ - offset) {
    throw DistValueError("Tensor::slice(offset=" + std::to_string(offset) + ", count=" + std::to_string(count) +
                         ") is out of range for a tensor of " + std::to_string(numel_) + " elements (" + str() +
                         ")");
  }
  Tensor t = *this;
  if (data_ != nullptr) t.data_ = static_cast<char*>(data_) + offset * static_cast<int64_t>(element_size());
  t.shape_ = {count};
  t.numel_ = count;
  return t;
}

Tensor Tensor::view(std::vector<int64_t> shape) const {
  // One dimension may be -1: inferred from the others, as in torch.
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw DistValueError("Tensor::view: shape " + shape_str(shape) + " has invalid dimension " +
                           std::to_string(i) + " (only one -1 is allowed) for " + str());
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      throw DistValueError("Tensor::view: shape " + shape_str(shape) + " has too many elements for " + str());
    }
  }
  if (inferred >= 0) {
    if (known == 0 || numel_ % known != 0) {
      throw DistValueError("Tensor::view: shape " + shape_str(shape) + " cannot hold the " +
                           std::to_string(numel_) + " elements of " + str());
    }
    shape[inferred] = numel_ / known;
    known = numel_;
  }
  if (known != numel_) {
    throw DistValueError("Tensor::view: shape " + shape_str(shape) + " has " + std::to_string(known) +
                         " elements but " + str() + " has " + std::to_string(numel_));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

std::string Tensor::str() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " on " + device_.str();
}

Tensor Tensor::from_dlpack(DLManagedTensor* managed) {
  if (managed == nullptr) throw DistValueError("Tensor::from_dlpack: the DLManagedTensor is null");
  const DLTensor& dl = managed->dl_tensor;
  // Every check comes before the view takes ownership: on error the caller still owns `managed`.
  if (dl.ndim < 0) throw DistValueError("Tensor::from_dlpack: ndim " + std::to_string(dl.ndim) + " is negative");
  if (dl.ndim > 0 && dl.shape == nullptr) {
    throw DistValueError("Tensor::from_dlpack: shape is null for ndim " + std::to_string(dl.ndim));
  }
  if (dl.dtype.lanes != 1) {
    throw DistValueError("Tensor::from_dlpack: dtype lanes " + std::to_string(dl.dtype.lanes) +
                         " is not supported (vector types: lanes must be 1)");
  }
  const DType dtype = dl_dtype(dl.dtype);
  const Device device = dl_device(dl.device);
  std::vector<int64_t> shape(dl.shape, dl.shape + dl.ndim);
  const int64_t numel = checked_numel(shape, dtype_size(dtype), "Tensor::from_dlpack");
  if (dl.strides != nullptr && numel > 0) {
    // Row-major: stride[i] == product of shape[i+1..]; a size-1 dimension may have any stride.
    int64_t expected = 1;
    for (int i = dl.ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && dl.strides[i] != expected) {
        std::string strides = "[";
        for (int j = 0; j < dl.ndim; ++j) strides += (j ? ", " : "") + std::to_string(dl.strides[j]);
        throw DistValueError("Tensor::from_dlpack: strides " + strides + "] of shape " + shape_str(shape) +
                             " are not contiguous (dimension " + std::to_string(i) + " has stride " +
                             std::to_string(dl.strides[i]) + ", expected " + std::to_string(expected) +
                             "); make the tensor contiguous first");
      }
      expected *= shape[i];
    }
  }
  if (dl.data == nullptr && numel > 0) {
    throw DistValueError("Tensor::from_dlpack: data is null for " + shape_str(shape) + " elements");
  }
  void* data = dl.data == nullptr ? nullptr : static_cast<char*>(dl.data) + dl.byte_offset;
  Tensor t(data, dtype, std::move(shape), device);
  // From here the view owns `managed`: the deleter runs once, when the last copy goes
  // (shared_ptr also runs it if allocating the control block fails).
  t.owner_ = std::shared_ptr<void>(managed, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter != nullptr) m->deleter(m);
  });
  return t;
}

}  // namespace tdist
