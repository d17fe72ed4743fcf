#include "process_group_tdist.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>

#include "../../ext/inline_call.h"
#include "convert.h"
#include "cuda_streams.h"
#include "group_names.h"
#include "store_adapter.h"
#include "tdist/distributed.h"
#include "tdist/errors.h"

namespace tdist_torch {

namespace {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;
using Works = std::vector<std::shared_ptr<tdist::Work>>;

// A bad argument, found before anything is sent (the group stays usable).
[[noreturn]] void invalid(const std::string& op, const std::string& what) {
  throw tdist::DistValueError("tdist (torch backend), " + op + ": " + what);
}

std::shared_ptr<tdist::ProcessGroup> make_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                std::chrono::milliseconds timeout, std::string group_name,
                                                std::vector<int> global_ranks) {
  tdist::ProcessGroupOptions options;
  options.backend = "tdist";
  options.timeout = timeout;
  options.group_name = std::move(group_name);
  options.global_ranks = std::move(global_ranks);
  return std::make_shared<tdist::ProcessGroup>(std::make_shared<C10dStoreAdapter>(store), rank, size,
                                               std::move(options));
}

// torch's blocking calls (opts.asyncOp false) run their operation on the
// calling thread, Ctrl-C kept (python/ext/inline_call.h); async ones go to
// the group's progress thread. torch calls a backend without the GIL: this
// takes it for the moments that need it (arming and ending the watch).
class Blocking {
 public:
  Blocking(bool async_op, const std::shared_ptr<tdist::ProcessGroup>& group, const char* op, tdist::Device device) {
    if (async_op || !Py_IsInitialized()) return;
    pybind11::gil_scoped_acquire gil;
    call_.emplace(group, op, device);
    if (!call_->runs_inline()) call_.reset();
  }
  ~Blocking() {
    if (!call_) return;
    pybind11::gil_scoped_acquire gil;
    call_.reset();
  }
  Blocking(const Blocking&) = delete;
  Blocking& operator=(const Blocking&) = delete;

  // What to issue the operation with.
  bool async_op() const { return !call_; }
  // Call once the operation returned: whether a Ctrl-C failed the group meanwhile.
  bool interrupted() {
    if (!call_) return false;
    pybind11::gil_scoped_acquire gil;
    const bool fired = call_->finish();
    call_.reset();
    return fired;
  }

 private:
  std::optional<tdist_py::InlineCall> call_;
};

// The Work of a blocking call's operation, told whether a Ctrl-C ended it.
WorkPtr interrupted_if(c10::intrusive_ptr<WorkTdist> work, bool interrupted) {
  if (interrupted) work->mark_interrupted();
  return work;
}

}  // namespace

ProcessGroupTdist::ProcessGroupTdist(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     std::chrono::milliseconds timeout, std::string group_name,
                                     std::vector<int> global_ranks)
    : c10d::Backend(rank, size),
      timeout_(timeout),
      pg_(make_group(store, rank, size, timeout, std::move(group_name), std::move(global_ranks))),
      label_(label_of(*pg_)) {
  init();  // torch's logging hook for backends
}

ProcessGroupTdist::ProcessGroupTdist(std::shared_ptr<tdist::ProcessGroup> pg, std::chrono::milliseconds timeout)
    : c10d::Backend(pg->rank(), pg->size()), timeout_(timeout), pg_(std::move(pg)), label_(label_of(*pg_)) {
  init();
}

ProcessGroupTdist::~ProcessGroupTdist() {
  // Fail what is still pending, then let go of its tensors (in_flight_ dies after pg_).
  pg_->shutdown();
}

c10::intrusive_ptr<WorkTdist> ProcessGroupTdist::track(c10d::OpType type, const char* op,
                                                        std::shared_ptr<ProfilerSpan> span, Works works,
                                                        std::vector<at::Tensor> outputs,
                                                        std::vector<at::Tensor> inputs) {
  auto work = c10::make_intrusive<WorkTdist>(rank_, type, op, std::move(works), std::move(outputs), std::move(inputs),
                                             std::move(span), pg_);
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(), [](auto& w) { return w->settled(); }),
                   in_flight_.end());
  if (!work->settled()) in_flight_.push_back(work);
  if (!c10d::isP2POp(type)) ++collectives_;
  return work;
}

