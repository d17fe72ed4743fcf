#include "tdist/process_group.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <span>
#include <type_traits>
#include <sstream>

#include "tdist/errors.h"
#include "backends/backend_registry.h"
#include "process_group/backend_spec.h"
#include "process_group/default_timeout.h"
#include "process_group/validate.h"
#include "trace/flight_recorder.h"
#include "trace/recorder_registry.h"
#include "util/env.h"

namespace tdist {

namespace {

DeviceType parse_device(const std::string& name, const std::string& spec) {
  if (auto type = parse_device_type(name)) return *type;
  throw DistValueError("backend spec '" + spec + "': unknown device type '" + name + "' (" + device_type_names() +
                       ")");
}

// "tdist" -> every device the backend serves; "cpu:tdist,cuda:nccl" -> per device.
std::map<DeviceType, std::string> parse_spec(const std::string& spec) {
  std::map<DeviceType, std::string> out;
  std::string s = spec.empty() ? "tdist" : spec;
  if (s.find(':') == std::string::npos) {
    for (DeviceType d : lookup_backend(s).devices) out[d] = s;
    return out;
  }
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    auto colon = item.find(':');
    if (colon == std::string::npos)
      throw DistValueError("backend spec '" + spec + "': '" + item + "' is not of the form device:backend");
    out[parse_device(item.substr(0, colon), spec)] = item.substr(colon + 1);
  }
  return out;
}

// The spec as the group reports it (get_backend): as given, in lower case, as
// torch's Backend reads it ("gloo" runs tdist and reports "gloo", so that
// get_backend() == Backend.GLOO holds); a plain name must be registered.
std::string spec_as_given(const std::string& spec) {
  std::string s = spec.empty() ? "tdist" : spec;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s.find(':') == std::string::npos) lookup_backend(s);
  return s;
}

std::span<const Tensor> one(const Tensor& t) { return {&t, 1}; }

// What the flight recorder keeps of an operation when it is issued (inline:
// the kind is a constant where it is called, and the switch folds away).
[[gnu::always_inline]] inline trace::OpInfo info_of(const Operation& op) {
  bool reducing = false;
  switch (op.kind) {
    case OpKind::AllReduce:
    case OpKind::AllReduceCoalesced:
    case OpKind::Reduce:
    case OpKind::ReduceScatter:
    case OpKind::ReduceScatterTensor: reducing = true; break;
    default: break;
  }
  return {.op = op.kind, .p2p = op.kind == OpKind::Send || op.kind == OpKind::Recv, .root = op.root,
          .peer = op.peer, .reduce = reducing ? trace::reduce_code(op.reduce_op) : uint8_t{0}};
}

// Issues `op` through `call` to `backend` with its flight recorder entry
// (none when the group has no recorder), which travels in op.trace: a
// backend that stamps its operations claims it there, else the work says
// how it ended.
template <typename Call>
std::shared_ptr<Work> recorded(trace::FlightRecorder* recorder, const Backend& backend, Operation& op, Call&& call) {
  if (!recorder || trace::g_paused.load(std::memory_order_relaxed)) return call();
  trace::FlightScope scope(
      recorder->begin(info_of(op), op.inputs, op.outputs, recorder->backend_stamps() ? 0 : now_ticks()));
  op.trace = &scope;
  std::shared_ptr<Work> work;
  try {
    work = call();
  } catch (...) {
    scope.threw(std::current_exception());
    throw;
  }
  if (scope.claimed()) {
    if (!recorder->backend_stamps()) recorder->note_backend_stamps();
  } else {
    scope.returned(*work, backend.name());
  }
  return work;
}

// The same for a call that returns no Work: over when it returns.
template <typename Call>
auto recorded_blocking(trace::FlightRecorder* recorder, Operation& op, Call&& call) {
  if (!recorder || trace::g_paused.load(std::memory_order_relaxed)) return call();
  trace::FlightScope scope(recorder->begin(info_of(op), op.inputs, {}, recorder->backend_stamps() ? 0 : now_ticks()));
  op.trace = &scope;
  const auto over = [&] {
    if (scope.claimed()) {
      if (!recorder->backend_stamps()) recorder->note_backend_stamps();
    } else {
      scope.returned_ok();
    }
  };
  try {
    if constexpr (std::is_void_v<decltype(call())>) {
      call();
      over();
    } else {
      auto result = call();
      over();
      return result;
    }
  } catch (...) {
    scope.threw(std::current_exception());
    throw;
  }
}

}  // namespace

