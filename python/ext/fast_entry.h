// A faster way into the calls Python makes in a loop: a collective of a few
// bytes (Work, whose wait() is the other call of such a loop, is a type of
// its own: work_object.cpp). pybind11's dispatcher spends about 0.2 µs on a call
// before the function runs (a record of every argument, a type lookup per
// class argument) and 0.3 µs more for each call with keywords (it copies the
// keyword dict and looks every parameter up by name), where mpi4py's whole
// 2-rank Allreduce of 8 bytes takes about 1 µs (docs/performance.md).
//
// So these functions are entered through CPython's vectorcall: the arguments
// are matched to the parameters by position and by (interned) keyword, and
// a fast body converts the common shapes (a NumPy array, None, True/False, a
// plain int, a ReduceOp or ProcessGroup) and calls the very function that
// pybind11 binds. Any other shape (an unknown or repeated keyword, too many
// arguments, a value that needs a conversion) goes to pybind11's function
// unchanged, which converts it or raises its usual TypeError: the two ways
// in differ only in speed.
#pragma once

#include <cxxabi.h>

#include <initializer_list>
#include <optional>

#include <tdist/reduce_op.h>

#include "args.h"
#include "common.h"

namespace tdist_py {

// The arguments of one call by parameter: values[i] is what was passed for
// parameter i, positionally or by keyword (borrowed), null where nothing was.
struct FastArgs {
  PyObject* const* values;
};

// Returns a new reference, or null with no Python error set to hand the call
// to pybind11's function: it must decline before it has done anything. It
// may throw, as a bound function may (the error is translated alike).
using FastBody = PyObject* (*)(const FastArgs&);

// At most this many parameters.
inline constexpr int kMaxFastParams = 8;

// Replaces function `name` of `m` (bound by pybind11 with the parameters
// `params`, in order) by one that tries `body` first.
void speed_up(py::module_& m, const char* name, std::initializer_list<const char*> params, FastBody body);

// pybind11's translation of the C++ exception being handled into the Python
// error it raises (its dispatcher's, for the same exceptions).
void translate_current_exception();

// What a C function that calls C++ returns: body()'s PyObject* (a new
// reference, or null with or without a Python error set), or null with the
// error a C++ exception becomes set.
template <typename Body>
PyObject* guarded(Body&& body) {
  try {
    return body();
  } catch (py::error_already_set& error) {
    error.restore();
  } catch (abi::__forced_unwind&) {
    throw;  // a cancelled thread unwinds through here
  } catch (...) {
    translate_current_exception();
  }
  return nullptr;
}

// The fast conversions: false declines the call. A null value (not passed)
// leaves `out` at its default.
bool fast_bool(PyObject* v, bool& out);                        // True or False
bool fast_int(PyObject* v, int& out);                          // an int (not a bool) that fits
bool fast_optional_int(PyObject* v, std::optional<int>& out);  // None too
bool fast_group(PyObject* v, GroupArg& out);                   // None or a ProcessGroup
bool fast_reduce_op(PyObject* v, tdist::ReduceOp& out);        // a ReduceOp
// A C++ pointer to the instance `v` of the bound class T, or null if it is none.
template <typename T>
T* fast_instance(PyObject* v);

// The new reference a body returns.
inline PyObject* give(py::object o) { return o.release().ptr(); }

// ---- implementation of the template ----

namespace detail {
void* instance_of(PyObject* v, const py::detail::type_info* type);
}  // namespace detail

template <typename T>
T* fast_instance(PyObject* v) {
  // Looked up once: pybind11 looks a class up by its type_index on every call.
  static const py::detail::type_info* const type = py::detail::get_type_info(typeid(T));
  return static_cast<T*>(detail::instance_of(v, type));
}

}  // namespace tdist_py