uint64_t ProcessGroupTdist::getSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lock(mu_);
  return collectives_;
}

const at::Tensor& ProcessGroupTdist::single(const std::vector<at::Tensor>& tensors, const std::string& op,
                                            const char* what) const {
  if (tensors.size() != 1)
    invalid(op, "expects exactly one " + std::string(what) + " per process, got " + std::to_string(tensors.size()));
  return tensors.front();
}

std::string ProcessGroupTdist::label_of(const tdist::ProcessGroup& pg) {
  // As the C++ library's labels: the global rank, and the group's C++ name.
  return "rank " + std::to_string(pg.global_rank(pg.rank())) + " in group " + pg.group_name() + ": ";
}

std::string ProcessGroupTdist::where(const char* op) const {
  // Every call builds it (the errors of its arguments start with it): one
  // allocation, from the label made once.
  std::string s;
  s.reserve(label_.size() + std::char_traits<char>::length(op));
  s += label_;
  s += op;
  return s;
}

int ProcessGroupTdist::root(int64_t rank, const std::string& op, const char* what) const {
  if (rank < 0 || rank >= size_)
    invalid(op, std::string(what) + " rank " + std::to_string(rank) + " is outside [0, " + std::to_string(size_) + ")");
  return static_cast<int>(rank);
}

namespace {
// torch's per-call timeout (every c10d options struct has one); unset: the group's.
template <typename Options>
std::chrono::milliseconds timeout_of(const Options& opts) {
  return opts.timeout == c10d::kUnsetTimeout ? tdist::kGroupTimeout : opts.timeout;
}
}  // namespace

WorkPtr ProcessGroupTdist::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const char* name = "broadcast";
  const std::string op = where(name);
  const at::Tensor& t = single(tensors, op, "tensor");
  if (opts.rootTensor != 0) invalid(op, "rootTensor must be 0");
  const int r = root(opts.rootRank, op, "source");
  const TorchStreamScope streams(cuda_device_of(tensors));
  auto span = ProfilerSpan::open(name, tensors);
  const tdist::Tensor view = to_view(t, op);
  Blocking blocking(opts.asyncOp, pg_, name, view.device());
  auto w = pg_->broadcast(view, {.root = r, .timeout = timeout_of(opts), .async_op = blocking.async_op()});
  const bool interrupted = blocking.interrupted();
  return interrupted_if(track(c10d::OpType::BROADCAST, name, std::move(span), {w}, tensors), interrupted);
}

WorkPtr ProcessGroupTdist::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const char* name = "all_reduce";
  const std::string op = where(name);
  const at::Tensor& t = single(tensors, op, "tensor");
  const TorchStreamScope streams(cuda_device_of(tensors));
  auto span = ProfilerSpan::open(name, tensors);
  if (t.defined() && t.layout() == c10::kSparse) return sparse_all_reduce(tensors, opts, std::move(span));
  const tdist::Tensor view = to_view(t, op);
  const tdist::AllReduceOptions options{.op = to_reduce_op(opts.reduceOp, op), .timeout = timeout_of(opts)};
  Blocking blocking(opts.asyncOp, pg_, name, view.device());
  auto w = pg_->all_reduce(view, {.op = options.op, .timeout = options.timeout, .async_op = blocking.async_op()});
  const bool interrupted = blocking.interrupted();
  return interrupted_if(track(c10d::OpType::ALLREDUCE, name, std::move(span), {w}, tensors), interrupted);
}

