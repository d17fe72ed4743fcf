// A non-owning view of contiguous memory: pointer, dtype, shape, device.
// Built from pointers, std::vector, std::span or DLPack; never copies.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "tdist/dtype.h"

struct DLManagedTensor;  // from <dlpack/dlpack.h>

namespace tdist {

class Tensor {
 public:
  Tensor() = default;
  Tensor(void* data, DType dtype, std::vector<int64_t> shape, Device device = {});
  // 1-D views of typed memory.
  template <typename T>
  Tensor(T* data, size_t count, Device device = {})
      : Tensor(static_cast<void*>(const_cast<std::remove_cv_t<T>*>(data)), dtype_of_v<T>,
               {static_cast<int64_t>(count)}, device) {}
  template <typename T>
  Tensor(std::vector<T>& v) : Tensor(v.data(), v.size()) {}  // NOLINT: implicit by design
  template <typename T>
  Tensor(std::span<T> s) : Tensor(s.data(), s.size()) {}  // NOLINT: implicit by design

  // Adopts a DLPack tensor: the view keeps it alive and calls its deleter at the end.
  // Rejects non-contiguous strides, unknown dtypes and lanes != 1 with DistValueError.
  static Tensor from_dlpack(DLManagedTensor* managed);

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const { return static_cast<T*>(data_); }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  Device device() const { return device_; }
  int64_t numel() const { return numel_; }
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * element_size(); }
  bool defined() const { return data_ != nullptr || numel_ == 0; }
  bool is_cpu() const { return device_.type == DeviceType::CPU; }
  // True for a view that keeps memory alive (an adopted DLPack tensor, from_dlpack).
  bool keeps_memory_alive() const { return owner_ != nullptr; }
  // The same view as `other`: memory, dtype, shape, device and owner (a loop
  // that passes one buffer call after call passes the same view).
  bool same_view(const Tensor& other) const {
    if (data_ != other.data_ || dtype_ != other.dtype_ || !(device_ == other.device_) || owner_ != other.owner_ ||
        shape_.size() != other.shape_.size())
      return false;
    for (size_t d = 0; d < shape_.size(); ++d)  // a loop: a memcmp call would cost more than a shape of a few
      if (shape_[d] != other.shape_[d]) return false;
    return true;
  }

  // A contiguous sub-range of elements [offset, offset+count) as a 1-D view.
  Tensor slice(int64_t offset, int64_t count) const;
  // Same memory, new shape with the same number of elements.
  Tensor view(std::vector<int64_t> shape) const;
  std::string str() const;  // "float32[4, 3] on cpu"

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::Float32;
  std::vector<int64_t> shape_{0};
  int64_t numel_ = 0;
  Device device_{};
  std::shared_ptr<void> owner_;  // keeps an adopted DLPack tensor alive
};

}  // namespace tdist
