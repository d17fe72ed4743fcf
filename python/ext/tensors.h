// Python objects -> tdist::Tensor views, without copies: NumPy arrays through
// NumPy's own description of their memory, anything else through __dlpack__.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <tdist/tensor.h>

#include "common.h"

namespace tdist_py {

// A view of a Python object's memory and the Python object that keeps that
// memory alive. The view never owns anything, so no C++ thread ever has to
// touch a Python reference; the owner is released with the GIL held.
struct TensorArg {
  tdist::Tensor tensor;
  py::object owner;
};

// `what` names the argument in errors ("all_reduce: tensor"); it is made a
// string only for an error, so a literal costs nothing per call. `writable`:
// the operation writes into it, so a read-only array is refused.
// DistValueError (a ValueError) for non-contiguous or read-only memory and for
// unsupported dtypes; TypeError for objects that are neither.
TensorArg to_tensor(py::handle obj, std::string_view what, bool writable);
// Each element of a list or tuple; `what` gets "[i]" appended.
std::vector<TensorArg> to_tensors(py::handle seq, std::string_view what, bool writable);

std::vector<tdist::Tensor> views(const std::vector<TensorArg>& args);
// The owners as a Python list (for keeping them alive during async work).
py::list owners(const std::vector<TensorArg>& args);

}  // namespace tdist_py