// Gloo's sparse all_reduce: every rank's coalesced indices and values are
// gathered (their counts first), summed as one sparse tensor, coalesced, and
// copied into the caller's tensor. The gathered sizes decide the later
// buffers, so this runs to completion before it returns (its Work is complete).
WorkPtr ProcessGroupTdist::allreduce_sparse(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, where("all_reduce"), "tensor");
  if (t.defined() && t.layout() != c10::kSparse) return allreduce(tensors, opts);
  return sparse_all_reduce(tensors, opts, ProfilerSpan::open("all_reduce", tensors));
}

WorkPtr ProcessGroupTdist::sparse_all_reduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts,
                                             std::shared_ptr<ProfilerSpan> span) {
  const char* name = "all_reduce";
  const std::string op = where(name) + " (sparse)";
  at::Tensor& t = tensors.front();
  if (opts.reduceOp != c10d::ReduceOp::SUM)
    invalid(op, "sparse tensors are reduced with ReduceOp.SUM only (as Gloo)");
  if (!t.device().is_cpu()) invalid(op, "tensor is on " + t.device().str() + "; the tdist backend reduces sparse tensors on the CPU only");
  const auto timeout = timeout_of(opts);
  const at::Tensor input = t.coalesce();
  const at::Tensor indices = input._indices().contiguous();
  const at::Tensor values = input._values().contiguous();
  to_dtype(values.scalar_type(), op);  // a dtype tdist carries, checked before anything is sent
  const int64_t ndim = input.dim();

  // Every rank's nnz, sparse and dense dimensions and shape: all ranks see the
  // same table, so they all accept it or all fail alike.
  at::Tensor header = at::tensor(std::vector<int64_t>{input._nnz(), input.sparse_dim(), input.dense_dim(), ndim});
  at::Tensor headers = at::empty({size_ * 4}, at::kLong);
  pg_->all_gather_into_tensor(to_view(headers, op), to_view(header, op), {.timeout = timeout, .async_op = false})
      ->wait();
  std::vector<int64_t> nnz(size_);
  for (int r = 0; r < size_; ++r) {
    nnz[r] = headers[r * 4].item<int64_t>();
    for (int k = 1; k < 4; ++k)
      if (headers[r * 4 + k].item<int64_t>() != header[k].item<int64_t>())
        invalid(op, "rank " + std::to_string(r) + "'s sparse tensor has " +
                        std::to_string(headers[r * 4 + 1].item<int64_t>()) + " sparse and " +
                        std::to_string(headers[r * 4 + 2].item<int64_t>()) + " dense of " +
                        std::to_string(headers[r * 4 + 3].item<int64_t>()) + " dimensions, this rank's " +
                        std::to_string(input.sparse_dim()) + " and " + std::to_string(input.dense_dim()) + " of " +
                        std::to_string(ndim));
  }
  at::Tensor shape = at::tensor(std::vector<int64_t>(input.sizes().begin(), input.sizes().end()), at::kLong);
  at::Tensor shapes = at::empty({size_ * ndim}, at::kLong);
  if (ndim > 0)
    pg_->all_gather_into_tensor(to_view(shapes, op), to_view(shape, op), {.timeout = timeout, .async_op = false})
        ->wait();
  if (!shapes.view({size_, ndim}).eq(shape.view({1, ndim})).all().item<bool>())
    invalid(op, "the ranks' sparse tensors differ in shape (this rank's is " + std::to_string(ndim) + "-d " +
                    c10::str(input.sizes()) + ")");

  // Their indices and values, of each rank's own length.
  const int64_t sparse_dim = input.sparse_dim();
  std::vector<at::Tensor> all_indices, all_values;
  for (int r = 0; r < size_; ++r) {
    all_indices.push_back(at::empty({sparse_dim, nnz[r]}, indices.options()));
    std::vector<int64_t> value_shape(values.sizes().begin(), values.sizes().end());
    value_shape[0] = nnz[r];
    all_values.push_back(at::empty(value_shape, values.options()));
  }
  Works works;
  works.push_back(pg_->all_gather(to_views(all_indices, op, "indices"), to_view(indices, op, "indices"),
                                  {.timeout = timeout}));
  works.push_back(pg_->all_gather(to_views(all_values, op, "values"), to_view(values, op, "values"),
                                  {.timeout = timeout}));
  for (auto& w : works) w->wait();
  at::Tensor sum = at::sparse_coo_tensor(at::cat(all_indices, 1), at::cat(all_values, 0), input.sizes(),
                                         input.options())
                       .coalesce();
  t.copy_(sum);
  return track(c10d::OpType::ALLREDUCE, name, std::move(span), std::move(works), tensors);
}

