// The byte-string cores of the object collectives. tdist.broadcast_object_list
// and friends (python/tdist/objects.py) pickle in Python and move the bytes
// with these; the C++ sends each rank's sizes first, then the bytes.
#include <pybind11/stl.h>

#include <tdist/distributed.h>

#include "args.h"
#include "common.h"

namespace tdist_py {

using tdist::Group;

namespace {

std::vector<std::string> strings(const py::list& l) {
  std::vector<std::string> out;
  for (py::handle h : l) out.push_back(h.cast<std::string>());
  return out;
}

py::list bytes_list(const std::vector<std::string>& v) {
  py::list out;
  for (const auto& s : v) out.append(py::bytes(s));
  return out;
}

}  // namespace

void bind_objects(py::module_& m) {
  m.def("_broadcast_bytes",
        [](const py::list& objects, std::optional<int> src, std::optional<int> group_src, const GroupArg& group) {
          auto root = peer_rank(src, group_src, "broadcast_object_list", "src", "group_src", false);
          std::vector<std::string> v = strings(objects);
          {
            py::gil_scoped_release nogil;
            tdist::broadcast_object_list(v, root, group);
          }
          return bytes_list(v);
        });
  m.def("_all_gather_bytes", [](const py::bytes& obj, const GroupArg& group) {
    std::string o = obj;
    std::vector<std::string> v;
    {
      py::gil_scoped_release nogil;
      tdist::all_gather_object(v, o, group);
    }
    return bytes_list(v);
  });
  m.def("_gather_bytes",
        [](const py::bytes& obj, bool is_dst, std::optional<int> dst, std::optional<int> group_dst,
           const GroupArg& group) -> py::object {
          auto root = peer_rank(dst, group_dst, "gather_object", "dst", "group_dst", false);
          std::string o = obj;
          std::vector<std::string> v;
          {
            py::gil_scoped_release nogil;
            tdist::gather_object(o, is_dst ? &v : nullptr, root, group);
          }
          if (!is_dst) return py::none();
          return bytes_list(v);
        });
  m.def("_scatter_bytes",
        [](const py::object& inputs, std::optional<int> src, std::optional<int> group_src, const GroupArg& group) {
          auto root = peer_rank(src, group_src, "scatter_object_list", "src", "group_src", false);
          std::vector<std::string> in = inputs.is_none() ? std::vector<std::string>{} : strings(inputs);
          std::vector<std::string> out(1);
          {
            py::gil_scoped_release nogil;
            tdist::scatter_object_list(out, in, root, group);
          }
          return py::bytes(out.at(0));
        });
  m.def("_send_bytes",
        [](const py::list& objects, std::optional<int> dst, std::optional<int> group_dst, const GroupArg& group) {
          auto peer = peer_rank(dst, group_dst, "send_object_list", "dst", "group_dst", false);
          std::vector<std::string> v = strings(objects);
          py::gil_scoped_release nogil;
          tdist::send_object_list(v, peer, group);
        });
  m.def("_recv_bytes", [](size_t count, std::optional<int> src, std::optional<int> group_src, const GroupArg& group) {
    auto peer = peer_rank(src, group_src, "recv_object_list", "src", "group_src", true);
    std::vector<std::string> v(count);
    int sender;
    {
      py::gil_scoped_release nogil;
      sender = tdist::recv_object_list(v, peer, group);
    }
    return py::make_tuple(bytes_list(v), sender);
  });
}

}  // namespace tdist_py
