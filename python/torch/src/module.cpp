// The Python extension tdist._tdist_torch: the ProcessGroupTdist type and the
// factory that tdist/torch.py registers with torch.distributed as backend "tdist".
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tdist/distributed.h"

#include "../../ext/interruptible_wait.h"
#include "process_group_tdist.h"

namespace py = pybind11;

namespace {

// The name tdist's C++ API gives the same group, so that errors read alike
// whichever API made it: "default_pg" for torch's default group (the one made
// without a member list), else "group(0,2)#k" for the k-th group of those
// members (torch's own names are a count, "0", "1", ...).
std::string group_name_for(const std::vector<int>& global_ranks) {
  static std::mutex mu;
  static auto* counts = new std::map<std::vector<int>, int>();  // never destroyed: may outlive the interpreter
  std::lock_guard<std::mutex> lock(mu);
  if (global_ranks.empty()) {
    counts->clear();  // a new default group: counting starts again, as in C++
    return "default_pg";
  }
  std::vector<int> members = global_ranks;
  std::sort(members.begin(), members.end());
  return tdist::new_group_name(members, (*counts)[members]++);
}

c10::intrusive_ptr<tdist_torch::ProcessGroupTdist> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, double timeout_seconds,
                                                          std::vector<int> global_ranks) {
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000.0));
  std::string name = group_name_for(global_ranks);
  return c10::make_intrusive<tdist_torch::ProcessGroupTdist>(store, rank, size, timeout, std::move(name),
                                                             std::move(global_ranks));
}

}  // namespace

PYBIND11_MODULE(_tdist_torch, m) {
  m.doc() = "tdist as a torch.distributed backend (import tdist.torch to register it)";
  // torch's bindings of c10d::ProcessGroup and Store must be loaded first: the
  // class below derives from the former, and create() takes the latter.
  py::module_::import("torch.distributed");
  // Waits check for Ctrl-C on this thread only (python/ext/interruptible_wait.h).
  tdist_py::remember_main_thread();

  py::class_<tdist_torch::ProcessGroupTdist, c10::intrusive_ptr<tdist_torch::ProcessGroupTdist>, c10d::ProcessGroup>(
      m, "ProcessGroupTdist", "A torch.distributed process group whose operations run on the tdist library")
      .def_property_readonly("group_name", &tdist_torch::ProcessGroupTdist::groupName);

  // The GIL is released while the ranks meet: the store may be a Python
  // store, and other Python threads should run while this one waits.
  m.def("create_process_group", &create, py::arg("store"), py::arg("rank"), py::arg("world_size"),
        py::arg("timeout_seconds"), py::arg("global_ranks"),
        py::call_guard<py::gil_scoped_release>(),
        "Joins the group of `world_size` ranks that meet through `store`; returns its ProcessGroupTdist.");
}
