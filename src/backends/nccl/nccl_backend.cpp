#include "backends/nccl/nccl_backend.h"

#include <algorithm>
#include <cstring>

#include "backends/nccl/nccl_types.h"
#include "backends/backend_registry.h"
#include "device/current_stream.h"
#include "device/device_runtime.h"
#include "tdist/errors.h"
#include "tensor/split.h"
#include "trace/flight_recorder.h"
#include "util/settings.h"
#include "util/error_context.h"
#include "util/tick_clock.h"

namespace tdist::nccl {

namespace {

std::string label_of(int rank, const BackendOptions& o) {
  const int global = o.global_ranks.empty() ? rank : o.global_ranks[rank];
  return "rank " + std::to_string(global) + " in group " + (o.group_name.empty() ? "default_pg" : o.group_name);
}

void check_nccl(const Api& api, ncclResult_t rc, const std::string& where, const char* call, ncclComm_t comm) {
  if (rc == ncclSuccess || rc == ncclInProgress) return;
  std::string detail = api.GetErrorString(rc);
  if (api.GetLastError && comm)
    if (const char* last = api.GetLastError(comm); last && *last) detail += ": " + std::string(last);
  throw DistBackendError((where.empty() ? "" : where + ": ") + call + " failed: " + detail);
}

// Whether two tensors share bytes.
bool overlap(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  const char* pa = static_cast<const char*>(a.data());
  const char* pb = static_cast<const char*>(b.data());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

// Whether `parts` lie one after another in rank order, all of one size: one
// buffer that NCCL's flat collectives take as it is.
bool contiguous_equal(const std::vector<Tensor>& parts) {
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i].numel() != parts[0].numel() ||
        parts[i].data() != static_cast<const char*>(parts[0].data()) + i * parts[0].nbytes())
      return false;
  return true;
}

// ncclGroupStart/End around several calls: NCCL runs them as one operation
// (a send and a receive to one peer cannot deadlock each other).
template <typename Body>
void grouped(const Api& api, ncclComm_t comm, const std::string& where, Body&& body) {
  check_nccl(api, api.GroupStart(), where, "ncclGroupStart", comm);
  try {
    body();
  } catch (...) {
    api.GroupEnd();
    throw;
  }
  check_nccl(api, api.GroupEnd(), where, "ncclGroupEnd", comm);
}

// Device memory in stream order (cudaMallocAsync on the NCCL stream), freed in
// stream order after the operation: staging for layouts NCCL cannot take.
struct StreamBuffer {
  void* ptr = nullptr;
  cudaStream_t stream = nullptr;
  StreamBuffer(size_t bytes, cudaStream_t s, const std::string& where) : stream(s) {
    if (bytes > 0) check_cuda(cudaMallocAsync(&ptr, bytes, s), where, "cudaMallocAsync");
  }
  ~StreamBuffer() {
    if (ptr) cudaFreeAsync(ptr, stream);
  }
};

void copy_on(cudaStream_t s, void* dst, const void* src, size_t bytes, const std::string& where) {
  if (bytes == 0 || dst == src) return;
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), where, "cudaMemcpyAsync");
}

}  // namespace

NcclBackend::NcclBackend(std::shared_ptr<Store> store, int rank, int size, const BackendOptions& options)
    : Backend(rank, size), store_(std::move(store)), options_(options) {
  const std::string label = label_of(rank, options);
  const std::string where = label + ": nccl";  // a named string: GCC 13 takes api()'s result for a dangling one
  const Api& a = api(where);
  if (const long long emulated = settings::get<"TDIST_EMULATE_CUDA">(); emulated > 0)
    throw DistBackendError(label + ": nccl needs real CUDA devices; TDIST_EMULATE_CUDA=" +
                           std::to_string(emulated) + " emulates devices in host memory, which NCCL cannot use "
                           "(use backend \"tdist\" for emulated CUDA tensors)");
  state_ = std::make_shared<CommState>(a, label, settings::get<"TDIST_NCCL_BLOCKING_WAIT">());
  parent_ = std::dynamic_pointer_cast<NcclBackend>(options.parent);
  options_.parent.reset();
  // Eager: the device is known, or the parent's communicator is there to split.
  const bool parent_ready = parent_ && parent_->state_->comm() != nullptr;
  if (options.device_id >= 0 || parent_ready)
    ensure_comm(options.device_id >= 0 ? options.device_id : parent_->device(), label + ": nccl");
  state_->start_watchdog();
}