void validate_backend_spec(const std::string& spec) { parse_spec(spec); }

bool spec_takes_world_from_mpi(const std::string& spec) {
  auto backends = parse_spec(spec);
  for (auto& [device, name] : backends)
    if (!lookup_backend(name).world_from_mpi) return false;
  return !backends.empty();
}

ProcessGroup::ProcessGroup(std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options)
    : store_(std::move(store)), rank_(rank), size_(size), options_(std::move(options)) {
  // Every setting read here, before any backend thread could meet a bad
  // value where it cannot raise it (groups made without init_process_group,
  // the PyTorch plugin's, included).
  check_environment();
  options_.timeout = resolve_timeout(options_.timeout);
  timeout_ms_.store(options_.timeout.count(), std::memory_order_relaxed);
  if (!store_) throw DistValueError("ProcessGroup: no store given");
  if (size < 1) throw DistValueError("ProcessGroup: world size must be at least 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size)
    throw DistValueError("ProcessGroup: rank " + std::to_string(rank) + " is outside [0, " + std::to_string(size) + ")");
  if (options_.global_ranks.empty()) {
    options_.global_ranks.resize(size);
    std::iota(options_.global_ranks.begin(), options_.global_ranks.end(), 0);
  }
  if (options_.global_ranks.size() != static_cast<size_t>(size))
    throw DistValueError("ProcessGroup: " + std::to_string(options_.global_ranks.size()) + " global ranks for " +
                         std::to_string(size) + " members");
  backend_spec_ = spec_as_given(options_.backend);
  BackendOptions bopts{options_.timeout, options_.group_name, options_.global_ranks};
  if (options_.launch_ranks.empty()) options_.launch_ranks = options_.global_ranks;
  if (options_.launch_ranks.size() != options_.global_ranks.size())
    throw DistValueError("ProcessGroup: " + std::to_string(options_.launch_ranks.size()) + " launch ranks for " +
                         std::to_string(size) + " members");
  bopts.launch_ranks = options_.launch_ranks;
  bopts.death_records = options_.death_records;
  bopts.members_gone = options_.members_gone;
  if (options_.device_id) bopts.device_id = options_.device_id->index;
  for (auto& [device, name] : parse_spec(backend_spec_)) {
    BackendEntry entry = lookup_backend(name);
    if (std::find(entry.devices.begin(), entry.devices.end(), device) == entry.devices.end()) {
      std::string served;
      for (DeviceType d : entry.devices) served += (served.empty() ? "" : ", ") + std::string(device_type_name(d));
      throw DistValueError("backend spec '" + backend_spec_ + "': backend '" + name + "' does not serve " +
                           device_type_name(device) + " tensors (it serves " + served + ")");
    }
    // A backend named for several devices ("tdist": cpu and cuda) is one
    // instance serving them all: one set of connections, one sequence of
    // collectives, as torch's Gloo serves both.
    auto same = std::find_if(backends_.begin(), backends_.end(),
                             [&](const auto& kv) { return kv.second->name() == entry.name; });
    if (same != backends_.end()) {
      backends_[device] = same->second;
      continue;
    }
    bopts.parent = nullptr;
    if (options_.parent && options_.parent->is_member())
      if (auto it = options_.parent->backends_.find(device); it != options_.parent->backends_.end())
        if (it->second->name() == entry.name) bopts.parent = it->second;
    // One store namespace per group and backend, so they never share keys.
    auto scoped = std::make_shared<PrefixStore>(options_.group_name + "/" + entry.name + "/" + device_type_name(device),
                                                store_);
    backends_[device] = entry.factory(scoped, rank, size, bopts);
  }
  if (auto it = backends_.find(DeviceType::CPU); it != backends_.end()) cpu_backend_ = it->second.get();
  options_.parent.reset();
  // The first group of a process names it in dumps until init_process_group does.
  if (!trace::identity_set()) trace::set_identity(options_.global_ranks[rank_], size_);
  trace::prepare_process();  // groups made without init_process_group (the PyTorch plugin's) too
  if (size_t capacity = trace::recorder_capacity())
    recorder_ = std::make_shared<trace::FlightRecorder>(options_.group_name, backend_spec_, options_.global_ranks,
                                                        rank_, capacity);
}

ProcessGroup::ProcessGroup(NonMemberTag, std::vector<int> global_ranks, ProcessGroupOptions options)
    : rank_(-1), size_(static_cast<int>(global_ranks.size())), options_(std::move(options)) {
  options_.global_ranks = std::move(global_ranks);
  options_.parent.reset();
  options_.timeout = resolve_timeout(options_.timeout);
  timeout_ms_.store(options_.timeout.count(), std::memory_order_relaxed);
  backend_spec_ = spec_as_given(options_.backend);
}

std::shared_ptr<ProcessGroup> ProcessGroup::non_member(std::vector<int> global_ranks, ProcessGroupOptions options) {
  return std::shared_ptr<ProcessGroup>(new ProcessGroup(NonMemberTag{}, std::move(global_ranks), std::move(options)));
}

ProcessGroup::~ProcessGroup() { shutdown(); }

// Each backend once, though it may serve several devices.
std::vector<Backend*> ProcessGroup::distinct_backends() const {
  std::vector<Backend*> out;
  for (auto& [device, backend] : backends_)
    if (std::find(out.begin(), out.end(), backend.get()) == out.end()) out.push_back(backend.get());
  return out;
}

void ProcessGroup::shutdown() {
  for (Backend* backend : distinct_backends()) backend->shutdown();
}

void ProcessGroup::abort(std::exception_ptr cause) {
  for (Backend* backend : distinct_backends()) backend->abort(cause);
}

namespace {

// The sorted union of what each backend answers (a group with a CPU and a
// CUDA backend has two sets of connections).
template <typename Ask>
std::vector<int> union_over(const std::vector<Backend*>& backends, Ask ask) {
  std::vector<int> out;
  for (Backend* backend : backends) {
    std::vector<int> some = ask(*backend);
    out.insert(out.end(), some.begin(), some.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

std::vector<int> ProcessGroup::failed_ranks(std::chrono::milliseconds silence) {
  if (!is_member()) return {};
  return union_over(distinct_backends(), [&](Backend& b) { return b.failed_ranks(silence); });
}

std::vector<int> ProcessGroup::ranks_proven_dead(const std::vector<int>& ranks) {
  if (!is_member()) return {};
  return union_over(distinct_backends(), [&](Backend& b) { return b.ranks_proven_dead(ranks); });
}

bool ProcessGroup::supports_shrinking() const {
  if (!is_member()) return false;
  for (Backend* backend : distinct_backends())
    if (!backend->supports_shrinking()) return false;
  return true;
}

void ProcessGroup::shrink_abandoned() {
  for (Backend* backend : distinct_backends()) backend->shrink_abandoned();
}

int ProcessGroup::global_rank(int group_rank) const {
  if (group_rank < 0 || group_rank >= size_)
    throw DistValueError("group " + options_.group_name + ": group rank " + std::to_string(group_rank) +
                         " is outside [0, " + std::to_string(size_) + ")");
  return options_.global_ranks[group_rank];
}

int ProcessGroup::group_rank(int global_rank) const {
  for (int i = 0; i < size_; ++i)
    if (options_.global_ranks[i] == global_rank) return i;
  return -1;
}

Backend& ProcessGroup::backend_found(Device device) const {
  if (!is_member())
    throw DistValueError("this process (not a member of group " + options_.group_name + ") cannot use its backend");
  auto it = backends_.find(device.type);
  if (it == backends_.end()) {
    std::string served;
    for (auto& [d, backend] : backends_)
      served += (served.empty() ? "" : ", ") + std::string(device_type_name(d)) + " (" + backend->name() + ")";
    throw DistValueError("rank " + std::to_string(options_.global_ranks[rank_]) + " in group " + options_.group_name +
                         ": backend '" + backend_spec_ + "' does not serve " + device.str() + " tensors (it serves " +
                         served + "); name a backend per device, as \"cpu:tdist,cuda:nccl\"");
  }
  return *it->second;
}

void ProcessGroup::set_timeout(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0)
    throw DistValueError("group " + options_.group_name + ": set_timeout(" + std::to_string(timeout.count()) +
                         " ms): the timeout must not be negative");
  timeout_ms_.store(timeout.count(), std::memory_order_relaxed);
}

std::shared_ptr<Work> ProcessGroup::issue(Operation op) {
  // The device of its first tensor; barriers take any backend.
  const Tensor* first = !op.inputs.empty() ? &op.inputs[0] : !op.outputs.empty() ? &op.outputs[0] : nullptr;
  if (first) op.device = first->device();
  validate::operation(*this, op);
  Backend& b = first ? backend_for(op.device) : any_backend();
  op.timeout = resolved(op.timeout);
  return recorded(recorder_.get(), b, op, [&] { return b.run(op); });
}

std::shared_ptr<Work> ProcessGroup::send(const Tensor& tensor, int dst, const SendOptions& opts) {
  Backend& b = backend_for(tensor.device());
  validate::point_to_point(*this, tensor, dst, true, opts.timeout);
  Operation op{.kind = OpKind::Send, .inputs = one(tensor), .peer = dst, .tag = opts.tag, .device = tensor.device(),
               .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.send(op); });
}
std::shared_ptr<Work> ProcessGroup::recv(const Tensor& tensor, int src, const RecvOptions& opts) {
  Backend& b = backend_for(tensor.device());
  validate::point_to_point(*this, tensor, src, false, opts.timeout);
  Operation op{.kind = OpKind::Recv, .inputs = one(tensor), .peer = src, .tag = opts.tag, .device = tensor.device(),
               .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.recv(op); });
}
void ProcessGroup::blocking_send(const Tensor& tensor, int dst, const SendOptions& opts) {
  Backend& b = backend_for(tensor.device());
  validate::point_to_point(*this, tensor, dst, true, opts.timeout);
  Operation op{.kind = OpKind::Send, .inputs = one(tensor), .peer = dst, .tag = opts.tag, .device = tensor.device(),
               .timeout = resolved(opts.timeout), .async_op = false};
  recorded_blocking(recorder_.get(), op, [&] { b.blocking_send(op); });
}
int ProcessGroup::blocking_recv(const Tensor& tensor, int src, const RecvOptions& opts) {
  Backend& b = backend_for(tensor.device());
  validate::point_to_point(*this, tensor, src, false, opts.timeout);
  Operation op{.kind = OpKind::Recv, .inputs = one(tensor), .peer = src, .tag = opts.tag, .device = tensor.device(),
               .timeout = resolved(opts.timeout), .async_op = false};
  return recorded_blocking(recorder_.get(), op, [&] { return b.blocking_recv(op); });
}
std::shared_ptr<Work> ProcessGroup::broadcast(const Tensor& tensor, const BroadcastOptions& opts) {
  Backend& b = backend_for(tensor.device());
  validate::broadcast(*this, tensor, opts);
  Operation op{.kind = OpKind::Broadcast, .inputs = one(tensor), .root = opts.root, .device = tensor.device(),
               .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.broadcast(op); });
}
std::shared_ptr<Work> ProcessGroup::all_reduce(const Tensor& tensor, const AllReduceOptions& opts) {
  Backend& b = backend_for(tensor.device());
  validate::all_reduce(*this, tensor, opts);
  Operation op{.kind = OpKind::AllReduce, .inputs = one(tensor), .reduce_op = opts.op, .device = tensor.device(),
               .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.all_reduce(op); });
}
std::shared_ptr<Work> ProcessGroup::all_reduce_coalesced(const std::vector<Tensor>& tensors,
                                                         const AllReduceCoalescedOptions& opts) {
  validate::all_reduce_coalesced(*this, tensors, opts);
  Backend& b = backend_for(tensors[0].device());
  Operation op{.kind = OpKind::AllReduceCoalesced, .inputs = tensors, .reduce_op = opts.op,
               .device = tensors[0].device(), .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.all_reduce_coalesced(op); });
}
Backend& ProcessGroup::any_backend() const {
  // Any backend can synchronise the group; prefer the CPU one (no device work).
  if (backends_.empty()) throw DistValueError("group " + options_.group_name + " has no backend on this process");
  auto it = backends_.find(DeviceType::CPU);
  return *(it != backends_.end() ? it->second : backends_.begin()->second);
}

