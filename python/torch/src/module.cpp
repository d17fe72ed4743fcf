// The Python extension tdist._tdist_torch: the ProcessGroupTdist type and the
// factory that tdist/torch.py registers with torch.distributed as backend "tdist".
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <string>
#include <vector>

#include "../../ext/interruptible_wait.h"
#include "cuda_streams.h"
#include "group_names.h"
#include "process_group_tdist.h"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<tdist_torch::ProcessGroupTdist> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, double timeout_seconds,
                                                          std::vector<int> global_ranks) {
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000.0));
  std::string name = tdist_torch::group_name_for(global_ranks);
  return c10::make_intrusive<tdist_torch::ProcessGroupTdist>(store, rank, size, timeout, std::move(name),
                                                             std::move(global_ranks));
}

}  // namespace

PYBIND11_MODULE(_tdist_torch, m) {
  m.doc() = "tdist as a torch.distributed backend (import tdist.torch to register it)";
  // torch's bindings of c10d::Backend and Store must be loaded first: the
  // class below derives from the former, and create() takes the latter.
  py::module_::import("torch.distributed");
  // Waits check for Ctrl-C on this thread only (python/ext/interruptible_wait.h).
  tdist_py::remember_main_thread();

  py::class_<tdist_torch::ProcessGroupTdist, c10::intrusive_ptr<tdist_torch::ProcessGroupTdist>, c10d::Backend>(
      m, "ProcessGroupTdist", "The torch.distributed backend (c10d Backend) whose operations run on the tdist library")
      .def_property_readonly("tdist_group_name", &tdist_torch::ProcessGroupTdist::groupName)
      .def("failed_ranks",
           [](tdist_torch::ProcessGroupTdist& self, std::optional<std::chrono::milliseconds> silence) {
             return self.failed_ranks(silence.value_or(tdist::kUnsetTimeout));
           },
           py::arg("silence") = py::none(), py::call_guard<py::gil_scoped_release>(),
           "The group ranks that failed, the same list on every survivor (tdist.failed_ranks).");

  // The devices torch.distributed registers the backend for (tdist/torch.py).
  m.def("serves_cuda", &tdist_torch::serves_cuda,
        "Whether this plugin carries CUDA tensors: the torch it was built against and libtdist both have CUDA.");

  // The GIL is released while the ranks meet: the store may be a Python
  // store, and other Python threads should run while this one waits.
  m.def("create_process_group", &create, py::arg("store"), py::arg("rank"), py::arg("world_size"),
        py::arg("timeout_seconds"), py::arg("global_ranks"),
        py::call_guard<py::gil_scoped_release>(),
        "Joins the group of `world_size` ranks that meet through `store`; returns its ProcessGroupTdist.");
}