NcclBackend::~NcclBackend() { shutdown(); }

uint64_t NcclBackend::next_sequence_number() const {
  std::lock_guard<std::mutex> lock(issue_mu_);
  return seq_ + 1;
}

std::string NcclBackend::where(const char* op) const { return state_->label + ": " + op; }

int NcclBackend::pick_device(int requested, const std::string& who) const {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw DistBackendError(who + ": no CUDA device: cudaGetDeviceCount: " +
                           (rc != cudaSuccess ? std::string(cudaGetErrorString(rc)) : "0 devices"));
  }
  int device = requested;
  if (device < 0) {
    // As torch guesses a device for a rank that named none: LOCAL_RANK's,
    // else the thread's current one.
    if (auto local = settings::get<"LOCAL_RANK">())
      device = static_cast<int>(*local % count);
    else if (cudaGetDevice(&device) != cudaSuccess)
      device = 0;
  }
  if (device >= count)
    throw DistBackendError(who + ": cuda:" + std::to_string(device) + " does not exist (" +
                           std::to_string(count) + " CUDA devices here)");
  return device;
}

void NcclBackend::ensure_comm(int requested, const std::string& who) {
  CommState& s = *state_;
  if (s.device >= 0) {
    if (requested >= 0 && requested != s.device)
      throw DistBackendError(who + ": this group's NCCL communicator is on cuda:" +
                             std::to_string(s.device) + ", the tensor on cuda:" + std::to_string(requested) +
                             " (one device per rank and group, as torch's NCCL backend)");
    return;
  }
  make_comm(pick_device(requested, who), who);
}

