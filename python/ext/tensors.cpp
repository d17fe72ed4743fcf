// NumPy arrays are read through pybind11's view of the array (pointer, dtype,
// flags): the buffer is used in place. Other objects go through the DLPack
// protocol (__dlpack__ returns a capsule holding a DLManagedTensor); its
// deleter is called from a capsule of ours, i.e. with the GIL, whenever the
// last owner goes away.
#include "tensors.h"

#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>

#include <tdist/errors.h>

namespace tdist_py {
namespace {

// An argument's label: its name, and its index in a list (-1: not in one).
struct Label {
  std::string_view what;
  long index = -1;
  std::string str() const {
    std::string s(what);
    if (index >= 0) s += "[" + std::to_string(index) + "]";
    return s;
  }
};

[[noreturn]] void fail(const Label& what, const std::string& why) { throw tdist::DistValueError(what.str() + ": " + why); }

tdist::DType numpy_dtype(const py::dtype& dt, const Label& what) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (dt.byteorder() == '>' ) fail(what, "byte-swapped (big-endian) arrays are not supported; use .astype(native)");
  switch (kind) {
    case 'b':
      if (size == 1) return tdist::DType::Bool;
      break;
    case 'u':
      if (size == 1) return tdist::DType::UInt8;
      break;
    case 'i':
      if (size == 1) return tdist::DType::Int8;
      if (size == 2) return tdist::DType::Int16;
      if (size == 4) return tdist::DType::Int32;
      if (size == 8) return tdist::DType::Int64;
      break;
    case 'f':
      if (size == 2) return tdist::DType::Float16;
      if (size == 4) return tdist::DType::Float32;
      if (size == 8) return tdist::DType::Float64;
      break;
    case 'c':
      if (size == 8) return tdist::DType::Complex64;
      if (size == 16) return tdist::DType::Complex128;
      break;
    default:
      break;
  }
  fail(what, "dtype " + py::str(py::handle(dt)).cast<std::string>() +
                 " is not supported (bool, uint8, int8, int16, int32, int64, float16, float32, float64, "
                 "complex64, complex128; bfloat16 through __dlpack__)");
}

TensorArg from_numpy(py::handle obj, const Label& what, bool writable) {
  auto arr = py::reinterpret_borrow<py::array>(obj);
  tdist::DType dtype = numpy_dtype(arr.dtype(), what);
  if (!(arr.flags() & py::array::c_style)) {
    fail(what, "the array is not C-contiguous (strides " + py::str(arr.attr("strides")).cast<std::string>() +
                   "); pass numpy.ascontiguousarray(a) and copy the result back, tdist works in place");
  }
  if (writable && !arr.writeable()) {
    fail(what, "the array is read-only, but the operation writes its result into it");
  }
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  // A 0-d array is one element; tdist shapes are never empty.
  if (shape.empty()) shape.push_back(1);
  void* data = const_cast<void*>(arr.data());
  return {tdist::Tensor(data, dtype, std::move(shape)), py::reinterpret_borrow<py::object>(obj)};
}

tdist::DType dlpack_dtype(DLDataType t, const Label& what) {
  if (t.lanes != 1) fail(what, "DLPack vector types (lanes=" + std::to_string(t.lanes) + ") are not supported");
  switch (t.code) {
    case kDLInt:
      if (t.bits == 8) return tdist::DType::Int8;
      if (t.bits == 16) return tdist::DType::Int16;
      if (t.bits == 32) return tdist::DType::Int32;
      if (t.bits == 64) return tdist::DType::Int64;
      break;
    case kDLUInt:
      if (t.bits == 8) return tdist::DType::UInt8;
      break;
    case kDLFloat:
      if (t.bits == 16) return tdist::DType::Float16;
      if (t.bits == 32) return tdist::DType::Float32;
      if (t.bits == 64) return tdist::DType::Float64;
      break;
    case kDLBfloat:
      if (t.bits == 16) return tdist::DType::BFloat16;
      break;
    case kDLComplex:
      if (t.bits == 64) return tdist::DType::Complex64;
      if (t.bits == 128) return tdist::DType::Complex128;
      break;
    case 6:  // kDLBool (DLPack 0.8; this header may predate it)
      if (t.bits == 8) return tdist::DType::Bool;
      break;
    default:
      break;
  }
  fail(what, "DLPack dtype (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
                 " bits) is not supported");
}

TensorArg from_dlpack(py::handle obj, const Label& what) {
  py::object capsule_obj = obj.attr("__dlpack__")();
  if (!PyCapsule_IsValid(capsule_obj.ptr(), "dltensor")) {
    fail(what, "__dlpack__() did not return an unused \"dltensor\" capsule");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule_obj.ptr(), "dltensor"));
  // Ours now: renaming tells the producer's capsule destructor not to free it.
  PyCapsule_SetName(capsule_obj.ptr(), "used_dltensor");
  py::capsule owner(managed, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter != nullptr) m->deleter(m);
  });

  const DLTensor& t = managed->dl_tensor;
  tdist::DType dtype = dlpack_dtype(t.dtype, what);
  tdist::Device device;
  if (t.device.device_type == kDLCPU || t.device.device_type == kDLCUDAHost) {
    device = {tdist::DeviceType::CPU, -1};
  } else if (t.device.device_type == kDLCUDA) {
    device = {tdist::DeviceType::CUDA, t.device.device_id};
  } else {
    fail(what, "DLPack device type " + std::to_string(t.device.device_type) + " is not supported (cpu, cuda)");
  }
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  // Row-major contiguity; dimensions of size 1 may carry any stride.
  if (t.strides != nullptr) {
    int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (shape[d] != 1 && t.strides[d] != expected) {
        fail(what, "the DLPack tensor is not contiguous (dimension " + std::to_string(d) + " has stride " +
                       std::to_string(t.strides[d]) + ", expected " + std::to_string(expected) + ")");
      }
      expected *= shape[d];
    }
  }
  if (shape.empty()) shape.push_back(1);
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  // The producer object stays referenced too: some producers' deleters do not hold it.
  py::tuple keep = py::make_tuple(owner, obj);
  return {tdist::Tensor(data, dtype, std::move(shape), device), keep};
}