std::shared_ptr<Work> ProcessGroup::barrier(const BarrierOptions& opts) {
  Backend& b = any_backend();
  validate::timeout(*this, "barrier", opts.timeout);
  Operation op{.kind = OpKind::Barrier, .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.barrier(op); });
}
std::shared_ptr<Work> ProcessGroup::monitored_barrier(const MonitoredBarrierOptions& opts) {
  Backend& b = any_backend();
  const std::chrono::milliseconds timeout = resolved(opts.timeout);  // as torch: none given, the group's
  if (timeout.count() < 0)  // 0 is allowed here: no time at all, as torch's timedelta(0)
    throw DistValueError("group " + options_.group_name + ": monitored_barrier: timeout " +
                         std::to_string(timeout.count()) + " ms is negative (0: no time at all; kGroupTimeout: "
                         "the group's)");
  Operation op{.kind = OpKind::MonitoredBarrier, .wait_all_ranks = opts.wait_all_ranks, .timeout = timeout,
               .async_op = false};
  return recorded(recorder_.get(), b, op, [&] { return b.monitored_barrier(op); });
}
std::shared_ptr<Work> ProcessGroup::reduce(const Tensor& tensor, const ReduceOptions& opts) {
  Backend& b = backend_for(tensor.device());
  validate::reduce(*this, tensor, opts);
  Operation op{.kind = OpKind::Reduce, .inputs = one(tensor), .root = opts.root, .reduce_op = opts.op,
               .device = tensor.device(), .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.reduce(op); });
}
std::shared_ptr<Work> ProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                               const AllGatherOptions& opts) {
  Backend& b = backend_for(input.device());
  validate::all_gather(*this, outputs, input, opts);
  Operation op{.kind = OpKind::AllGather, .inputs = one(input), .outputs = outputs, .device = input.device(),
               .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.all_gather(op); });
}
std::shared_ptr<Work> ProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input,
                                                           const AllGatherOptions& opts) {
  Backend& b = backend_for(input.device());
  validate::all_gather_into_tensor(*this, output, input, opts);
  Operation op{.kind = OpKind::AllGatherIntoTensor, .inputs = one(input), .outputs = one(output),
               .device = input.device(), .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.all_gather_into_tensor(op); });
}
std::shared_ptr<Work> ProcessGroup::gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                           const GatherOptions& opts) {
  Backend& b = backend_for(input.device());
  validate::gather(*this, outputs, input, opts);
  Operation op{.kind = OpKind::Gather, .inputs = one(input), .outputs = outputs, .root = opts.root,
               .device = input.device(), .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.gather(op); });
}
std::shared_ptr<Work> ProcessGroup::scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                            const ScatterOptions& opts) {
  Backend& b = backend_for(output.device());
  validate::scatter(*this, output, inputs, opts);
  Operation op{.kind = OpKind::Scatter, .inputs = inputs, .outputs = one(output), .root = opts.root,
               .device = output.device(), .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.scatter(op); });
}
std::shared_ptr<Work> ProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                                   const ReduceScatterOptions& opts) {
  Backend& b = backend_for(output.device());
  validate::reduce_scatter(*this, output, inputs, opts);
  Operation op{.kind = OpKind::ReduceScatter, .inputs = inputs, .outputs = one(output), .reduce_op = opts.op,
               .device = output.device(), .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.reduce_scatter(op); });
}
std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                                          const ReduceScatterOptions& opts) {
  Backend& b = backend_for(output.device());
  validate::reduce_scatter_tensor(*this, output, input, opts);
  Operation op{.kind = OpKind::ReduceScatterTensor, .inputs = one(input), .outputs = one(output),
               .reduce_op = opts.op, .device = output.device(), .timeout = resolved(opts.timeout),
               .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.reduce_scatter_tensor(op); });
}
std::shared_ptr<Work> ProcessGroup::all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                               const AllToAllOptions& opts) {
  if (inputs.empty()) throw DistValueError("all_to_all: empty input list");
  Backend& b = backend_for(inputs[0].device());
  validate::all_to_all(*this, outputs, inputs, opts);
  Operation op{.kind = OpKind::AllToAll, .inputs = inputs, .outputs = outputs, .device = inputs[0].device(),
               .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.all_to_all(op); });
}
std::shared_ptr<Work> ProcessGroup::all_to_all_single(const Tensor& output, const Tensor& input,
                                                      const AllToAllOptions& opts) {
  Backend& b = backend_for(input.device());
  validate::all_to_all_single(*this, output, input, opts);
  Operation op{.kind = OpKind::AllToAllSingle, .inputs = one(input), .outputs = one(output),
               .output_split_sizes = opts.output_split_sizes, .input_split_sizes = opts.input_split_sizes,
               .device = input.device(), .timeout = resolved(opts.timeout), .async_op = opts.async_op};
  return recorded(recorder_.get(), b, op, [&] { return b.all_to_all_single(op); });
}

}  // namespace tdist