void NcclBackend::make_comm(int device, const std::string& who) {
  CommState& s = *state_;
  const Api& a = s.api;
  const std::string where = who + ": making the NCCL communicator on cuda:" + std::to_string(device);
  DeviceGuard guard(device);
  check_cuda(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), where, "cudaStreamCreateWithFlags");
  check_cuda(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming), where, "cudaEventCreateWithFlags");
  check_cuda(cudaMalloc(&s.scratch, sizeof(float)), where, "cudaMalloc");
  check_cuda(cudaMemset(s.scratch, 0, sizeof(float)), where, "cudaMemset");
  s.device = device;
  ncclComm_t comm = nullptr;
  // A split needs every rank of the parent to take part: only a group of all
  // of them can ask for one (new_group does not call the parent's backend on
  // ranks outside the new group; see docs/nccl_backend.md).
  ncclComm_t parent_comm = parent_ ? parent_->state_->comm() : nullptr;
  if (parent_comm != nullptr && a.CommSplit != nullptr && parent_->size() == size() &&
      parent_->device() == device) {
    check_nccl(a, a.CommSplit(parent_comm, 0, rank(), &comm, nullptr), where, "ncclCommSplit", parent_comm);
  } else {
    ncclUniqueId id;
    const std::string key = "nccl_unique_id";
    if (rank() == 0) {
      check_nccl(a, a.GetUniqueId(&id), where, "ncclGetUniqueId", nullptr);
      store_->set(key, std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
    } else {
      std::string bytes;
      try {
        store_->wait({key}, options_.timeout);
        bytes = store_->get(key);
      } catch (...) {
        std::rethrow_exception(with_context(std::current_exception(), where + ": waiting for rank 0's unique id: "));
      }
      if (bytes.size() != sizeof(id))
        throw DistBackendError(where + ": rank 0's unique id has " + std::to_string(bytes.size()) +
                               " bytes, expected " + std::to_string(sizeof(id)));
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    check_nccl(a, a.CommInitRank(&comm, size(), id, rank()), where, "ncclCommInitRank", nullptr);
  }
  s.set_comm(comm);
  parent_.reset();
}

std::shared_ptr<Work> NcclBackend::run(const Operation& operation, Call call, const Enqueue& enqueue) {
  std::lock_guard<std::mutex> lock(issue_mu_);
  const uint64_t seq = call.p2p ? ++p2p_seq_ : ++seq_;
  const std::string what = state_->label + ": " + call.op + " #" + std::to_string(seq);
  trace::FlightMark mark = trace::claim_mark(operation);
  mark.engine(EngineKind::Nccl);
  if (auto e = state_->failed_before(call.op, seq)) return NcclWork::failed(state_, call.op, seq, e, mark);
  std::shared_ptr<NcclWork> work;
  try {
    int dev = call.device.index;  // -1: the current device ("cuda")
    if (dev < 0 && !call.barrier && cudaGetDevice(&dev) != cudaSuccess) {
      cudaGetLastError();
      dev = -1;
    }
    ensure_comm(dev, what);
    CommState& s = *state_;
    ncclComm_t comm = s.comm();
    if (comm == nullptr) {
      if (auto e = s.failed_before(call.op, seq)) return NcclWork::failed(state_, call.op, seq, e, mark);
      throw DistBackendError(what + ": the communicator is gone");
    }
    DeviceGuard guard(s.device);
    work = std::make_shared<NcclWork>(
        state_, NcclWork::Spec{call.op, seq, std::move(call.result), std::move(call.keep), timeout_of(call.timeout),
                               call.peer, call.barrier});
    // Ordered after what the caller queued on its current stream, without
    // blocking the host.
    device::Runtime* rt = device::runtime(DeviceType::CUDA);
    void* current = rt != nullptr ? rt->current_stream(s.device) : device::thread_current_stream(s.device);
    cudaStream_t caller = current != nullptr ? static_cast<cudaStream_t>(current) : cudaStreamLegacy;
    const bool batched = call.p2p && coalescing_;
    if (!batched || !batch_open_) {
      check_cuda(cudaEventRecord(s.ready, caller), what, "cudaEventRecord");
      check_cuda(cudaStreamWaitEvent(s.stream, s.ready, 0), what, "cudaStreamWaitEvent");
    }
    if (batched && !batch_open_) {
      check_nccl(s.api, s.api.GroupStart(), what, "ncclGroupStart", comm);
      batch_open_ = true;
    }
    mark.started_inline(now_ticks());
    enqueue(comm, s.stream);
    if (batched) {
      // Issued, with the others, when the batch ends.
      work->defer_issue();
      work->set_mark(mark);
      batch_.push_back(work);
      return work;
    }
    check_cuda(cudaEventRecord(work->end_event(), s.stream), what, "cudaEventRecord");
  } catch (const DistValueError&) {
    throw;
  } catch (...) {
    // Prefixed with the call, unless the message starts with it already.
    auto error = std::current_exception();
    if (error_message(error).rfind(what, 0) != 0) error = with_context(error, what + ": ");
    if (batch_open_) fail_batch(error);
    // NCCL's and CUDA's errors at enqueue leave the communicator in doubt:
    // the group fails, as torch's does.
    state_->fail(error);
    return NcclWork::failed(state_, call.op, seq, error, mark);
  }
  work->set_mark(mark);
  state_->track(work);
  return work;
}

// --- point-to-point ---------------------------------------------------------

std::shared_ptr<Work> NcclBackend::point_to_point(const Operation& operation, bool is_send, const Tensor& tensor,
                                                  int peer, std::chrono::milliseconds timeout) {
  const char* op = is_send ? "send" : "recv";
  if (peer == kAnySource)
    throw DistBackendError(where(op) + ": nccl cannot receive from any source (NCCL has no wildcard receive; "
                                       "name the source rank, as torch's NCCL backend requires)");
  const Moved m = moved_as(tensor.dtype(), static_cast<size_t>(tensor.numel()));
  void* data = tensor.data();
  const Api& a = state_->api;  // NCCL has no tags: messages between two ranks match in issue order (as torch's NCCL).
  return run(operation, {.op = op, .device = tensor.device(), .result = {tensor}, .keep = {tensor}, .timeout = timeout,
              .p2p = true, .peer = peer},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               if (m.count == 0) return;
               if (is_send)
                 check_nccl(a, a.Send(data, m.count, m.type, peer, comm, stream), {}, "ncclSend", comm);
               else
                 check_nccl(a, a.Recv(data, m.count, m.type, peer, comm, stream), {}, "ncclRecv", comm);
             });
}