TensorArg to_tensor(py::handle obj, const Label& what, bool writable) {
  if (obj.is_none()) fail(what, "expected an array, got None");
  if (py::isinstance<py::array>(obj)) return from_numpy(obj, what, writable);
  if (py::hasattr(obj, "__dlpack__")) return from_dlpack(obj, what);
  throw py::type_error(what.str() + ": expected a numpy.ndarray or an object with __dlpack__, got " +
                       py::str(py::type::of(obj)).cast<std::string>());
}

}  // namespace

TensorArg to_tensor(py::handle obj, std::string_view what, bool writable) { return to_tensor(obj, Label{what}, writable); }

std::vector<TensorArg> to_tensors(py::handle seq, std::string_view what, bool writable) {
  if (seq.is_none()) return {};
  if (!py::isinstance<py::list>(seq) && !py::isinstance<py::tuple>(seq)) {
    throw py::type_error(std::string(what) + ": expected a list of arrays, got " +
                         py::str(py::type::of(seq)).cast<std::string>());
  }
  std::vector<TensorArg> out;
  out.reserve(py::len(seq));
  long i = 0;
  for (py::handle item : seq) out.push_back(to_tensor(item, Label{what, i++}, writable));
  return out;
}

std::vector<tdist::Tensor> views(const std::vector<TensorArg>& args) {
  std::vector<tdist::Tensor> out;
  out.reserve(args.size());
  for (const auto& a : args) out.push_back(a.tensor);
  return out;
}

py::list owners(const std::vector<TensorArg>& args) {
  py::list out;
  for (const auto& a : args) out.append(a.owner);
  return out;
}

}  // namespace tdist_py
