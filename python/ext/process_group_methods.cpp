// The methods of torch's ProcessGroup objects on tdist.ProcessGroup: the
// operations (pg.allreduce([t]) ... returning a Work, with torch's argument
// forms: a tensor or a list of one, an options object with torch's field
// names or the keywords), set_timeout, abort, shutdown, group_desc,
// bound_device_id and get_group_store. Ranks here are group ranks, as torch's.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <tdist/distributed.h>
#include <tdist/errors.h>

#include "args.h"
#include "tensors.h"
#include "work.h"

namespace tdist_py {
namespace {

using tdist::ProcessGroup;
using ms = std::chrono::milliseconds;
using PG = std::shared_ptr<ProcessGroup>;

// The arrays of one call, kept alive while it runs, and its outputs (the future's value).
struct Call {
  Keep keep;
  tdist::Tensor one(py::handle obj, const std::string& what, bool writable, bool output) {
    // torch's ProcessGroup methods take a list of tensors (one per device: one here).
    if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
      auto seq = py::reinterpret_borrow<py::sequence>(obj);
      if (seq.size() != 1)
        throw tdist::DistValueError(what + ": expected one tensor (or a list of one), got a list of " +
                                    std::to_string(seq.size()));
      return one(seq[0], what + "[0]", writable, output);
    }
    TensorArg t = to_tensor(obj, what, writable);
    keep.own(t.owner);
    if (output) keep.output(obj);
    return t.tensor;
  }
  std::vector<tdist::Tensor> list(py::handle seq, const std::string& what, bool writable, bool output) {
    std::vector<TensorArg> ts = to_tensors(seq, what, writable);
    for (const auto& t : ts) keep.own(t.owner);
    if (output) keep.output(seq);
    return views(ts);
  }
  // torch's list of lists (one list per device): one list here.
  std::vector<tdist::Tensor> nested(py::handle seq, const std::string& what, bool writable, bool output) {
    auto outer = py::reinterpret_borrow<py::sequence>(seq);
    if (outer.size() == 0) return {};
    if (outer.size() != 1)
      throw tdist::DistValueError(what + ": expected a list of one list of tensors, got " +
                                  std::to_string(outer.size()) + " lists");
    return list(outer[0], what + "[0]", writable, output);
  }
};

// A field of torch's options object (AllreduceOptions.reduceOp, ...), else the keyword's value.
template <typename T>
T field(py::handle opts, const char* name, T keyword) {
  if (opts.is_none() || !py::hasattr(opts, name)) return keyword;
  return opts.attr(name).cast<T>();
}

ms call_timeout(py::handle opts, py::handle timeout, const char* what) {
  py::object t = py::reinterpret_borrow<py::object>(timeout);
  if (!opts.is_none() && py::hasattr(opts, "timeout")) t = opts.attr("timeout");
  return to_timeout(t, what).value_or(tdist::kGroupTimeout);
}

// Runs `start` (GIL released) and returns its Work for Python.
template <typename Start>
py::object issue(const PG& self, Call& c, Start start) {
  std::shared_ptr<tdist::Work> w;
  {
    py::gil_scoped_release nogil;
    w = start();
  }
  return finish(std::move(w), true, std::move(c.keep), self);
}

}  // namespace