std::shared_ptr<Work> NcclBackend::send(const Operation& operation) {
  const Tensor& tensor = operation.tensor();
  const int dst = operation.peer;
  return point_to_point(operation, true, tensor, dst, operation.timeout);
}

std::shared_ptr<Work> NcclBackend::recv(const Operation& operation) {
  const Tensor& tensor = operation.tensor();
  const int src = operation.peer;
  return point_to_point(operation, false, tensor, src, operation.timeout);
}

// --- collectives --------------------------------------------------------------

std::shared_ptr<Work> NcclBackend::broadcast(const Operation& operation) {
  const Tensor& tensor = operation.tensor();
  const Moved m = moved_as(tensor.dtype(), static_cast<size_t>(tensor.numel()));
  void* data = tensor.data();
  const int root = operation.root;
  const Api& a = state_->api;  return run(operation, {.op = "broadcast", .device = tensor.device(), .result = {tensor}, .timeout = operation.timeout},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               if (m.count == 0) return;
               check_nccl(a, a.Broadcast(data, data, m.count, m.type, root, comm, stream), {}, "ncclBroadcast", comm);
             });
}

std::shared_ptr<Work> NcclBackend::all_reduce(const Operation& operation) {
  const Tensor& tensor = operation.tensor();
  const std::string w = where("all_reduce");
  const Reduced r = reduced_as(operation.reduce_op, tensor.dtype(), static_cast<size_t>(tensor.numel()), w);
  void* data = tensor.data();
  const double factor = operation.reduce_op.factor();
  const DType dtype = tensor.dtype();
  const Api& a = state_->api;
  return run(operation, {.op = "all_reduce", .device = tensor.device(), .result = {tensor}, .timeout = operation.timeout},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               if (r.count == 0) return;
               RedOp op(a, r, factor, dtype, comm, {});
               check_nccl(a, a.AllReduce(data, data, r.count, r.type, op.get(), comm, stream), {}, "ncclAllReduce",
                          comm);
             });
}

// Every tensor in one ncclGroupStart/End: one operation, one Work.
std::shared_ptr<Work> NcclBackend::all_reduce_coalesced(const Operation& operation) {
  const std::vector<Tensor> tensors(operation.inputs.begin(), operation.inputs.end());
  const std::string w = where("all_reduce_coalesced");
  std::vector<std::pair<void*, Reduced>> parts;
  for (const Tensor& t : tensors)
    parts.emplace_back(t.data(), reduced_as(operation.reduce_op, t.dtype(), static_cast<size_t>(t.numel()), w));
  const double factor = operation.reduce_op.factor();
  const DType dtype = tensors[0].dtype();
  const Api& a = state_->api;
  return run(operation, {.op = "all_reduce_coalesced", .device = tensors[0].device(), .result = tensors, .timeout = operation.timeout},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               // One PreMulSum operator for all (it must outlive the group's end).
               RedOp op(a, parts[0].second, factor, dtype, comm, {});
               grouped(a, comm, {}, [&] {
                 for (auto& [data, r] : parts)
                   if (r.count > 0)
                     check_nccl(a, a.AllReduce(data, data, r.count, r.type, op.get(), comm, stream), {},
                                "ncclAllReduce", comm);
               });
             });
}

// An all_reduce of one float on the device; wait() blocks the host until it
// is done, as torch's NCCL barrier.
std::shared_ptr<Work> NcclBackend::barrier(const Operation& operation) {
  const Api& a = state_->api;  CommState* s = state_.get();
  const int device = s->device >= 0 ? s->device : options_.device_id;
  return run(operation, {.op = "barrier", .device = Device{DeviceType::CUDA, device}, .timeout = operation.timeout,
              .barrier = true},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               check_nccl(a, a.AllReduce(s->scratch, s->scratch, 1, ncclFloat32, ncclSum, comm, stream), {},
                          "ncclAllReduce", comm);
             });
}

