// DeviceMesh and init_device_mesh as torch.distributed.device_mesh: the mesh
// is given and returned as a NumPy array of global ranks.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <sstream>

#include <tdist/device_mesh.h>
#include <tdist/errors.h>

#include "common.h"

namespace tdist_py {

using tdist::DeviceMesh;
using tdist::Group;
using MeshPtr = std::shared_ptr<DeviceMesh>;

namespace {

std::vector<std::string> names_of(const std::optional<std::vector<std::string>>& names) {
  return names.value_or(std::vector<std::string>{});
}

// mesh_dim: None (1-D meshes), an int (negative from the end) or a dimension name.
template <typename ByInt, typename ByName, typename ByNone>
auto by_dim(const py::object& dim, ByInt by_int, ByName by_name, ByNone by_none) {
  if (dim.is_none()) return by_none();
  if (py::isinstance<py::str>(dim)) return by_name(dim.cast<std::string>());
  return by_int(dim.cast<int>());
}

py::object names_tuple(const DeviceMesh& mesh) {
  if (mesh.mesh_dim_names().empty()) return py::none();
  return py::tuple(py::cast(mesh.mesh_dim_names()));
}

}  // namespace

void bind_device_mesh(py::module_& m) {
  // dynamic_attr: python/tdist/device_mesh.py keeps torch's _root_mesh and _flatten_mapping on the objects.
  py::class_<DeviceMesh, MeshPtr>(m, "DeviceMesh", py::dynamic_attr(),
      "The ranks of the world laid out as an n-dimensional array with one process group per dimension "
      "(torch.distributed.device_mesh.DeviceMesh). Every rank constructs the same mesh, in the same order "
      "relative to its other new_group calls.")
      // `with mesh:` as torch's (which makes it the current mesh for DTensor; here it only scopes).
      .def("__enter__", [](const MeshPtr& self) { return self; })
      .def("__exit__", [](const MeshPtr&, py::args) { return false; })
      .def(py::init([](const std::string& device_type, const py::object& mesh,
                       std::optional<std::vector<std::string>> mesh_dim_names) {
             auto arr = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(mesh);
             if (!arr) throw tdist::DistValueError("DeviceMesh: mesh must be an array (or nested list) of ranks");
             std::vector<int64_t> flat(arr.data(), arr.data() + arr.size());
             std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
             auto names = names_of(mesh_dim_names);
             py::gil_scoped_release nogil;  // creates groups: blocks until the other ranks do too
             return std::make_shared<DeviceMesh>(device_type, std::move(flat), std::move(shape), std::move(names));
           }),
           py::arg("device_type"), py::arg("mesh"), py::kw_only(), py::arg("mesh_dim_names") = py::none())
      .def_static("from_group",
                  [](const py::object& group, const std::string& device_type, const py::object& mesh,
                     std::optional<std::vector<std::string>> mesh_dim_names) {
                    auto names = names_of(mesh_dim_names);
                    if (py::isinstance<py::list>(group) || py::isinstance<py::tuple>(group)) {
                      auto groups = group.cast<std::vector<Group>>();
                      if (mesh.is_none()) {
                        throw tdist::DistValueError("DeviceMesh.from_group: a list of groups needs mesh=");
                      }
                      auto arr = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(mesh);
                      if (!arr) throw tdist::DistValueError("DeviceMesh.from_group: mesh must be an array of ranks");
                      std::vector<int64_t> flat(arr.data(), arr.data() + arr.size());
                      std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
                      return std::make_shared<DeviceMesh>(
                          DeviceMesh::from_group(groups, device_type, std::move(flat), std::move(shape), names));
                    }
                    return std::make_shared<DeviceMesh>(DeviceMesh::from_group(group.cast<Group>(), device_type, names));
                  },
                  py::arg("group"), py::arg("device_type"), py::arg("mesh") = py::none(), py::kw_only(),
                  py::arg("mesh_dim_names") = py::none(),
                  "A mesh over existing groups: one group (1-D), or one per dimension with mesh=.")
      .def_property_readonly("device_type", &DeviceMesh::device_type)
      .def_property_readonly("mesh",
                             [](const DeviceMesh& d) {
                               py::array_t<int64_t> a(d.shape());
                               std::copy(d.mesh().begin(), d.mesh().end(), a.mutable_data());
                               return a;
                             },
                             "The global ranks as an int64 array of the mesh's shape.")
      .def_property_readonly("shape", [](const DeviceMesh& d) { return py::tuple(py::cast(d.shape())); })
      .def_property_readonly("ndim", &DeviceMesh::ndim)
      .def_property_readonly("mesh_dim_names", &names_tuple)
      .def("size",
           [](const DeviceMesh& d, const py::object& dim) {
             return dim.is_none() ? d.size() : d.size(dim.cast<int>());
           },
           py::arg("mesh_dim") = py::none(), "The number of ranks, in all or along mesh_dim.")
      .def("get_group",
           [](const DeviceMesh& d, const py::object& dim) {
             return by_dim(dim, [&](int i) { return d.get_group(i); },
                           [&](const std::string& n) { return d.get_group(n); }, [&] { return d.get_group(); });
           },
           py::arg("mesh_dim") = py::none(), "The group of dimension mesh_dim (int or name) through this rank.")
      .def("get_all_groups", &DeviceMesh::get_all_groups, "One group per dimension.")
      .def("get_rank", &DeviceMesh::get_rank, "This process's global rank.")
      .def("get_local_rank",
           [](const DeviceMesh& d, const py::object& dim) {
             return by_dim(dim, [&](int i) { return d.get_local_rank(i); },
                           [&](const std::string& n) { return d.get_local_rank(n); },
                           [&] { return d.get_local_rank(); });
           },
           py::arg("mesh_dim") = py::none(), "This rank's rank in the group of mesh_dim.")
      .def("get_coordinate",
           [](const DeviceMesh& d) -> py::object {
             if (d.get_coordinate().empty()) return py::none();
             return py::cast(std::vector<int64_t>(d.get_coordinate()));
           },
           "This rank's index along every dimension, or None when it is not in the mesh.")
      .def("__getitem__",
           [](const DeviceMesh& d, const py::object& names) {
             if (py::isinstance<py::str>(names)) return std::make_shared<DeviceMesh>(d[names.cast<std::string>()]);
             return std::make_shared<DeviceMesh>(d[names.cast<std::vector<std::string>>()]);
           },
           py::arg("mesh_dim_names"), "The sub-mesh of the named dimension(s) through this rank.")
      .def("__eq__", [](const DeviceMesh& a, const DeviceMesh& b) { return a == b; })
      .def("__hash__", [](const DeviceMesh& d) { return std::hash<std::string>()(d.str()); })
      .def("__repr__", &DeviceMesh::str);

  m.def("init_device_mesh",
        [](const std::string& device_type, const std::vector<int64_t>& mesh_shape,
           std::optional<std::vector<std::string>> mesh_dim_names) {
          auto names = names_of(mesh_dim_names);
          py::gil_scoped_release nogil;
          return tdist::init_device_mesh(device_type, mesh_shape, names);
        },
        py::arg("device_type"), py::arg("mesh_shape"), py::kw_only(), py::arg("mesh_dim_names") = py::none(),
        "Lays ranks 0..prod(mesh_shape)-1 out row-major and creates the groups of every dimension "
        "(initializes the default group from the environment if needed).");
}

}  // namespace tdist_py