WorkPtr ProcessGroupTdist::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                               const c10d::AllreduceCoalescedOptions& opts) {
  const char* name = "all_reduce_coalesced";
  const std::string op = where(name);
  if (tensors.empty()) invalid(op, "no tensors given");
  // As Gloo: one dtype for all (the front checks it too; this names the torch types).
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].defined() && tensors[0].defined() && tensors[i].scalar_type() != tensors[0].scalar_type())
      invalid(op, "tensor " + std::to_string(i) + " is " + c10::toString(tensors[i].scalar_type()) + ", tensor 0 " +
                      c10::toString(tensors[0].scalar_type()) + ": the tensors must all have the same dtype");
  auto views = to_views(tensors, op, "tensor");
  const TorchStreamScope streams(cuda_device_of(tensors));
  auto span = ProfilerSpan::open(name, tensors);
  auto w = pg_->all_reduce_coalesced(views, {.op = to_reduce_op(opts.reduceOp, op), .timeout = timeout_of(opts)});
  return track(c10d::OpType::ALLREDUCE_COALESCED, name, std::move(span), {w}, tensors);
}

WorkPtr ProcessGroupTdist::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const char* name = "reduce";
  const std::string op = where(name);
  const at::Tensor& t = single(tensors, op, "tensor");
  if (opts.rootTensor != 0) invalid(op, "rootTensor must be 0");
  const tdist::ReduceOptions options{.root = root(opts.rootRank, op, "destination"),
                                     .op = to_reduce_op(opts.reduceOp, op),
                                     .timeout = timeout_of(opts)};
  const TorchStreamScope streams(cuda_device_of(tensors));
  auto span = ProfilerSpan::open(name, tensors);
  const tdist::Tensor view = to_view(t, op);
  Blocking blocking(opts.asyncOp, pg_, name, view.device());
  auto w = pg_->reduce(view, {.root = options.root, .op = options.op, .timeout = options.timeout,
                              .async_op = blocking.async_op()});
  const bool interrupted = blocking.interrupted();
  return interrupted_if(track(c10d::OpType::REDUCE, name, std::move(span), {w}, tensors), interrupted);
}

WorkPtr ProcessGroupTdist::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                     const c10d::AllgatherOptions& opts) {
  const char* name = "all_gather";
  const std::string op = where(name);
  const at::Tensor& in = single(inputs, op, "input tensor");
  if (outputs.size() != 1)
    invalid(op, "expects exactly one output list per process, got " + std::to_string(outputs.size()));
  auto out_views = to_views(outputs[0], op, "output tensor");
  auto in_view = to_view(in, op, "input tensor");
  const TorchStreamScope streams(cuda_device_of(inputs));
  auto span = ProfilerSpan::open(name, inputs);
  Blocking blocking(opts.asyncOp, pg_, name, in_view.device());
  auto w = pg_->all_gather(out_views, in_view, {.timeout = timeout_of(opts), .async_op = blocking.async_op()});
  const bool interrupted = blocking.interrupted();
  return interrupted_if(track(c10d::OpType::ALLGATHER, name, std::move(span), {w}, outputs[0], inputs), interrupted);
}

WorkPtr ProcessGroupTdist::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const char* name = "all_gather_into_tensor";
  const std::string op = where(name);
  auto out_view = to_view(output, op, "output tensor");
  auto in_view = to_view(input, op, "input tensor");
  const TorchStreamScope streams(cuda_device_of(input));
  auto span = ProfilerSpan::open(name, input);
  Blocking blocking(opts.asyncOp, pg_, name, in_view.device());
  auto w = pg_->all_gather_into_tensor(out_view, in_view, {.timeout = timeout_of(opts), .async_op = blocking.async_op()});
  const bool interrupted = blocking.interrupted();
  return interrupted_if(track(c10d::OpType::_ALLGATHER_BASE, name, std::move(span), {w}, {output}, {input}),
                        interrupted);
}