std::shared_ptr<Work> NcclBackend::reduce(const Operation& operation) {
  const Tensor& tensor = operation.tensor();
  const std::string w = where("reduce");
  const Reduced r = reduced_as(operation.reduce_op, tensor.dtype(), static_cast<size_t>(tensor.numel()), w);
  void* data = tensor.data();
  const double factor = operation.reduce_op.factor();
  const DType dtype = tensor.dtype();
  const int root = operation.root;
  const Api& a = state_->api;
  return run(operation, {.op = "reduce", .device = tensor.device(), .result = {tensor}, .timeout = operation.timeout},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               if (r.count == 0) return;
               RedOp op(a, r, factor, dtype, comm, {});
               check_nccl(a, a.Reduce(data, data, r.count, r.type, op.get(), root, comm, stream), {}, "ncclReduce",
                          comm);
             });
}

// One buffer of equal blocks in rank order: ncclAllGather; otherwise (blocks
// apart, or of different sizes) one ncclBroadcast per rank from its input,
// grouped.
std::shared_ptr<Work> NcclBackend::all_gather(const Operation& operation) {
  const std::vector<Tensor> outputs(operation.outputs.begin(), operation.outputs.end());
  const Tensor& input = operation.tensor();
  const Api& a = state_->api;
  const int me = rank();
  const bool flat = contiguous_equal(outputs);
  std::vector<std::pair<void*, Moved>> blocks;
  for (const Tensor& o : outputs) blocks.emplace_back(o.data(), moved_as(o.dtype(), static_cast<size_t>(o.numel())));
  const void* send = input.data();
  bool input_overlaps = false;
  for (int i = 0; i < size(); ++i)
    if (i != me && overlap(input, outputs[i])) input_overlaps = true;
  return run(operation, {.op = "all_gather", .device = input.device(), .result = outputs, .keep = {input},
              .timeout = operation.timeout},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               const Moved own = moved_as(input.dtype(), static_cast<size_t>(input.numel()));
               if (flat && !input_overlaps) {
                 if (own.count == 0) return;
                 check_nccl(a, a.AllGather(send, blocks[0].first, own.count, own.type, comm, stream), {},
                            "ncclAllGather", comm);
                 return;
               }
               // The input copied first where it shares bytes with another rank's block.
               StreamBuffer staged(input_overlaps ? input.nbytes() : 0, stream, {});
               const void* from = send;
               if (input_overlaps) {
                 copy_on(stream, staged.ptr, send, input.nbytes(), {});
                 from = staged.ptr;
               }
               grouped(a, comm, {}, [&] {
                 for (int i = 0; i < static_cast<int>(blocks.size()); ++i) {
                   const auto& [out, m] = blocks[i];
                   if (m.count == 0) continue;
                   check_nccl(a, a.Broadcast(i == me ? from : out, out, m.count, m.type, i, comm, stream), {},
                              "ncclBroadcast", comm);
                 }
               });
             });
}

std::shared_ptr<Work> NcclBackend::all_gather_into_tensor(const Operation& operation) {
  const Tensor& output = operation.output();
  const Tensor& input = operation.tensor();
  // In place when the input is this rank's block (NCCL allows it); any other
  // overlap goes through the list form, which stages.
  const bool in_place = input.data() == static_cast<const char*>(output.data()) + rank() * input.nbytes();
  if (!in_place && overlap(input, output)) return Backend::all_gather_into_tensor(operation);
  const Moved m = moved_as(input.dtype(), static_cast<size_t>(input.numel()));
  const void* send = input.data();
  void* recv = output.data();
  const Api& a = state_->api;
  return run(operation, {.op = "all_gather_into_tensor", .device = input.device(), .result = {output}, .keep = {input},
              .timeout = operation.timeout},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               if (m.count == 0) return;
               check_nccl(a, a.AllGather(send, recv, m.count, m.type, comm, stream), {}, "ncclAllGather", comm);
             });
}

