// Point-to-point: send, recv (any source when src is None; returns the
// sender's global rank), isend, irecv, and the core of batch_isend_irecv
// (P2POp itself is in Python). Blocking calls run on the caller's thread with
// the GIL released and Ctrl-C watched (inline_call.h), as the collectives do.
#include <pybind11/stl.h>

#include <tdist/distributed.h>

#include "args.h"
#include "fast_entry.h"
#include "inline_call.h"
#include "tensors.h"
#include "work.h"

namespace tdist_py {

using tdist::Group;

namespace {

Keep keep_of(const TensorArg& t) {
  Keep k;
  k.own(t.owner);
  return k;
}

void py_send(py::handle tensor, std::optional<int> dst, const GroupArg& group, int tag, std::optional<int> group_dst) {
  auto peer = peer_rank(dst, group_dst, "send", "dst", "group_dst", false);
  TensorArg t = to_tensor(tensor, "send: tensor", false);
  if (group.non_member) {
    not_in_group("send");
    return;
  }
  prune_parked();
  InlineCall blocking(group, "send", t.tensor.device(), /*point_to_point=*/true);
  if (blocking.runs_inline()) {
    blocking.run([&] {
      tdist::send(t.tensor, peer, group, tag);
      return 0;
    });
    return;
  }
  // Where that watch cannot be set: isend + wait, in slices so that Ctrl-C ends the wait.
  std::shared_ptr<tdist::Work> work;
  {
    py::gil_scoped_release nogil;
    work = tdist::isend(t.tensor, peer, group, tag);
  }
  const Keep keep = keep_of(t);
  wait_for(work, group, &keep);
}

int py_recv(py::handle tensor, std::optional<int> src, const GroupArg& group, int tag, std::optional<int> group_src) {
  auto peer = peer_rank(src, group_src, "recv", "src", "group_src", true);
  TensorArg t = to_tensor(tensor, "recv: tensor", true);
  if (group.non_member) {
    not_in_group("recv");
    return -1;  // as torch
  }
  prune_parked();
  InlineCall blocking(group, "recv", t.tensor.device(), /*point_to_point=*/true);
  if (blocking.runs_inline())  // tdist::recv returns the sender's global rank
    return blocking.run([&] { return tdist::recv(t.tensor, peer, group, tag); });
  std::shared_ptr<tdist::Work> work;
  {
    py::gil_scoped_release nogil;
    work = tdist::irecv(t.tensor, peer, group, tag);
  }
  const Keep keep = keep_of(t);
  wait_for(work, group, &keep);
  const tdist::Group g = group.group ? group.group : tdist::group_world();
  return g->global_rank(work->source_rank());
}

// isend (`send`) or irecv: starts the transfer and returns its Work, which keeps the array.
py::object start_p2p(bool send, py::handle tensor, std::optional<int> rank, const GroupArg& group, int tag,
                     std::optional<int> group_rank) {
  const char* op = send ? "isend" : "irecv";
  auto peer = peer_rank(rank, group_rank, op, send ? "dst" : "src", send ? "group_dst" : "group_src", !send);
  TensorArg t = to_tensor(tensor, send ? "isend: tensor" : "irecv: tensor", /*writable=*/!send);
  if (group.non_member) return not_in_group(op);
  std::shared_ptr<tdist::Work> work;
  {
    py::gil_scoped_release nogil;
    work = send ? tdist::isend(t.tensor, peer, group, tag) : tdist::irecv(t.tensor, peer, group, tag);
  }
  return finish(std::move(work), true, keep_of(t), group);
}

py::object py_isend(py::handle tensor, std::optional<int> dst, const GroupArg& group, int tag,
                    std::optional<int> group_dst) {
  return start_p2p(true, tensor, dst, group, tag, group_dst);
}

py::object py_irecv(py::handle tensor, std::optional<int> src, const GroupArg& group, int tag,
                    std::optional<int> group_src) {
  return start_p2p(false, tensor, src, group, tag, group_src);
}

}  // namespace

void bind_p2p(py::module_& m) {
  m.def("send",
        &py_send,
        py::arg("tensor"), py::arg("dst") = py::none(), py::arg("group") = py::none(), py::arg("tag") = 0,
        py::arg("group_dst") = py::none(),
        "Sends tensor to global rank dst (or group_dst, a rank in group); blocks until it is sent.");

  m.def("recv",
        &py_recv,
        py::arg("tensor"), py::arg("src") = py::none(), py::arg("group") = py::none(), py::arg("tag") = 0,
        py::arg("group_src") = py::none(),
        "Receives into tensor from global rank src (None: any rank); blocks (GIL released) until it has "
        "arrived and returns the sender's global rank.");

  m.def("isend",
        &py_isend,
        py::arg("tensor"), py::arg("dst") = py::none(), py::arg("group") = py::none(), py::arg("tag") = 0,
        py::arg("group_dst") = py::none(),
        "Starts sending tensor to dst and returns a Work; do not modify tensor before work.wait().");

  m.def("irecv",
        &py_irecv,
        py::arg("tensor"), py::arg("src") = py::none(), py::arg("group") = py::none(), py::arg("tag") = 0,
        py::arg("group_src") = py::none(),
        "Starts receiving into tensor from src (None: any rank) and returns a Work; read tensor only after "
        "work.wait(). work.source_rank() tells the sender (group rank).");

  // ops: (is_send, tensor, peer, peer_is_group_rank, group, tag) tuples, built by tdist.batch_isend_irecv.
  m.def("_batch_isend_irecv", [](const py::list& ops) {
    std::vector<tdist::P2POp> cpp;
    std::vector<TensorArg> args;
    size_t i = 0;
    for (py::handle h : ops) {
      auto op = h.cast<py::tuple>();
      bool is_send = op[0].cast<bool>();
      std::string what = "batch_isend_irecv: p2p_op_list[" + std::to_string(i++) + "].tensor";
      TensorArg t = to_tensor(op[1], what, !is_send);
      auto group = op[4].cast<GroupArg>();
      // As torch's isend/irecv there: an operation on a group this rank is
      // not in does nothing and has no Work in the list.
      if (group.non_member) {
        not_in_group(is_send ? "isend" : "irecv");
        continue;
      }
      args.push_back(std::move(t));
      tdist::PeerRank peer(op[2].cast<int>(), op[3].cast<bool>());
      cpp.emplace_back(is_send ? tdist::P2POp::ISEND : tdist::P2POp::IRECV, args.back().tensor, peer, group.group,
                       op[5].cast<int>());
    }
    std::vector<std::shared_ptr<tdist::Work>> works;
    {
      py::gil_scoped_release nogil;
      works = tdist::batch_isend_irecv(cpp);
    }
    py::list out;
    for (size_t k = 0; k < works.size(); ++k) out.append(finish(works[k], true, keep_of(args[k]), cpp[k].group));
    return out;
  });
  // Past pybind11's dispatcher where the arguments have the common shapes (fast_entry.h).
  struct Peer {  // tensor, dst/src, group, tag, group_dst/group_src
    std::optional<int> peer, group_peer;
    GroupArg group;
    int tag = 0;
    bool load(const FastArgs& a) {
      return a.values[0] != nullptr && fast_optional_int(a.values[1], peer) && fast_group(a.values[2], group) &&
             fast_int(a.values[3], tag) && fast_optional_int(a.values[4], group_peer);
    }
  };
  speed_up(m, "send", {"tensor", "dst", "group", "tag", "group_dst"}, [](const FastArgs& a) -> PyObject* {
    Peer p;
    if (!p.load(a)) return nullptr;
    py_send(a.values[0], p.peer, p.group, p.tag, p.group_peer);
    return give(py::none());
  });
  speed_up(m, "recv", {"tensor", "src", "group", "tag", "group_src"}, [](const FastArgs& a) -> PyObject* {
    Peer p;
    if (!p.load(a)) return nullptr;
    return PyLong_FromLong(py_recv(a.values[0], p.peer, p.group, p.tag, p.group_peer));
  });
  speed_up(m, "isend", {"tensor", "dst", "group", "tag", "group_dst"}, [](const FastArgs& a) -> PyObject* {
    Peer p;
    if (!p.load(a)) return nullptr;
    return give(py_isend(a.values[0], p.peer, p.group, p.tag, p.group_peer));
  });
  speed_up(m, "irecv", {"tensor", "src", "group", "tag", "group_src"}, [](const FastArgs& a) -> PyObject* {
    Peer p;
    if (!p.load(a)) return nullptr;
    return give(py_irecv(a.values[0], p.peer, p.group, p.tag, p.group_peer));
  });
}

}  // namespace tdist_py