WorkPtr ProcessGroupTdist::allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_lists,
                                               std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  const char* name = "all_gather_coalesced";
  const std::string op = where(name);
  // output_lists[r][j] receives input j of rank r: one tdist operation, whose
  // outputs are input-major (input j of rank r at j * size + r).
  if (output_lists.size() != static_cast<size_t>(size_))
    invalid(op, "expects one output list per rank (" + std::to_string(size_) + "), got " +
                    std::to_string(output_lists.size()));
  const size_t n = output_lists.size();
  std::vector<tdist::Tensor> out_views(inputs.size() * n);
  for (size_t r = 0; r < n; ++r) {
    if (output_lists[r].size() != inputs.size())
      invalid(op, "output list " + std::to_string(r) + " has " + std::to_string(output_lists[r].size()) +
                      " tensors for " + std::to_string(inputs.size()) + " inputs");
    for (size_t j = 0; j < inputs.size(); ++j)
      out_views[j * n + r] =
          to_view(output_lists[r][j], op, "output tensor [" + std::to_string(r) + "][" + std::to_string(j) + "]");
  }
  auto in_views = to_views(inputs, op, "input tensor");
  const TorchStreamScope streams(cuda_device_of(inputs));
  auto span = ProfilerSpan::open(name, inputs);
  auto w = pg_->issue({.kind = tdist::OpKind::AllGatherCoalesced, .inputs = in_views, .outputs = out_views,
                       .timeout = timeout_of(opts), .async_op = true});
  std::vector<at::Tensor> outputs;
  for (auto& list : output_lists) outputs.insert(outputs.end(), list.begin(), list.end());
  return track(c10d::OpType::ALLGATHER_COALESCED, name, std::move(span), {w}, std::move(outputs), inputs);
}

WorkPtr ProcessGroupTdist::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                  const c10d::GatherOptions& opts) {
  const char* name = "gather";
  const std::string op = where(name);
  const at::Tensor& in = single(inputs, op, "input tensor");
  int r = root(opts.rootRank, op, "destination");
  std::vector<at::Tensor> out;
  if (r == rank_) {
    if (outputs.size() != 1)
      invalid(op, "the destination expects exactly one output list, got " + std::to_string(outputs.size()));
    out = outputs[0];
  } else if (!outputs.empty() && !outputs[0].empty()) {
    invalid(op, "only the destination (rank " + std::to_string(r) + ") passes an output list");
  }
  auto out_views = to_views(out, op, "output tensor");
  auto in_view = to_view(in, op, "input tensor");
  const TorchStreamScope streams(cuda_device_of(inputs));
  auto span = ProfilerSpan::open(name, inputs);
  auto w = pg_->gather(out_views, in_view, {.root = r, .timeout = timeout_of(opts)});
  return track(c10d::OpType::GATHER, name, std::move(span), {w}, out, inputs);
}

WorkPtr ProcessGroupTdist::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                   const c10d::ScatterOptions& opts) {
  const char* name = "scatter";
  const std::string op = where(name);
  const at::Tensor& out = single(outputs, op, "output tensor");
  int r = root(opts.rootRank, op, "source");
  std::vector<at::Tensor> in;
  if (r == rank_) {
    if (inputs.size() != 1)
      invalid(op, "the source expects exactly one input list, got " + std::to_string(inputs.size()));
    in = inputs[0];
  } else if (!inputs.empty() && !inputs[0].empty()) {
    invalid(op, "only the source (rank " + std::to_string(r) + ") passes an input list");
  }
  auto out_view = to_view(out, op, "output tensor");
  auto in_views = to_views(in, op, "input tensor");
  const TorchStreamScope streams(cuda_device_of(outputs));
  auto span = ProfilerSpan::open(name, in);  // the source's tensors; none elsewhere (as Gloo)
  auto w = pg_->scatter(out_view, in_views, {.root = r, .timeout = timeout_of(opts)});
  return track(c10d::OpType::SCATTER, name, std::move(span), {w}, outputs, in);
}