// Grouped point-to-point: the root receives each rank's input into its
// block and copies its own.
std::shared_ptr<Work> NcclBackend::gather(const Operation& operation) {
  const std::vector<Tensor> outputs(operation.outputs.begin(), operation.outputs.end());
  const Tensor& input = operation.tensor();
  const Api& a = state_->api;
  const int me = rank(), root = operation.root, n = size();
  const Moved m = moved_as(input.dtype(), static_cast<size_t>(input.numel()));
  std::vector<void*> outs;
  for (const Tensor& o : outputs) outs.push_back(o.data());
  const void* send = input.data();
  const size_t bytes = input.nbytes();
  return run(operation, {.op = "gather", .device = input.device(), .result = outputs, .keep = {input}, .timeout = operation.timeout},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               if (m.count == 0) return;
               grouped(a, comm, {}, [&] {
                 if (me != root) {
                   check_nccl(a, a.Send(send, m.count, m.type, root, comm, stream), {}, "ncclSend", comm);
                   return;
                 }
                 for (int i = 0; i < n; ++i)
                   if (i != me)
                     check_nccl(a, a.Recv(outs[i], m.count, m.type, i, comm, stream), {}, "ncclRecv", comm);
               });
               if (me == root) copy_on(stream, outs[me], send, bytes, {});
             });
}

std::shared_ptr<Work> NcclBackend::scatter(const Operation& operation) {
  const Tensor& output = operation.output();
  const std::vector<Tensor> inputs(operation.inputs.begin(), operation.inputs.end());
  const Api& a = state_->api;
  const int me = rank(), root = operation.root, n = size();
  const Moved m = moved_as(output.dtype(), static_cast<size_t>(output.numel()));
  std::vector<const void*> ins;
  for (const Tensor& t : inputs) ins.push_back(t.data());
  void* recv = output.data();
  const size_t bytes = output.nbytes();
  return run(operation, {.op = "scatter", .device = output.device(), .result = {output}, .keep = inputs,
              .timeout = operation.timeout},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               if (m.count == 0) return;
               grouped(a, comm, {}, [&] {
                 if (me != root) {
                   check_nccl(a, a.Recv(recv, m.count, m.type, root, comm, stream), {}, "ncclRecv", comm);
                   return;
                 }
                 for (int i = 0; i < n; ++i)
                   if (i != me)
                     check_nccl(a, a.Send(ins[i], m.count, m.type, i, comm, stream), {}, "ncclSend", comm);
               });
               if (me == root) copy_on(stream, recv, ins[me], bytes, {});
             });
}

// Equal blocks in rank order apart from the output: ncclReduceScatter; else
// one ncclReduce per rank (rank i the root of block i), grouped, into a
// staging buffer where the output shares bytes with another rank's block.
std::shared_ptr<Work> NcclBackend::reduce_scatter(const Operation& operation) {
  const Tensor& output = operation.output();
  const std::vector<Tensor> inputs(operation.inputs.begin(), operation.inputs.end());
  const std::string w = where("reduce_scatter");
  const Reduced r = reduced_as(operation.reduce_op, output.dtype(), static_cast<size_t>(output.numel()), w);
  const Api& a = state_->api;
  const int me = rank();
  bool output_overlaps = false;
  for (int i = 0; i < size(); ++i)
    if (i != me && overlap(output, inputs[i])) output_overlaps = true;
  const bool flat = contiguous_equal(inputs) && !output_overlaps &&
                    (!overlap(output, inputs[me]) || output.data() == inputs[me].data());
  std::vector<const void*> ins;
  for (const Tensor& t : inputs) ins.push_back(t.data());
  void* recv = output.data();
  const size_t bytes = output.nbytes();
  const double factor = operation.reduce_op.factor();
  const DType dtype = output.dtype();
  return run(operation, {.op = "reduce_scatter", .device = output.device(), .result = {output}, .keep = inputs,
              .timeout = operation.timeout},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               if (r.count == 0) return;
               RedOp op(a, r, factor, dtype, comm, {});
               if (flat) {
                 check_nccl(a, a.ReduceScatter(ins[0], recv, r.count, r.type, op.get(), comm, stream), {},
                            "ncclReduceScatter", comm);
                 return;
               }
               StreamBuffer staged(output_overlaps ? bytes : 0, stream, {});
               void* into = output_overlaps ? staged.ptr : recv;
               grouped(a, comm, {}, [&] {
                 for (int i = 0; i < static_cast<int>(ins.size()); ++i)
                   check_nccl(a, a.Reduce(ins[i], i == me ? into : const_cast<void*>(ins[i]), r.count, r.type,
                                          op.get(), i, comm, stream),
                              {}, "ncclReduce", comm);
               });
               if (output_overlaps) copy_on(stream, recv, into, bytes, {});
             });
}

