#include "process_group/validate.h"

#include <string>

#include "device/device_runtime.h"
#include "tdist/backend.h"
#include "tdist/errors.h"
#include "tensor/split.h"

namespace tdist::validate {

namespace {

// "rank 3 in group g: all_gather"
std::string where(const ProcessGroup& g, const std::string& op) {
  return "rank " + std::to_string(g.global_rank(g.rank())) + " in group " + g.group_name() + ": " + op;
}

[[noreturn]] void invalid(const ProcessGroup& g, const char* op, const std::string& what) {
  throw DistValueError(where(g, op) + ": " + what);
}

// A reduce op that `dtype` has no meaning for (BAND on float32): refused
// before anything is sent, naming the call as its error would ("all_reduce
// #3": the number the call would have had).
void reduce_op(const ProcessGroup& g, const char* op, ReduceOp reduce, const Tensor& t) {
  if (reduce_op_supported(reduce, t.dtype())) return;
  uint64_t seq = 0;
  try {
    seq = g.backend_for(t.device()).next_sequence_number();
  } catch (const DistError&) {
    // No backend for the device: its own error comes after this one.
  }
  check_reduce_op(reduce, t.dtype(), where(g, op + (seq > 0 ? " #" + std::to_string(seq) : std::string())));
}

// A device tensor's memory is where it says: a device this process has, and
// a pointer of that device (a host pointer labelled cuda:0 would make the
// kernels fault, far from the call that was wrong). Without a runtime the
// backend says why it cannot serve the tensor.
void device_memory(const ProcessGroup& g, const Tensor& t, const char* op) {
  device::Runtime* rt = device::runtime(t.device().type);
  if (rt == nullptr || rt->device_count() == 0) return;
  const int index = t.device().index, count = rt->device_count();
  if (index >= count)
    invalid(g, op, "tensor " + t.str() + ": this process has " + std::to_string(count) + " " +
                       device_type_name(t.device().type) + " device" + (count == 1 ? "" : "s") + ", so no " +
                       t.device().str());
  const int actual = rt->device_of(t.data());
  const int expected = index >= 0 ? index : rt->current_device();
  if (actual != expected)
    invalid(g, op, "tensor " + t.str() + " says " + t.device().str() + " but its memory is " +
                       (actual < 0 ? std::string("host memory")
                                   : "on " + Device{t.device().type, actual}.str()));
}

// Every tensor of one call is on the device of its first (the backend was
// picked for that device), and has data unless it is empty.
[[gnu::noinline]] void tensor_checked(const ProcessGroup& g, const Tensor& t, const char* op, Device device) {
  // Device tensors of one call are on one device too (a CPU index says nothing).
  const bool other_index = device.type != DeviceType::CPU && t.device().index >= 0 && device.index >= 0 &&
                           t.device().index != device.index;
  if (t.device().type != device.type || other_index)
    invalid(g, op, "tensor " + t.str() + " is on " + t.device().str() + ", the call's others on " + device.str());
  if (t.data() == nullptr && t.numel() > 0) invalid(g, op, "tensor " + t.str() + " has no data");
  if (t.device().type != DeviceType::CPU && t.numel() > 0) device_memory(g, t, op);
}
// tensor_checked, with the common case (a CPU tensor with data, in a CPU
// call) decided where it is called: this is on the path of every call.
[[gnu::always_inline]] inline void tensor(const ProcessGroup& g, const Tensor& t, const char* op, Device device) {
  if (device.type == DeviceType::CPU && t.device().type == DeviceType::CPU && t.data() != nullptr) return;
  tensor_checked(g, t, op, device);
}

[[noreturn, gnu::noinline]] void rank_invalid(const ProcessGroup& g, int r, const char* op, const char* what) {
  invalid(g, op, std::string("invalid ") + what + " rank " + std::to_string(r) + " (group size " +
                     std::to_string(g.size()) + ")");
}
[[gnu::always_inline]] inline void rank(const ProcessGroup& g, int r, const char* op, const char* what) {
  if (r < 0 || r >= g.size()) rank_invalid(g, r, op, what);
}

// Every tensor of `list`, of `dtype`; `count` of them unless count < 0.
void list(const ProcessGroup& g, const std::vector<Tensor>& list, DType dtype, int count, const char* op,
          const char* what, Device device) {
  if (count >= 0 && static_cast<int>(list.size()) != count)
    invalid(g, op, std::string(what) + " has " + std::to_string(list.size()) + " tensors, expected " +
                       std::to_string(count) + " (one per rank)");
  for (size_t i = 0; i < list.size(); ++i) {
    tensor(g, list[i], op, device);
    if (list[i].dtype() != dtype)
      invalid(g, op, std::string(what) + "[" + std::to_string(i) + "] is " + list[i].str() + ", expected dtype " +
                         std::string(dtype_name(dtype)));
  }
}

// gather and scatter: the root passes one tensor per rank, each like this
// rank's own (`single`); the other ranks pass none.
void rooted_list(const ProcessGroup& g, const char* op, const std::vector<Tensor>& tensors, const Tensor& single,
                 int root, const char* list_name, const char* single_name, const char* role) {
  tensor(g, single, op, single.device());
  rank(g, root, op, role);
  if (g.rank() == root) {
    list(g, tensors, single.dtype(), g.size(), op, list_name, single.device());
    for (const Tensor& t : tensors)
      if (t.dtype() != single.dtype() || t.numel() != single.numel())
        invalid(g, op, std::string(list_name) + " entry and " + single_name + ": " + t.str() + " and " + single.str() +
                           " differ in dtype or number of elements");
  } else if (!tensors.empty()) {
    invalid(g, op, std::string(list_name) + " must be empty on ranks other than the " + role + " " +
                       std::to_string(root) + ", got " + std::to_string(tensors.size()) + " tensors");
  }
}

void splits(const ProcessGroup& g, const Tensor& t, const std::vector<int64_t>& s, const char* which) {
  const char* op = "all_to_all_single";
  const int n = g.size();
  const int64_t rows = rows_in(t);
  if (s.empty()) {
    if (rows % n != 0)
      invalid(g, op, std::string(which) + " " + t.str() + ": " + std::to_string(rows) +
                         " rows do not split evenly over " + std::to_string(n) + " ranks; pass split sizes");
    return;
  }
  if (static_cast<int>(s.size()) != n)
    invalid(g, op, std::string(which) + " split sizes have " + std::to_string(s.size()) + " entries, expected " +
                       std::to_string(n));
  int64_t sum = 0;
  for (int64_t x : s) {
    if (x < 0) invalid(g, op, std::string(which) + " split sizes contain a negative entry");
    sum += x;
  }
  if (sum != rows)
    invalid(g, op, std::string(which) + " split sizes add up to " + std::to_string(sum) + " rows, the tensor " +
                       t.str() + " has " + std::to_string(rows));
}

}  // namespace

void timeout(const ProcessGroup& g, const char* op, std::chrono::milliseconds timeout) {
  if (timeout != kGroupTimeout && timeout.count() <= 0) [[unlikely]]
    invalid(g, op, "timeout " + std::to_string(timeout.count()) + " ms: it must be positive (or kGroupTimeout)");
}

void point_to_point(const ProcessGroup& g, const Tensor& t, int peer, bool is_send, std::chrono::milliseconds limit) {
  const char* op = is_send ? "send" : "recv";
  tensor(g, t, op, t.device());
  if (is_send || peer != kAnySource) rank(g, peer, op, is_send ? "destination" : "source");
  timeout(g, op, limit);
}

void broadcast(const ProcessGroup& g, const Tensor& t, const BroadcastOptions& opts) {
  tensor(g, t, "broadcast", t.device());
  rank(g, opts.root, "broadcast", "root");
  timeout(g, "broadcast", opts.timeout);
}

void all_reduce(const ProcessGroup& g, const Tensor& t, const AllReduceOptions& opts) {
  tensor(g, t, "all_reduce", t.device());
  reduce_op(g, "all_reduce", opts.op, t);
  timeout(g, "all_reduce", opts.timeout);
}

void all_reduce_coalesced(const ProcessGroup& g, const std::vector<Tensor>& tensors,
                          const AllReduceCoalescedOptions& opts) {
  const char* op = "all_reduce_coalesced";
  if (tensors.empty()) invalid(g, op, "the tensor list is empty (at least one tensor is needed)");
  // One dtype and device for all, as torch requires of the list.
  for (size_t i = 0; i < tensors.size(); ++i) {
    tensor(g, tensors[i], op, tensors[0].device());
    if (tensors[i].dtype() != tensors[0].dtype())
      invalid(g, op, "tensors[" + std::to_string(i) + "] is " + tensors[i].str() + " and tensors[0] " +
                         tensors[0].str() + ": the tensors must all have the same dtype");
  }
  reduce_op(g, op, opts.op, tensors[0]);
  timeout(g, op, opts.timeout);
}

void reduce(const ProcessGroup& g, const Tensor& t, const ReduceOptions& opts) {
  tensor(g, t, "reduce", t.device());
  rank(g, opts.root, "reduce", "destination");
  reduce_op(g, "reduce", opts.op, t);
  timeout(g, "reduce", opts.timeout);
}

void all_gather(const ProcessGroup& g, const std::vector<Tensor>& outputs, const Tensor& input,
                const AllGatherOptions& opts) {
  const char* op = "all_gather";
  tensor(g, input, op, input.device());
  list(g, outputs, input.dtype(), g.size(), op, "output list", input.device());
  if (outputs[g.rank()].numel() != input.numel())
    invalid(g, op, "output[" + std::to_string(g.rank()) + "] " + outputs[g.rank()].str() +
                       " does not match this rank's input " + input.str());
  timeout(g, op, opts.timeout);
}

void all_gather_into_tensor(const ProcessGroup& g, const Tensor& output, const Tensor& input,
                            const AllGatherOptions& opts) {
  const char* op = "all_gather_into_tensor";
  tensor(g, input, op, input.device());
  tensor(g, output, op, input.device());
  if (output.dtype() != input.dtype() || output.numel() != input.numel() * g.size())
    invalid(g, op, "output " + output.str() + " must hold world size (" + std::to_string(g.size()) + ") x input " +
                       input.str());
  timeout(g, op, opts.timeout);
}

void gather(const ProcessGroup& g, const std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts) {
  rooted_list(g, "gather", outputs, input, opts.root, "gather_list", "input", "destination");
  timeout(g, "gather", opts.timeout);
}

void scatter(const ProcessGroup& g, const Tensor& output, const std::vector<Tensor>& inputs,
             const ScatterOptions& opts) {
  rooted_list(g, "scatter", inputs, output, opts.root, "scatter_list", "output", "source");
  timeout(g, "scatter", opts.timeout);
}

void reduce_scatter(const ProcessGroup& g, const Tensor& output, const std::vector<Tensor>& inputs,
                    const ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter";
  tensor(g, output, op, output.device());
  reduce_op(g, op, opts.op, output);
  list(g, inputs, output.dtype(), g.size(), op, "input list", output.device());
  if (inputs[g.rank()].numel() != output.numel())
    invalid(g, op, "input[" + std::to_string(g.rank()) + "] " + inputs[g.rank()].str() +
                       " does not match the output " + output.str());
  timeout(g, op, opts.timeout);
}

void reduce_scatter_tensor(const ProcessGroup& g, const Tensor& output, const Tensor& input,
                           const ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor";
  tensor(g, output, op, output.device());
  tensor(g, input, op, output.device());
  reduce_op(g, op, opts.op, output);
  if (output.dtype() != input.dtype() || input.numel() != output.numel() * g.size())
    invalid(g, op, "input " + input.str() + " must hold world size (" + std::to_string(g.size()) + ") x output " +
                       output.str());
  timeout(g, op, opts.timeout);
}

void all_to_all(const ProcessGroup& g, const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                const AllToAllOptions& opts) {
  const char* op = "all_to_all";
  if (inputs.empty()) invalid(g, op, "empty input list");
  list(g, inputs, inputs[0].dtype(), g.size(), op, "input list", inputs[0].device());
  list(g, outputs, inputs[0].dtype(), g.size(), op, "output list", inputs[0].device());
  if (outputs[g.rank()].numel() != inputs[g.rank()].numel())
    invalid(g, op, "output[" + std::to_string(g.rank()) + "] " + outputs[g.rank()].str() + " and input[" +
                       std::to_string(g.rank()) + "] " + inputs[g.rank()].str() + " differ in size");
  timeout(g, op, opts.timeout);
}

void all_to_all_single(const ProcessGroup& g, const Tensor& output, const Tensor& input, const AllToAllOptions& opts) {
  const char* op = "all_to_all_single";
  tensor(g, output, op, input.device());
  tensor(g, input, op, input.device());
  if (output.dtype() != input.dtype())
    invalid(g, op, "output " + output.str() + " and input " + input.str() + " differ in dtype");
  splits(g, output, opts.output_split_sizes, "output");
  splits(g, input, opts.input_split_sizes, "input");
  // Counted, not cut: cutting costs an allocation per part on every call.
  const int64_t own_out = part_elements(output, opts.output_split_sizes, g.size(), g.rank());
  const int64_t own_in = part_elements(input, opts.input_split_sizes, g.size(), g.rank());
  if (own_out != own_in)
    invalid(g, op, "this rank's own input split (" + std::to_string(own_in) + " elements) and output split (" +
                       std::to_string(own_out) + " elements) differ");
  timeout(g, op, opts.timeout);
}

namespace {

// all_gather_coalesced: input i of every rank gathered into outputs[i *
// size() + r], as all_gather does for one input; the inputs may differ in
// dtype and size, and share the device of the first.
void all_gather_coalesced(const ProcessGroup& g, const Operation& o) {
  const char* op = o.name();
  if (o.inputs.empty()) invalid(g, op, "the input list is empty (at least one tensor is needed)");
  const size_t n = static_cast<size_t>(g.size());
  if (o.outputs.size() != o.inputs.size() * n)
    invalid(g, op, std::to_string(o.outputs.size()) + " output tensors for " + std::to_string(o.inputs.size()) +
                       " inputs, expected " + std::to_string(o.inputs.size() * n) + " (one per input and rank)");
  const Device device = o.inputs[0].device();
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    const Tensor& input = o.inputs[i];
    tensor(g, input, op, device);
    for (size_t r = 0; r < n; ++r) {
      const Tensor& out = o.outputs[i * n + r];
      tensor(g, out, op, device);
      if (out.dtype() != input.dtype())
        invalid(g, op, "output [" + std::to_string(r) + "][" + std::to_string(i) + "] " + out.str() +
                           " differs in dtype from input " + std::to_string(i) + " " + input.str());
    }
    const Tensor& own = o.outputs[i * n + static_cast<size_t>(g.rank())];
    if (own.numel() != input.numel())
      invalid(g, op, "output [" + std::to_string(g.rank()) + "][" + std::to_string(i) + "] " + own.str() +
                         " does not match this rank's input " + std::to_string(i) + " " + input.str());
  }
  timeout(g, op, o.timeout);
}

}  // namespace

void operation(const ProcessGroup& g, const Operation& op) {
  switch (op.kind) {
    case OpKind::AllGatherCoalesced: return all_gather_coalesced(g, op);
    default:
      // The operations with a method of their own are checked there, with
      // their own arguments.
      throw DistValueError(where(g, op.name()) + ": issue it through ProcessGroup::" + op.name());
  }
}

}  // namespace tdist::validate