void bind_process_group_methods(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<ProcessGroup, PG>>(m.attr("ProcessGroup"));
  const auto none = py::none();
  const auto sum = tdist::ReduceOp(tdist::ReduceOp::SUM);

  cls.def("allreduce",
          [](const PG& self, py::handle tensors, py::handle opts, const tdist::ReduceOp& op, py::handle timeout) {
            Call c;
            auto t = c.one(tensors, "ProcessGroup.allreduce: tensors", true, true);
            tdist::AllReduceOptions o{field(opts, "reduceOp", op), call_timeout(opts, timeout, "allreduce")};
            return issue(self, c, [&] { return self->all_reduce(t, o); });
          },
          py::arg("tensors"), py::arg("opts") = none, py::arg("op") = sum, py::arg("timeout") = none,
          "torch's ProcessGroup.allreduce: the tensor (or a list of one) reduced in place; returns a Work.");
  cls.def("allreduce_coalesced",
          [](const PG& self, py::handle tensors, py::handle opts, py::handle timeout) {
            Call c;
            auto ts = c.list(tensors, "ProcessGroup.allreduce_coalesced: tensors", true, true);
            tdist::AllReduceCoalescedOptions o{field(opts, "reduceOp", tdist::ReduceOp(tdist::ReduceOp::SUM)),
                                               call_timeout(opts, timeout, "allreduce_coalesced")};
            return issue(self, c, [&] { return self->all_reduce_coalesced(ts, o); });
          },
          py::arg("tensors"), py::arg("opts") = none, py::arg("timeout") = none);
  cls.def("broadcast",
          [](const PG& self, py::handle tensors, py::handle opts_or_root, py::handle timeout) {
            Call c;
            auto t = c.one(tensors, "ProcessGroup.broadcast: tensors", true, true);
            // torch's two forms: broadcast([t], opts) and broadcast(t, root, timeout).
            const bool is_root = PyLong_Check(opts_or_root.ptr());
            py::handle opts = is_root ? py::handle(py::none()) : opts_or_root;
            int root = is_root ? opts_or_root.cast<int>() : field(opts, "rootRank", 0);
            tdist::BroadcastOptions o{root, call_timeout(opts, timeout, "broadcast")};
            return issue(self, c, [&] { return self->broadcast(t, o); });
          },
          py::arg("tensors"), py::arg("opts") = none, py::arg("timeout") = none,
          "torch's ProcessGroup.broadcast(tensors, opts) or broadcast(tensor, root, timeout): root is a group rank.");
  cls.def("reduce",
          [](const PG& self, py::handle tensors, py::handle opts_or_root, const tdist::ReduceOp& op,
             py::handle timeout) {
            Call c;
            auto t = c.one(tensors, "ProcessGroup.reduce: tensors", true, true);
            const bool is_root = PyLong_Check(opts_or_root.ptr());
            py::handle opts = is_root ? py::handle(py::none()) : opts_or_root;
            tdist::ReduceOptions o{is_root ? opts_or_root.cast<int>() : field(opts, "rootRank", 0),
                                   field(opts, "reduceOp", op), call_timeout(opts, timeout, "reduce")};
            return issue(self, c, [&] { return self->reduce(t, o); });
          },
          py::arg("tensors"), py::arg("opts") = none, py::arg("op") = sum, py::arg("timeout") = none);
  cls.def("allgather",
          [](const PG& self, py::handle output_tensors, py::handle input_tensors, py::handle opts,
             py::handle timeout) {
            Call c;
            // allgather([[out...]], [in], opts) or allgather([out...], in, timeout).
            auto seq = py::reinterpret_borrow<py::sequence>(output_tensors);
            const bool nested = seq.size() > 0 && (py::isinstance<py::list>(seq[0]) || py::isinstance<py::tuple>(seq[0]));
            auto outs = nested ? c.nested(output_tensors, "ProcessGroup.allgather: output_tensors", true, true)
                               : c.list(output_tensors, "ProcessGroup.allgather: output_tensors", true, true);
            auto in = c.one(input_tensors, "ProcessGroup.allgather: input_tensors", false, false);
            tdist::AllGatherOptions o{call_timeout(opts, timeout, "allgather")};
            return issue(self, c, [&] { return self->all_gather(outs, in, o); });
          },
          py::arg("output_tensors"), py::arg("input_tensors"), py::arg("opts") = none, py::arg("timeout") = none);
  cls.def("_allgather_base",
          [](const PG& self, py::handle output, py::handle input, py::handle opts) {
            Call c;
            auto out = c.one(output, "ProcessGroup._allgather_base: output", true, true);
            auto in = c.one(input, "ProcessGroup._allgather_base: input", false, false);
            tdist::AllGatherOptions o{call_timeout(opts, py::none(), "_allgather_base")};
            return issue(self, c, [&] { return self->all_gather_into_tensor(out, in, o); });
          },
          py::arg("output"), py::arg("input"), py::arg("opts") = none);
  cls.def("gather",
          [](const PG& self, py::handle output_tensors, py::handle input_tensors, py::handle opts_or_root,
             py::handle timeout) {
            Call c;
            const bool is_root = PyLong_Check(opts_or_root.ptr());
            py::handle opts = is_root ? py::handle(py::none()) : opts_or_root;
            const int root = is_root ? opts_or_root.cast<int>() : field(opts, "rootRank", 0);
            auto seq = py::reinterpret_borrow<py::sequence>(output_tensors);
            const bool nested = seq.size() > 0 && (py::isinstance<py::list>(seq[0]) || py::isinstance<py::tuple>(seq[0]));
            auto outs = nested ? c.nested(output_tensors, "ProcessGroup.gather: output_tensors", true, true)
                               : c.list(output_tensors, "ProcessGroup.gather: output_tensors", true, true);
            auto in = c.one(input_tensors, "ProcessGroup.gather: input_tensors", false, false);
            tdist::GatherOptions o{root, call_timeout(opts, timeout, "gather")};
            return issue(self, c, [&] { return self->gather(outs, in, o); });
          },
          py::arg("output_tensors"), py::arg("input_tensors"), py::arg("opts") = none, py::arg("timeout") = none);
  cls.def("scatter",
          [](const PG& self, py::handle output_tensors, py::handle input_tensors, py::handle opts_or_root,
             py::handle timeout) {
            Call c;
            const bool is_root = PyLong_Check(opts_or_root.ptr());
            py::handle opts = is_root ? py::handle(py::none()) : opts_or_root;
            const int root = is_root ? opts_or_root.cast<int>() : field(opts, "rootRank", 0);
            auto out = c.one(output_tensors, "ProcessGroup.scatter: output_tensors", true, true);
            auto seq = py::reinterpret_borrow<py::sequence>(input_tensors);
            const bool nested = seq.size() > 0 && (py::isinstance<py::list>(seq[0]) || py::isinstance<py::tuple>(seq[0]));
            auto ins = nested ? c.nested(input_tensors, "ProcessGroup.scatter: input_tensors", false, false)
                              : c.list(input_tensors, "ProcessGroup.scatter: input_tensors", false, false);
            tdist::ScatterOptions o{root, call_timeout(opts, timeout, "scatter")};
            return issue(self, c, [&] { return self->scatter(out, ins, o); });
          },
          py::arg("output_tensors"), py::arg("input_tensors"), py::arg("opts") = none, py::arg("timeout") = none);
  cls.def("reduce_scatter",
          [](const PG& self, py::handle output_tensors, py::handle input_tensors, py::handle opts,
             const tdist::ReduceOp& op, py::handle timeout) {
            Call c;
            auto out = c.one(output_tensors, "ProcessGroup.reduce_scatter: output_tensors", true, true);
            auto seq = py::reinterpret_borrow<py::sequence>(input_tensors);
            const bool nested = seq.size() > 0 && (py::isinstance<py::list>(seq[0]) || py::isinstance<py::tuple>(seq[0]));
            auto ins = nested ? c.nested(input_tensors, "ProcessGroup.reduce_scatter: input_tensors", false, false)
                              : c.list(input_tensors, "ProcessGroup.reduce_scatter: input_tensors", false, false);
            tdist::ReduceScatterOptions o{field(opts, "reduceOp", op), call_timeout(opts, timeout, "reduce_scatter")};
            return issue(self, c, [&] { return self->reduce_scatter(out, ins, o); });
          },
          py::arg("output_tensors"), py::arg("input_tensors"), py::arg("opts") = none, py::arg("op") = sum,
          py::arg("timeout") = none);
  cls.def("_reduce_scatter_base",
          [](const PG& self, py::handle output, py::handle input, py::handle opts) {
            Call c;
            auto out = c.one(output, "ProcessGroup._reduce_scatter_base: output", true, true);
            auto in = c.one(input, "ProcessGroup._reduce_scatter_base: input", false, false);
            tdist::ReduceScatterOptions o{field(opts, "reduceOp", tdist::ReduceOp(tdist::ReduceOp::SUM)),
                                          call_timeout(opts, py::none(), "_reduce_scatter_base")};
            return issue(self, c, [&] { return self->reduce_scatter_tensor(out, in, o); });
          },
          py::arg("output"), py::arg("input"), py::arg("opts") = none);
  cls.def("alltoall",
          [](const PG& self, py::handle output_tensors, py::handle input_tensors, py::handle opts,
             py::handle timeout) {
            Call c;
            auto outs = c.list(output_tensors, "ProcessGroup.alltoall: output_tensors", true, true);
            auto ins = c.list(input_tensors, "ProcessGroup.alltoall: input_tensors", false, false);
            tdist::AllToAllOptions o{.timeout = call_timeout(opts, timeout, "alltoall")};
            return issue(self, c, [&] { return self->all_to_all(outs, ins, o); });
          },
          py::arg("output_tensors"), py::arg("input_tensors"), py::arg("opts") = none, py::arg("timeout") = none);
  cls.def("alltoall_base",
          [](const PG& self, py::handle output, py::handle input, std::vector<int64_t> output_split_sizes,
             std::vector<int64_t> input_split_sizes, py::handle opts, py::handle timeout) {
            Call c;
            auto out = c.one(output, "ProcessGroup.alltoall_base: output", true, true);
            auto in = c.one(input, "ProcessGroup.alltoall_base: input", false, false);
            tdist::AllToAllOptions o{std::move(output_split_sizes), std::move(input_split_sizes),
                                     call_timeout(opts, timeout, "alltoall_base")};
            return issue(self, c, [&] { return self->all_to_all_single(out, in, o); });
          },
          py::arg("output"), py::arg("input"), py::arg("output_split_sizes"), py::arg("input_split_sizes"),
          py::arg("opts") = none, py::arg("timeout") = none);
  cls.def("barrier",
          [](const PG& self, py::handle opts, py::handle timeout) {
            Call c;
            tdist::BarrierOptions o{call_timeout(opts, timeout, "barrier")};
            return issue(self, c, [&] { return self->barrier(o); });
          },
          py::arg("opts") = none, py::arg("timeout") = none);
  cls.def("send",
          [](const PG& self, py::handle tensors, int dst_rank, int tag) {
            Call c;
            auto t = c.one(tensors, "ProcessGroup.send: tensors", false, false);
            return issue(self, c, [&] { return self->send(t, dst_rank, tdist::SendOptions{tag}); });
          },
          py::arg("tensors"), py::arg("dstRank"), py::arg("tag") = 0, "Sends to group rank dstRank; returns a Work.");
  cls.def("recv",
          [](const PG& self, py::handle tensors, int src_rank, int tag) {
            Call c;
            auto t = c.one(tensors, "ProcessGroup.recv: tensors", true, true);
            return issue(self, c, [&] { return self->recv(t, src_rank, tdist::RecvOptions{tag}); });
          },
          py::arg("tensors"), py::arg("srcRank"), py::arg("tag") = 0,
          "Receives from group rank srcRank; returns a Work.");
  cls.def("recv_anysource",
          [](const PG& self, py::handle tensors, int tag) {
            Call c;
            auto t = c.one(tensors, "ProcessGroup.recv_anysource: tensors", true, true);
            return issue(self, c, [&] { return self->recv(t, tdist::kAnySource, tdist::RecvOptions{tag}); });
          },
          py::arg("tensors"), py::arg("tag") = 0, "Receives from any rank; the Work's _source_rank() says which.");

  cls.def("set_timeout",
          [](ProcessGroup& self, py::handle timeout) {
            auto t = to_timeout(timeout, "ProcessGroup.set_timeout");
            if (!t) throw tdist::DistValueError("ProcessGroup.set_timeout: timeout must be a timedelta or seconds, not None");
            self.set_timeout(*t);
          },
          py::arg("timeout"),
          "Operations issued afterwards without a timeout of their own use this one (torch's set_timeout).");
  cls.def("abort",
          [](ProcessGroup& self) {
            // "rank 2 in group trainers: aborted (ProcessGroup.abort())": the members' errors quote it.
            const int global = self.global_ranks().empty() || self.rank() < 0 ? self.rank()
                                                                               : self.global_ranks()[self.rank()];
            auto cause = std::make_exception_ptr(tdist::DistBackendError(
                "rank " + std::to_string(global) + " in group " + self.group_name() + ": aborted (ProcessGroup.abort())"));
            py::gil_scoped_release nogil;
            self.abort(cause);
          },
          "Fails the group: what is under way ends with an error, later operations fail at once (torch's abort).");
  cls.def("shutdown",
          [](ProcessGroup& self) {
            py::gil_scoped_release nogil;
            self.shutdown();
          },
          "Shuts the group's backends down: pending and later operations fail (torch's shutdown).");
  cls.def_property_readonly("group_desc", &ProcessGroup::group_desc,
                            "torch's group_desc: \"default_pg\", new_group's group_desc, else \"undefined\".");
  cls.def_property_readonly("bound_device_id",
                            [](const ProcessGroup& self) -> py::object {
                              if (!self.device_id()) return py::none();
                              return py::str(self.device_id()->str());
                            },
                            "The device given as device_id (\"cuda:0\"), or None (torch's bound_device_id).");
  cls.def("get_group_store", &ProcessGroup::store,
          "The group's store (its namespace in the job's store); None for a non-member handle.");
}

}  // namespace tdist_py