std::shared_ptr<Work> NcclBackend::reduce_scatter_tensor(const Operation& operation) {
  const Tensor& output = operation.output();
  const Tensor& input = operation.tensor();
  const bool in_place = output.data() == static_cast<const char*>(input.data()) + rank() * output.nbytes();
  if (!in_place && overlap(output, input)) return Backend::reduce_scatter_tensor(operation);
  const std::string w = where("reduce_scatter_tensor");
  const Reduced r = reduced_as(operation.reduce_op, output.dtype(), static_cast<size_t>(output.numel()), w);
  const Api& a = state_->api;
  const void* send = input.data();
  void* recv = output.data();
  const double factor = operation.reduce_op.factor();
  const DType dtype = output.dtype();
  return run(operation, {.op = "reduce_scatter_tensor", .device = output.device(), .result = {output}, .keep = {input},
              .timeout = operation.timeout},
             [=, &a](ncclComm_t comm, cudaStream_t stream) {
               if (r.count == 0) return;
               RedOp op(a, r, factor, dtype, comm, {});
               check_nccl(a, a.ReduceScatter(send, recv, r.count, r.type, op.get(), comm, stream), {},
                          "ncclReduceScatter", comm);
             });
}

// Grouped point-to-point, one send and one receive per peer, this rank's own
// part copied; inputs that share bytes with an output are staged first.
std::shared_ptr<Work> NcclBackend::all_to_all(const Operation& operation) {
  const std::vector<Tensor> outputs(operation.outputs.begin(), operation.outputs.end());
  const std::vector<Tensor> inputs(operation.inputs.begin(), operation.inputs.end());
  return exchange(operation, "all_to_all", outputs, inputs, operation.timeout);
}

std::shared_ptr<Work> NcclBackend::exchange(const Operation& operation, const char* op, const std::vector<Tensor>& outputs,
                                            const std::vector<Tensor>& inputs, std::chrono::milliseconds timeout) {  const Api& a = state_->api;
  const int me = rank();
  bool staged_in = false;
  size_t in_bytes = 0;
  for (const Tensor& i : inputs) {
    in_bytes += i.nbytes();
    for (const Tensor& o : outputs) staged_in |= overlap(i, o);
  }
  std::vector<std::pair<const void*, Moved>> ins;
  std::vector<std::pair<void*, Moved>> outs;
  for (const Tensor& t : inputs) ins.emplace_back(t.data(), moved_as(t.dtype(), static_cast<size_t>(t.numel())));
  for (const Tensor& t : outputs) outs.emplace_back(t.data(), moved_as(t.dtype(), static_cast<size_t>(t.numel())));
  std::vector<size_t> sizes;
  for (const Tensor& t : inputs) sizes.push_back(t.nbytes());
  return run(operation, {.op = op, .device = inputs[0].device(), .result = outputs, .keep = inputs, .timeout = timeout},
             [=, &a](ncclComm_t comm, cudaStream_t stream) mutable {
               StreamBuffer staging(staged_in ? in_bytes : 0, stream, {});
               if (staged_in) {
                 char* at = static_cast<char*>(staging.ptr);
                 for (size_t i = 0; i < ins.size(); ++i) {
                   copy_on(stream, at, ins[i].first, sizes[i], {});
                   ins[i].first = at;
                   at += sizes[i];
                 }
               }
               grouped(a, comm, {}, [&] {
                 for (int i = 0; i < static_cast<int>(ins.size()); ++i) {
                   if (i == me) continue;
                   if (ins[i].second.count > 0)
                     check_nccl(a, a.Send(ins[i].first, ins[i].second.count, ins[i].second.type, i, comm, stream), {},
                                "ncclSend", comm);
                   if (outs[i].second.count > 0)
                     check_nccl(a, a.Recv(outs[i].first, outs[i].second.count, outs[i].second.type, i, comm, stream),
                                {}, "ncclRecv", comm);
                 }
               });
               copy_on(stream, outs[me].first, ins[me].first, sizes[me], {});
             });
}