WorkPtr ProcessGroupTdist::reduce_scatter(std::vector<at::Tensor>& outputs,
                                          std::vector<std::vector<at::Tensor>>& inputs,
                                          const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter";
  const std::string op = where(name);
  const at::Tensor& out = single(outputs, op, "output tensor");
  if (inputs.size() != 1)
    invalid(op, "expects exactly one input list per process, got " + std::to_string(inputs.size()));
  auto out_view = to_view(out, op, "output tensor");
  auto in_views = to_views(inputs[0], op, "input tensor");
  const tdist::ReduceScatterOptions options{.op = to_reduce_op(opts.reduceOp, op), .timeout = timeout_of(opts)};
  const TorchStreamScope streams(cuda_device_of(inputs[0]));
  auto span = ProfilerSpan::open(name, inputs[0]);
  auto w = pg_->reduce_scatter(out_view, in_views, options);
  return track(c10d::OpType::REDUCE_SCATTER, name, std::move(span), {w}, outputs, inputs[0]);
}

WorkPtr ProcessGroupTdist::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor";
  const std::string op = where(name);
  auto out_view = to_view(output, op, "output tensor");
  auto in_view = to_view(input, op, "input tensor");
  const tdist::ReduceScatterOptions options{.op = to_reduce_op(opts.reduceOp, op), .timeout = timeout_of(opts)};
  const TorchStreamScope streams(cuda_device_of(input));
  auto span = ProfilerSpan::open(name, input);
  Blocking blocking(opts.asyncOp, pg_, name, in_view.device());
  auto w = pg_->reduce_scatter_tensor(out_view, in_view,
                                      {.op = options.op, .timeout = options.timeout, .async_op = blocking.async_op()});
  const bool interrupted = blocking.interrupted();
  return interrupted_if(track(c10d::OpType::_REDUCE_SCATTER_BASE, name, std::move(span), {w}, {output}, {input}),
                        interrupted);
}

WorkPtr ProcessGroupTdist::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                         std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all_single";
  const std::string op = where(name);
  auto out_view = to_view(output, op, "output tensor");
  auto in_view = to_view(input, op, "input tensor");
  const TorchStreamScope streams(cuda_device_of(input));
  auto span = ProfilerSpan::open(name, input);
  auto w = pg_->all_to_all_single(
      out_view, in_view,
      {.output_split_sizes = output_splits, .input_split_sizes = input_splits, .timeout = timeout_of(opts)});
  return track(c10d::OpType::ALLTOALL_BASE, name, std::move(span), {w}, {output}, {input});
}

WorkPtr ProcessGroupTdist::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                    const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all";
  const std::string op = where(name);
  auto out_views = to_views(outputs, op, "output tensor");
  auto in_views = to_views(inputs, op, "input tensor");
  const TorchStreamScope streams(cuda_device_of(inputs));
  auto span = ProfilerSpan::open(name, inputs);
  auto w = pg_->all_to_all(out_views, in_views, {.timeout = timeout_of(opts)});
  return track(c10d::OpType::ALLTOALL, name, std::move(span), {w}, outputs, inputs);
}

WorkPtr ProcessGroupTdist::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const char* name = "send";
  const std::string op = where(name);
  const at::Tensor& t = single(tensors, op, "tensor");
  auto view = to_view(t, op);
  const int peer = root(dst, op, "destination");
  const TorchStreamScope streams(cuda_device_of(tensors));
  auto span = ProfilerSpan::open(name, tensors);
  auto w = pg_->send(view, peer, tag);
  return track(c10d::OpType::SEND, name, std::move(span), {w}, {}, tensors);
}

