// The collectives with torch's names, argument order and keywords. Each one
// converts its arrays (in place, no copies), starts the C++ operation and
// either returns a Work (async_op=True) or waits for it with the GIL released.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <tdist/distributed.h>
#include <tdist/errors.h>

#include "args.h"
#include "fast_entry.h"
#include "inline_call.h"
#include "tensors.h"
#include "work.h"

namespace tdist_py {

using tdist::Group;
using tdist::ReduceOp;
using ms = std::chrono::milliseconds;

namespace {

// Collects the arrays an operation uses (kept alive) and its outputs (the future's value).
struct Args {
  Keep keep;
  TensorArg one(py::handle obj, std::string_view what, bool writable, bool output) {
    TensorArg t = to_tensor(obj, what, writable);
    keep.own(t.owner);
    if (output) keep.output(obj);
    return t;
  }
  std::vector<tdist::Tensor> list(py::handle seq, std::string_view what, bool writable, bool output) {
    std::vector<TensorArg> ts = to_tensors(seq, what, writable);
    for (const auto& t : ts) keep.own(t.owner);
    if (output && !seq.is_none()) keep.output(seq);
    return views(ts);
  }
};

// The root of gather/scatter: torch's default is global rank 0.
tdist::PeerRank root_or_zero(std::optional<int> global, std::optional<int> in_group, const std::string& op,
                             const char* global_name, const char* group_name) {
  if (!global && !in_group) return tdist::PeerRank(0);
  return peer_rank(global, in_group, op, global_name, group_name, false);
}

std::vector<int64_t> splits(const std::optional<std::vector<int64_t>>& s) { return s.value_or(std::vector<int64_t>{}); }

// The operation `call(async_op)` issues, for Python: a blocking call runs it
// on this thread and returns None once it is over (inline_call.h), or, where
// that cannot keep Ctrl-C working, waits for it in slices; with async_op its
// Work. `device`: of its tensors, for the number in an interrupted call's message.
template <typename Call>
py::object issue(const char* op, tdist::Device device, bool async_op, Keep keep, const GroupArg& group, Call&& call) {
  if (!async_op) {
    InlineCall blocking(group, op, device);
    if (blocking.runs_inline()) {
      prune_parked();
      blocking.run([&] { return call(false); });
      return py::none();
    }
  }
  std::shared_ptr<tdist::Work> w;
  {
    py::gil_scoped_release nogil;
    w = call(true);
  }
  return finish(std::move(w), async_op, std::move(keep), group);
}

py::object py_broadcast(py::handle tensor, std::optional<int> src, const GroupArg& group, bool async_op,
                        std::optional<int> group_src) {
  auto root = peer_rank(src, group_src, "broadcast", "src", "group_src", false);
  Args a;
  auto t = a.one(tensor, "broadcast: tensor", true, true);
  if (group.non_member) return not_in_group("broadcast");
  return issue("broadcast", t.tensor.device(), async_op, std::move(a.keep), group,
               [&](bool async) { return tdist::broadcast(t.tensor, root, group, async); });
}

py::object py_all_reduce(py::handle tensor, const ReduceOp& op, const GroupArg& group, bool async_op) {
  Args a;
  auto t = a.one(tensor, "all_reduce: tensor", true, true);
  if (group.non_member) return not_in_group("all_reduce");
  return issue("all_reduce", t.tensor.device(), async_op, std::move(a.keep), group,
               [&](bool async) { return tdist::all_reduce(t.tensor, op, group, async); });
}

py::object py_reduce(py::handle tensor, std::optional<int> dst, const ReduceOp& op, const GroupArg& group,
                     bool async_op, std::optional<int> group_dst) {
  auto root = peer_rank(dst, group_dst, "reduce", "dst", "group_dst", false);
  Args a;
  auto t = a.one(tensor, "reduce: tensor", true, true);
  if (group.non_member) return not_in_group("reduce");
  return issue("reduce", t.tensor.device(), async_op, std::move(a.keep), group,
               [&](bool async) { return tdist::reduce(t.tensor, root, op, group, async); });
}

py::object py_all_gather_into_tensor(py::handle output_tensor, py::handle input_tensor, const GroupArg& group,
                                     bool async_op) {
  Args a;
  auto out = a.one(output_tensor, "all_gather_into_tensor: output_tensor", true, true);
  auto in = a.one(input_tensor, "all_gather_into_tensor: input_tensor", false, false);
  if (group.non_member) return not_in_group("all_gather_into_tensor");
  return issue("all_gather_into_tensor", in.tensor.device(), async_op, std::move(a.keep), group,
               [&](bool async) { return tdist::all_gather_into_tensor(out.tensor, in.tensor, group, async); });
}

py::object py_reduce_scatter_tensor(py::handle output, py::handle input, const ReduceOp& op, const GroupArg& group,
                                    bool async_op) {
  Args a;
  auto out = a.one(output, "reduce_scatter_tensor: output", true, true);
  auto in = a.one(input, "reduce_scatter_tensor: input", false, false);
  if (group.non_member) return not_in_group("reduce_scatter_tensor");
  return issue("reduce_scatter_tensor", in.tensor.device(), async_op, std::move(a.keep), group,
               [&](bool async) { return tdist::reduce_scatter_tensor(out.tensor, in.tensor, op, group, async); });
}

}  // namespace

void bind_collectives(py::module_& m) {
  m.def("broadcast",
        &py_broadcast,
        py::arg("tensor"), py::arg("src") = py::none(), py::arg("group") = py::none(), py::arg("async_op") = false,
        py::arg("group_src") = py::none(),
        "Copies tensor of global rank src (or group_src) into tensor on every rank of group.");

  m.def("all_reduce",
        &py_all_reduce,
        py::arg("tensor"), py::arg("op") = ReduceOp(ReduceOp::SUM), py::arg("group") = py::none(),
        py::arg("async_op") = false,
        "Reduces tensor over every rank of group with op; every rank gets the result in tensor.");

  m.def("all_reduce_coalesced",
        [](py::handle tensors, const ReduceOp& op, const GroupArg& group, bool async_op) {
          // torch takes one tensor or a list; the future's value lists every tensor.
          const bool one = !py::isinstance<py::list>(tensors) && !py::isinstance<py::tuple>(tensors);
          std::vector<TensorArg> args;
          if (one)
            args.push_back(to_tensor(tensors, "all_reduce_coalesced: tensors", true));
          else
            args = to_tensors(tensors, "all_reduce_coalesced: tensors", true);
          Keep keep;
          std::vector<tdist::Tensor> ts;
          for (auto& t : args) {
            keep.own(t.owner);
            ts.push_back(t.tensor);
          }
          if (one)
            keep.output(tensors);
          else
            for (py::handle item : tensors) keep.output(item);
          if (group.non_member) {
            // torch checks the dtypes before it looks at the group.
            for (size_t i = 1; i < ts.size(); ++i)
              if (ts[i].dtype() != ts[0].dtype())
                throw tdist::DistValueError("all_reduce_coalesced: tensors[" + std::to_string(i) + "] is " +
                                            ts[i].str() + " and tensors[0] " + ts[0].str() +
                                            ": the tensors must all have the same dtype");
            return not_in_group("all_reduce_coalesced");
          }
          std::shared_ptr<tdist::Work> w;
          {
            py::gil_scoped_release nogil;
            w = tdist::all_reduce_coalesced(ts, op, group, true);
          }
          // As torch: with async_op the Work's future (its value: the tensors), not the Work.
          py::object r = finish(std::move(w), async_op, std::move(keep), group);
          return async_op ? r.attr("get_future")() : r;
        },
        py::arg("tensors"), py::arg("op") = ReduceOp(ReduceOp::SUM), py::arg("group") = py::none(),
        py::arg("async_op") = false,
        "Reduces every tensor of the list (or the one tensor) in place over group with op, as one "
        "operation: with async_op (as torch) the future of its one Work, done once all are reduced. The "
        "tensors share a dtype (DistValueError otherwise) and may differ in size.");

  m.def("reduce",
        &py_reduce,
        py::arg("tensor"), py::arg("dst") = py::none(), py::arg("op") = ReduceOp(ReduceOp::SUM),
        py::arg("group") = py::none(), py::arg("async_op") = false, py::arg("group_dst") = py::none(),
        "Reduces tensor over group with op; only rank dst gets the result (in tensor).");

  m.def("all_gather",
        [](py::handle tensor_list, py::handle tensor, const GroupArg& group, bool async_op) {
          Args a;
          auto outs = a.list(tensor_list, "all_gather: tensor_list", true, true);
          auto in = a.one(tensor, "all_gather: tensor", false, false);
          if (group.non_member) return not_in_group("all_gather");
          return issue("all_gather", in.tensor.device(), async_op, std::move(a.keep), group,
                       [&](bool async) { return tdist::all_gather(outs, in.tensor, group, async); });
        },
        py::arg("tensor_list"), py::arg("tensor"), py::arg("group") = py::none(), py::arg("async_op") = false,
        "tensor_list[i] receives rank i's tensor (sizes may differ between ranks).");

  m.def("all_gather_coalesced",
        [](py::handle output_tensor_lists, py::handle input_tensor_list, const GroupArg& group, bool async_op) {
          Args a;
          std::vector<std::vector<tdist::Tensor>> outs;
          for (py::handle list : output_tensor_lists)
            outs.push_back(a.list(list, "all_gather_coalesced: output_tensor_lists[" +
                                            std::to_string(outs.size()) + "]", true, true));
          auto ins = a.list(input_tensor_list, "all_gather_coalesced: input_tensor_list", false, false);
          if (group.non_member) return not_in_group("all_gather_coalesced");
          std::shared_ptr<tdist::Work> w;
          {
            py::gil_scoped_release nogil;
            w = tdist::all_gather_coalesced(outs, ins, group, true);
          }
          // As torch: with async_op the Work's future, not the Work.
          py::object r = finish(std::move(w), async_op, std::move(a.keep), group);
          return async_op ? r.attr("get_future")() : r;
        },
        py::arg("output_tensor_lists"), py::arg("input_tensor_list"), py::arg("group") = py::none(),
        py::arg("async_op") = false,
        "output_tensor_lists[r][i] receives input_tensor_list[i] of rank r: every input gathered as "
        "all_gather does, as one operation; with async_op (as torch) its Work's future.");

  m.def("all_gather_into_tensor",
        &py_all_gather_into_tensor,
        py::arg("output_tensor"), py::arg("input_tensor"), py::arg("group") = py::none(),
        py::arg("async_op") = false,
        "Gathers every rank's input_tensor into output_tensor: world_size x input, concatenated along the "
        "first dimension or stacked.");

  m.def("gather",
        [](py::handle tensor, py::handle gather_list, std::optional<int> dst, const GroupArg& group, bool async_op,
           std::optional<int> group_dst) {
          auto root = root_or_zero(dst, group_dst, "gather", "dst", "group_dst");
          Args a;
          auto in = a.one(tensor, "gather: tensor", false, false);
          auto outs = a.list(gather_list, "gather: gather_list", true, true);
          if (group.non_member) return not_in_group("gather");
          return issue("gather", in.tensor.device(), async_op, std::move(a.keep), group,
                       [&](bool async) { return tdist::gather(in.tensor, outs, root, group, async); });
        },
        py::arg("tensor"), py::arg("gather_list") = py::none(), py::arg("dst") = py::none(),
        py::arg("group") = py::none(), py::arg("async_op") = false, py::arg("group_dst") = py::none(),
        "Gathers every rank's tensor into gather_list on dst (default global rank 0); gather_list is None "
        "elsewhere.");

  m.def("scatter",
        [](py::handle tensor, py::handle scatter_list, std::optional<int> src, const GroupArg& group, bool async_op,
           std::optional<int> group_src) {
          auto root = root_or_zero(src, group_src, "scatter", "src", "group_src");
          Args a;
          auto out = a.one(tensor, "scatter: tensor", true, true);
          auto ins = a.list(scatter_list, "scatter: scatter_list", false, false);
          if (group.non_member) return not_in_group("scatter");
          return issue("scatter", out.tensor.device(), async_op, std::move(a.keep), group,
                       [&](bool async) { return tdist::scatter(out.tensor, ins, root, group, async); });
        },
        py::arg("tensor"), py::arg("scatter_list") = py::none(), py::arg("src") = py::none(),
        py::arg("group") = py::none(), py::arg("async_op") = false, py::arg("group_src") = py::none(),
        "Rank i receives scatter_list[i] of src (default global rank 0) into tensor; scatter_list is None "
        "elsewhere.");

  m.def("reduce_scatter",
        [](py::handle output, py::handle input_list, const ReduceOp& op, const GroupArg& group, bool async_op) {
          Args a;
          auto out = a.one(output, "reduce_scatter: output", true, true);
          auto ins = a.list(input_list, "reduce_scatter: input_list", false, false);
          if (group.non_member) return not_in_group("reduce_scatter");
          return issue("reduce_scatter", out.tensor.device(), async_op, std::move(a.keep), group,
                       [&](bool async) { return tdist::reduce_scatter(out.tensor, ins, op, group, async); });
        },
        py::arg("output"), py::arg("input_list"), py::arg("op") = ReduceOp(ReduceOp::SUM),
        py::arg("group") = py::none(), py::arg("async_op") = false,
        "Rank i receives the reduction over every rank of input_list[i] into output.");

  m.def("reduce_scatter_tensor",
        &py_reduce_scatter_tensor,
        py::arg("output"), py::arg("input"), py::arg("op") = ReduceOp(ReduceOp::SUM),
        py::arg("group") = py::none(), py::arg("async_op") = false,
        "input is world_size x output (concatenated or stacked); rank i receives the reduction of block i.");

  m.def("all_to_all",
        [](py::handle output_tensor_list, py::handle input_tensor_list, const GroupArg& group, bool async_op) {
          Args a;
          auto outs = a.list(output_tensor_list, "all_to_all: output_tensor_list", true, true);
          auto ins = a.list(input_tensor_list, "all_to_all: input_tensor_list", false, false);
          if (group.non_member) return not_in_group("all_to_all");
          return issue("all_to_all", {}, async_op, std::move(a.keep), group,
                       [&](bool async) { return tdist::all_to_all(outs, ins, group, async); });
        },
        py::arg("output_tensor_list"), py::arg("input_tensor_list"), py::arg("group") = py::none(),
        py::arg("async_op") = false,
        "Rank i sends input_tensor_list[j] to rank j, which receives it in output_tensor_list[i].");

  m.def("all_to_all_single",
        [](py::handle output, py::handle input, std::optional<std::vector<int64_t>> output_split_sizes,
           std::optional<std::vector<int64_t>> input_split_sizes, const GroupArg& group, bool async_op) {
          Args a;
          auto out = a.one(output, "all_to_all_single: output", true, true);
          auto in = a.one(input, "all_to_all_single: input", false, false);
          auto out_splits = splits(output_split_sizes), in_splits = splits(input_split_sizes);
          if (group.non_member) return not_in_group("all_to_all_single");
          return issue("all_to_all_single", in.tensor.device(), async_op, std::move(a.keep), group,
                       [&](bool async) { return tdist::all_to_all_single(out.tensor, in.tensor, out_splits, in_splits, group, async); });
        },
        py::arg("output"), py::arg("input"), py::arg("output_split_sizes") = py::none(),
        py::arg("input_split_sizes") = py::none(), py::arg("group") = py::none(), py::arg("async_op") = false,
        "Splits input along its first dimension (input_split_sizes rows per rank; None: equal) and sends "
        "split j to rank j; output receives rank i's split at block i (output_split_sizes rows).");

  m.def("barrier",
        [](const GroupArg& group, bool async_op, py::object /*device_ids*/) {
          if (group.non_member) return not_in_group("barrier");
          return issue("barrier", {}, async_op, Keep(), group,
                       [&](bool async) { return tdist::barrier(group, async); });
        },
        py::arg("group") = py::none(), py::arg("async_op") = false, py::arg("device_ids") = py::none(),
        "Blocks until every rank of group has entered the barrier.");

  m.def("monitored_barrier",
        [](const GroupArg& group, std::optional<ms> timeout, bool wait_all_ranks) {
          if (group.non_member) {
            not_in_group("monitored_barrier");
            return;
          }
          // The group's Work, waited for so that Ctrl-C ends the wait (tdist::monitored_barrier waits at once).
          tdist::Group g;
          std::shared_ptr<tdist::Work> w;
          {
            py::gil_scoped_release nogil;
            g = group.group ? group.group : tdist::group_world();
            w = g->monitored_barrier({.timeout = timeout.value_or(tdist::kGroupTimeout), .wait_all_ranks = wait_all_ranks});
          }
          wait_for(w, g, nullptr);
        },
        py::arg("group") = py::none(), py::arg("timeout") = py::none(), py::arg("wait_all_ranks") = false,
        "A barrier whose rank 0 waits up to timeout (default: the group's) for every rank and raises "
        "DistError naming the ranks that did not arrive (all of them with wait_all_ranks).");

  // The calls a training loop makes, entered past pybind11's dispatcher
  // where their arguments have the common shapes (fast_entry.h).
  speed_up(m, "broadcast", {"tensor", "src", "group", "async_op", "group_src"}, [](const FastArgs& a) -> PyObject* {
    std::optional<int> src, group_src;
    GroupArg group;
    bool async_op = false;
    if (a.values[0] == nullptr || !fast_optional_int(a.values[1], src) || !fast_group(a.values[2], group) ||
        !fast_bool(a.values[3], async_op) || !fast_optional_int(a.values[4], group_src))
      return nullptr;
    return give(py_broadcast(a.values[0], src, group, async_op, group_src));
  });
  speed_up(m, "all_reduce", {"tensor", "op", "group", "async_op"}, [](const FastArgs& a) -> PyObject* {
    ReduceOp op(ReduceOp::SUM);
    GroupArg group;
    bool async_op = false;
    if (a.values[0] == nullptr || !fast_reduce_op(a.values[1], op) || !fast_group(a.values[2], group) ||
        !fast_bool(a.values[3], async_op))
      return nullptr;
    return give(py_all_reduce(a.values[0], op, group, async_op));
  });
  speed_up(m, "reduce", {"tensor", "dst", "op", "group", "async_op", "group_dst"}, [](const FastArgs& a) -> PyObject* {
    std::optional<int> dst, group_dst;
    ReduceOp op(ReduceOp::SUM);
    GroupArg group;
    bool async_op = false;
    if (a.values[0] == nullptr || !fast_optional_int(a.values[1], dst) || !fast_reduce_op(a.values[2], op) ||
        !fast_group(a.values[3], group) || !fast_bool(a.values[4], async_op) ||
        !fast_optional_int(a.values[5], group_dst))
      return nullptr;
    return give(py_reduce(a.values[0], dst, op, group, async_op, group_dst));
  });
  speed_up(m, "all_gather_into_tensor", {"output_tensor", "input_tensor", "group", "async_op"},
           [](const FastArgs& a) -> PyObject* {
             GroupArg group;
             bool async_op = false;
             if (a.values[0] == nullptr || a.values[1] == nullptr || !fast_group(a.values[2], group) ||
                 !fast_bool(a.values[3], async_op))
               return nullptr;
             return give(py_all_gather_into_tensor(a.values[0], a.values[1], group, async_op));
           });
  speed_up(m, "reduce_scatter_tensor", {"output", "input", "op", "group", "async_op"},
           [](const FastArgs& a) -> PyObject* {
             ReduceOp op(ReduceOp::SUM);
             GroupArg group;
             bool async_op = false;
             if (a.values[0] == nullptr || a.values[1] == nullptr || !fast_reduce_op(a.values[2], op) ||
                 !fast_group(a.values[3], group) || !fast_bool(a.values[4], async_op))
               return nullptr;
             return give(py_reduce_scatter_tensor(a.values[0], a.values[1], op, group, async_op));
           });
}

}  // namespace tdist_py