std::shared_ptr<Work> NcclBackend::all_to_all_single(const Operation& operation) {
  const Tensor& output = operation.output();
  const Tensor& input = operation.tensor();
  // The parts by the split sizes (rows of the first dimension), then as the list form.
  auto outs = rows_of(output, operation.output_split_sizes, size());
  auto ins = rows_of(input, operation.input_split_sizes, size());
  return exchange(operation, "all_to_all_single", outs, ins, operation.timeout);
}

std::shared_ptr<Work> NcclBackend::monitored_barrier(const Operation&) {
  throw DistBackendError(state_->label + ": backend 'nccl' does not support monitored_barrier (nor does torch's "
                         "NCCL backend: it needs host-side messages with per-rank timeouts); make the group with "
                         "\"cpu:tdist,cuda:nccl\" and monitored_barrier runs on the CPU backend");
}

void NcclBackend::start_coalescing() {
  std::lock_guard<std::mutex> lock(issue_mu_);
  if (coalescing_)
    throw DistValueError(state_->label + ": start_coalescing: a batch is open already (batches do not nest)");
  coalescing_ = true;
}

void NcclBackend::end_coalescing() {
  std::lock_guard<std::mutex> lock(issue_mu_);
  coalescing_ = false;
  if (!batch_open_) return;  // nothing was enqueued
  batch_open_ = false;
  CommState& s = *state_;
  const std::string what = s.label + ": batch_isend_irecv of " + std::to_string(batch_.size()) + " operations";
  try {
    DeviceGuard guard(s.device);
    check_nccl(s.api, s.api.GroupEnd(), what, "ncclGroupEnd", s.comm());
    for (auto& work : batch_) {
      check_cuda(cudaEventRecord(work->end_event(), s.stream), what, "cudaEventRecord");
      work->issued();
      state_->track(work);
    }
    batch_.clear();
  } catch (...) {
    auto error = std::current_exception();
    state_->fail(error);
    for (auto& work : batch_) work->finish(error);
    batch_.clear();
  }
}

// An operation of an open batch failed to enqueue: the batch is closed (NCCL
// needs its group ended) and fails whole, with the group.
void NcclBackend::fail_batch(std::exception_ptr error) {
  state_->api.GroupEnd();
  batch_open_ = false;
  for (auto& work : batch_) work->finish(error);
  batch_.clear();
}

void NcclBackend::abort(std::exception_ptr cause) {
  if (!cause)
    cause = std::make_exception_ptr(DistBackendError(state_->label + ": the process group was aborted"));
  state_->fail(cause);
}

void NcclBackend::shutdown() {
  if (!state_) return;
  std::lock_guard<std::mutex> lock(issue_mu_);
  auto cause = std::make_exception_ptr(DistBackendError(state_->label + ": the process group was destroyed"));
  if (batch_open_) fail_batch(cause);  // a batch never ended
  coalescing_ = false;
  state_->release(cause);
}

void register_backend_entry() {
  tdist::register_backend_entry(BackendEntry{"nccl",
                                             [](const std::shared_ptr<Store>& store, int rank, int size,
                                                const BackendOptions& options) {
                                               return std::make_shared<NcclBackend>(store, rank, size, options);
                                             },
                                             {DeviceType::CUDA}});
}

}  // namespace tdist::nccl

namespace tdist {

void register_nccl_backend() { nccl::register_backend_entry(); }

}  // namespace tdist