WorkPtr ProcessGroupTdist::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  const char* name = "recv";
  const std::string op = where(name);
  const at::Tensor& t = single(tensors, op, "tensor");
  auto view = to_view(t, op);
  const int peer = root(src, op, "source");
  const TorchStreamScope streams(cuda_device_of(tensors));
  auto span = ProfilerSpan::open(name, tensors);
  auto w = pg_->recv(view, peer, tag);
  return track(c10d::OpType::RECV, name, std::move(span), {w}, tensors);
}

WorkPtr ProcessGroupTdist::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const char* name = "recv";
  const std::string op = where(name);
  const at::Tensor& t = single(tensors, op, "tensor");
  auto view = to_view(t, op);
  // Gloo's title for a receive from any source ("gloo:recvAnySource"), which torch's own
  // tests count apart from "recv" (distributed_test's _test_send_recv_any_source).
  const TorchStreamScope streams(cuda_device_of(tensors));
  auto span = ProfilerSpan::open("recvAnySource", tensors);
  auto w = pg_->recv(view, tdist::kAnySource, tag);
  return track(c10d::OpType::RECVANYSOURCE, name, std::move(span), {w}, tensors);
}

WorkPtr ProcessGroupTdist::barrier(const c10d::BarrierOptions& opts) {
  auto span = ProfilerSpan::open("barrier", {});
  Blocking blocking(opts.asyncOp, pg_, "barrier", {});
  auto w = pg_->barrier({.timeout = timeout_of(opts), .async_op = blocking.async_op()});
  const bool interrupted = blocking.interrupted();
  return interrupted_if(track(c10d::OpType::BARRIER, "barrier", std::move(span), {w}, {}), interrupted);
}

void ProcessGroupTdist::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  auto span = ProfilerSpan::open("monitored_barrier", {});
  auto work = track(c10d::OpType::BARRIER, "monitored_barrier", std::move(span),
                    {pg_->monitored_barrier({.timeout = timeout_of(opts), .wait_all_ranks = wait_all_ranks})}, {});
  work->wait(c10d::Store::kNoTimeout);
}

namespace {
// Views of the output and input tensors of a coalesced operation, pair i
// being one operation's; one output per input.
std::pair<std::vector<tdist::Tensor>, std::vector<tdist::Tensor>> paired_views(const std::vector<at::Tensor>& outputs,
                                                                               const std::vector<at::Tensor>& inputs,
                                                                               const std::string& op) {
  if (outputs.size() != inputs.size())
    invalid(op, std::to_string(outputs.size()) + " output tensors for " + std::to_string(inputs.size()) + " inputs");
  return {to_views(outputs, op, "output tensor"), to_views(inputs, op, "input tensor")};
}
}  // namespace

WorkPtr ProcessGroupTdist::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  const char* name = "all_gather_into_tensor_coalesced";
  const std::string op = where(name);
  auto [out_views, in_views] = paired_views(outputs, inputs, op);
  const TorchStreamScope streams(cuda_device_of(inputs));
  auto span = ProfilerSpan::open(name, inputs);
  Works works;
  for (size_t i = 0; i < inputs.size(); ++i)
    works.push_back(pg_->all_gather_into_tensor(out_views[i], in_views[i], {.timeout = timeout_of(opts)}));
  return track(c10d::OpType::COALESCED, name, std::move(span), std::move(works), outputs, inputs);
}

WorkPtr ProcessGroupTdist::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor_coalesced";
  const std::string op = where(name);
  auto [out_views, in_views] = paired_views(outputs, inputs, op);
  const tdist::ReduceScatterOptions options{.op = to_reduce_op(opts.reduceOp, op), .timeout = timeout_of(opts)};
  const TorchStreamScope streams(cuda_device_of(inputs));
  auto span = ProfilerSpan::open(name, inputs);
  Works works;
  for (size_t i = 0; i < inputs.size(); ++i)
    works.push_back(pg_->reduce_scatter_tensor(out_views[i], in_views[i], options));
  return track(c10d::OpType::COALESCED, name, std::move(span), std::move(works), outputs, inputs);
}

