// ReduceOp as in torch: ReduceOp.SUM, ..., and PREMUL_SUM with a factor
// (ReduceOp.premul_sum(f), torch's private _make_nccl_premul_sum(f)).
#include <pybind11/operators.h>

#include <string>

#include <tdist/reduce_op.h>

#include "common.h"

namespace tdist_py {

void bind_reduce_op(py::module_& m) {
  using tdist::ReduceOp;
  py::class_<ReduceOp> cls(m, "ReduceOp",
      "Reduction of the reducing collectives: SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, and "
      "PREMUL_SUM (each input multiplied by a factor before the sum: ReduceOp.premul_sum(factor)). "
      "An op that means nothing for a dtype (BAND on floats, MAX on complex) raises DistValueError.");
  cls.def(py::init<>())
      .def(py::init([](const ReduceOp& other) { return other; }), py::arg("op"))
      .def_static("premul_sum", &ReduceOp::premul_sum, py::arg("factor"),
                  "PREMUL_SUM with the given factor: sum of factor * input.")
      .def_property_readonly("name", [](const ReduceOp& op) { return std::string(op.name()); })
      .def_property_readonly("factor", &ReduceOp::factor)
      .def(py::self == py::self)
      .def("__hash__", [](const ReduceOp& op) { return std::hash<double>()(op.factor()) * 31 + op.kind(); })
      .def("__repr__", [](const ReduceOp& op) {
        std::string s = "ReduceOp." + std::string(op.name());
        if (op.kind() == ReduceOp::PREMUL_SUM) s += "(" + std::to_string(op.factor()) + ")";
        return s;
      })
      .def(py::pickle([](const ReduceOp& op) { return py::make_tuple(int(op.kind()), op.factor()); },
                      [](py::tuple t) {
                        auto kind = static_cast<ReduceOp::Kind>(t[0].cast<int>());
                        return kind == ReduceOp::PREMUL_SUM ? ReduceOp::premul_sum(t[1].cast<double>())
                                                            : ReduceOp(kind);
                      }));
  const std::pair<const char*, ReduceOp::Kind> kinds[] = {
      {"SUM", ReduceOp::SUM}, {"AVG", ReduceOp::AVG}, {"PRODUCT", ReduceOp::PRODUCT},
      {"MIN", ReduceOp::MIN}, {"MAX", ReduceOp::MAX}, {"BAND", ReduceOp::BAND},
      {"BOR", ReduceOp::BOR}, {"BXOR", ReduceOp::BXOR}, {"PREMUL_SUM", ReduceOp::PREMUL_SUM}};
  for (const auto& [name, kind] : kinds) cls.attr(name) = ReduceOp(kind);
  m.def("_make_nccl_premul_sum", &ReduceOp::premul_sum, py::arg("factor"), "torch's name for ReduceOp.premul_sum.");
}

}  // namespace tdist_py
