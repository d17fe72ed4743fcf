// See fast_entry.h.
#include "fast_entry.h"

#include <climits>
#include <string>

#include <tdist/process_group.h>

namespace tdist_py {
namespace {

// One sped-up function. Never freed: CPython keeps pointers to
// `def` for as long as the function object lives, and the module is never
// unloaded.
struct Entry {
  PyMethodDef def{};
  std::string name, doc;
  PyObject* params[kMaxFastParams] = {};  // interned names
  int count = 0;
  FastBody body = nullptr;
  PyObject* slow = nullptr;  // pybind11's function
};

// The parameter a keyword names, or -1. A keyword written in the call is
// the interned string itself; a name built at run time is compared by value.
int param_of(const Entry& e, PyObject* name) {
  for (int i = 0; i < e.count; ++i)
    if (e.params[i] == name) return i;
  for (int i = 0; i < e.count; ++i)
    if (PyUnicode_Compare(e.params[i], name) == 0) return i;
  PyErr_Clear();  // a keyword that is not a str: pybind11 says so
  return -1;
}

// The fast body's answer: a new reference, or null with an error set, or
// null without one (declined).
PyObject* try_fast(const Entry& e, PyObject* const* args, Py_ssize_t n, PyObject* kwnames, bool& declined) {
  declined = true;
  if (n > e.count) return nullptr;
  PyObject* values[kMaxFastParams] = {};
  for (Py_ssize_t i = 0; i < n; ++i) values[i] = args[i];
  if (kwnames != nullptr) {
    const Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nk; ++k) {
      const int at = param_of(e, PyTuple_GET_ITEM(kwnames, k));
      if (at < 0 || values[at] != nullptr) return nullptr;  // unknown or given twice
      values[at] = args[n + k];
    }
  }
  PyObject* result = guarded([&] { return e.body(FastArgs{values}); });
  declined = result == nullptr && !PyErr_Occurred();
  return result;
}

PyObject* call_function(PyObject* capsule, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  const auto& e = *static_cast<const Entry*>(PyCapsule_GetPointer(capsule, nullptr));
  bool declined = false;
  PyObject* result = try_fast(e, args, PyVectorcall_NARGS(nargsf), kwnames, declined);
  if (!declined) return result;
  return PyObject_Vectorcall(e.slow, args, nargsf, kwnames);
}

Entry* make_entry(const char* name, py::handle slow, std::initializer_list<const char*> params, FastBody body) {
  if (params.size() > static_cast<size_t>(kMaxFastParams))
    throw std::logic_error(std::string("speed_up: too many parameters for ") + name);
  auto* e = new Entry();
  e->name = name;
  e->doc = py::str(slow.attr("__doc__"));
  for (const char* p : params) e->params[e->count++] = PyUnicode_InternFromString(p);
  e->body = body;
  e->slow = slow.inc_ref().ptr();
  e->def.ml_name = e->name.c_str();
  e->def.ml_flags = METH_FASTCALL | METH_KEYWORDS;
  e->def.ml_doc = e->doc.c_str();
  return e;
}

}  // namespace

void translate_current_exception() {
  auto& local = py::detail::get_local_internals().registered_exception_translators;
  if (py::detail::apply_exception_translators(local)) return;
  auto& global = py::detail::get_internals().registered_exception_translators;
  if (py::detail::apply_exception_translators(global)) return;
  PyErr_SetString(PyExc_SystemError, "Exception escaped from default exception translator!");
}

void speed_up(py::module_& m, const char* name, std::initializer_list<const char*> params, FastBody body) {
  Entry* e = make_entry(name, m.attr(name), params, body);
  e->def.ml_meth = reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call_function));
  py::capsule self(static_cast<void*>(e));
  py::object function =
      py::reinterpret_steal<py::object>(PyCFunction_NewEx(&e->def, self.ptr(), m.attr("__name__").ptr()));
  if (!function) throw py::error_already_set();
  m.attr(name) = function;
}

bool fast_bool(PyObject* v, bool& out) {
  if (v == nullptr) return true;
  if (v == Py_True || v == Py_False) {
    out = v == Py_True;
    return true;
  }
  return false;
}

bool fast_int(PyObject* v, int& out) {
  if (v == nullptr) return true;
  if (!PyLong_CheckExact(v)) return false;
  int overflow = 0;
  const long value = PyLong_AsLongAndOverflow(v, &overflow);
  if (overflow != 0 || value < INT_MIN || value > INT_MAX) return false;
  out = static_cast<int>(value);
  return true;
}

bool fast_optional_int(PyObject* v, std::optional<int>& out) {
  if (v == nullptr || v == Py_None) {
    out.reset();
    return true;
  }
  int value = 0;
  if (!fast_int(v, value)) return false;
  out = value;
  return true;
}

bool fast_group(PyObject* v, GroupArg& out) {
  if (v == nullptr || v == Py_None) {
    out = {};
    return true;
  }
  static const py::detail::type_info* const type = py::detail::get_type_info(typeid(tdist::ProcessGroup));
  if (type == nullptr || Py_TYPE(v) != type->type) return false;  // a subclass, or NON_GROUP_MEMBER
  auto holder = reinterpret_cast<py::detail::instance*>(v)->get_value_and_holder();
  if (!holder.holder_constructed()) return false;
  tdist::Group g = holder.holder<std::shared_ptr<tdist::ProcessGroup>>();
  const bool outside = g && !g->is_member();
  out = {std::move(g), outside};
  return true;
}

bool fast_reduce_op(PyObject* v, tdist::ReduceOp& out) {
  if (v == nullptr) return true;
  auto* op = fast_instance<tdist::ReduceOp>(v);
  if (op == nullptr) return false;
  out = *op;
  return true;
}

namespace detail {

void* instance_of(PyObject* v, const py::detail::type_info* type) {
  if (type == nullptr) return nullptr;
  py::detail::type_caster_generic caster(type);
  if (!caster.load(v, false)) return nullptr;
  return caster.value;
}

}  // namespace detail
}  // namespace tdist_py