#ifdef TDIST_TORCH_HAS_GATHER_INTO_TENSOR
WorkPtr ProcessGroupTdist::gather_into_tensor(at::Tensor& output, at::Tensor& input, const c10d::GatherOptions& opts) {
  const char* name = "gather_into_tensor";
  const std::string op = where(name);
  const int r = root(opts.rootRank, op, "destination");
  auto in_view = to_view(input, op, "input tensor");
  std::vector<tdist::Tensor> out_views;
  if (r == rank_) {
    // The destination's flat output holds world_size inputs back to back.
    to_view(output, op, "output tensor");  // dense, contiguous and on a device served, or DistValueError
    if (output.numel() != input.numel() * size_)
      invalid(op, "output tensor has " + std::to_string(output.numel()) + " elements, not world_size (" +
                      std::to_string(size_) + ") x the input's " + std::to_string(input.numel()));
    if (output.scalar_type() != input.scalar_type())
      invalid(op, std::string("output tensor is ") + c10::toString(output.scalar_type()) + ", input tensor " +
                      c10::toString(input.scalar_type()));
    at::Tensor flat = output.view({size_, input.numel()});
    for (int i = 0; i < size_; ++i) out_views.push_back(to_view(flat[i], op, "output tensor"));
  }
  const TorchStreamScope streams(cuda_device_of(input));
  auto span = ProfilerSpan::open(name, input);
  auto w = pg_->gather(out_views, in_view, {.root = r, .timeout = timeout_of(opts)});
  return track(c10d::OpType::GATHER, name, std::move(span), {w}, {output}, {input});
}
#endif  // TDIST_TORCH_HAS_GATHER_INTO_TENSOR

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupTdist::getBackendOptions() {
  auto options = c10::make_intrusive<c10d::Backend::Options>("tdist", timeout_);
  options->group_name = pg_->group_name();
  for (int r = 0; r < size_; ++r) options->global_ranks_in_group.push_back(pg_->global_rank(r));
  return options;
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupTdist::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                           const std::vector<int>& ranks,
                                                           const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  const std::string op = where("split_group");
  auto me = std::find(ranks.begin(), ranks.end(), rank_);
  for (int r : ranks)
    if (r < 0 || r >= size_)
      invalid(op, "rank " + std::to_string(r) + " is outside this group's [0, " + std::to_string(size_) + ")");
  if (me == ranks.end()) return nullptr;
  std::vector<int> global;
  for (int r : ranks) global.push_back(pg_->global_rank(r));
  const auto timeout = opts && opts->timeout.count() > 0 ? opts->timeout : timeout_;
  std::string name = group_name_for(global);
  return c10::make_intrusive<ProcessGroupTdist>(store, static_cast<int>(me - ranks.begin()),
                                                static_cast<int>(ranks.size()), timeout, std::move(name),
                                                std::move(global));
}

void ProcessGroupTdist::abort() {
  pg_->abort(std::make_exception_ptr(tdist::DistBackendError(where("abort") + ": the process group was aborted")));
}

void ProcessGroupTdist::shutdown() { pg_->shutdown(); }

c10::intrusive_ptr<c10d::Backend> ProcessGroupTdist::shrink(const std::vector<int64_t>& ranks_to_exclude,
                                                            int shrink_flags,
                                                            const c10::intrusive_ptr<Options>& /*opts_override*/) {
  std::vector<int> excluded(ranks_to_exclude.begin(), ranks_to_exclude.end());
  std::shared_ptr<tdist::ProcessGroup> shrunk = tdist::shrink_group(excluded, pg_, shrink_flags);
  return c10::make_intrusive<ProcessGroupTdist>(std::move(shrunk), timeout_);
}

std::vector<int> ProcessGroupTdist::failed_ranks(std::chrono::milliseconds silence) {
  return tdist::failed_ranks(pg_, silence);
}

}  // namespace tdist_torch
