#include "tdist/backend.h"

#include "tdist/errors.h"
#include "tensor/split.h"
#include "work/aggregate_work.h"

namespace tdist {

void Backend::unsupported(const std::string& op) const {
  throw DistBackendError("backend '" + name() + "' does not support " + op);
}

std::vector<int> Backend::failed_ranks(std::chrono::milliseconds) {
  throw DistBackendError("backend '" + name() + "' cannot tell which ranks failed (failed_ranks; the tdist "
                         "backend can)");
}

namespace {

// A part of a composite operation: its own arguments, the whole's timeout
// and async_op. It has no flight recorder entry of its own: the front ends
// the whole's entry from the joined Work.
Operation part_of(const Operation& whole, OpKind kind) {
  return Operation{.kind = kind, .reduce_op = whole.reduce_op, .device = whole.device, .timeout = whole.timeout,
                   .async_op = whole.async_op};
}

// One all_gather per input tensor, issued back to back (every rank issues
// the same ones in the same order), joined into one Work.
std::shared_ptr<Work> all_gather_each(Backend& backend, const Operation& op) {
  const size_t n = static_cast<size_t>(backend.size());
  std::vector<std::shared_ptr<Work>> parts;
  parts.reserve(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    Operation part = part_of(op, OpKind::AllGather);
    part.inputs = op.inputs.subspan(i, 1);
    part.outputs = op.outputs.subspan(i * n, n);
    parts.push_back(backend.all_gather(part));
  }
  return AggregateWork::join(op.name(), std::move(parts), std::vector<Tensor>(op.outputs.begin(), op.outputs.end()));
}

}  // namespace

// The per-kind dispatch: one switch on the path of every operation, where
// the front once called each method by name.
std::shared_ptr<Work> Backend::run(const Operation& op) {
  switch (op.kind) {
    case OpKind::Send: return send(op);
    case OpKind::Recv: return recv(op);
    case OpKind::Broadcast: return broadcast(op);
    case OpKind::AllReduce: return all_reduce(op);
    case OpKind::AllReduceCoalesced: return all_reduce_coalesced(op);
    case OpKind::Barrier: return barrier(op);
    case OpKind::MonitoredBarrier: return monitored_barrier(op);
    case OpKind::Reduce: return reduce(op);
    case OpKind::AllGather: return all_gather(op);
    case OpKind::AllGatherIntoTensor: return all_gather_into_tensor(op);
    case OpKind::Gather: return gather(op);
    case OpKind::Scatter: return scatter(op);
    case OpKind::ReduceScatter: return reduce_scatter(op);
    case OpKind::ReduceScatterTensor: return reduce_scatter_tensor(op);
    case OpKind::AllToAll: return all_to_all(op);
    case OpKind::AllToAllSingle: return all_to_all_single(op);
    // Composites: built here from the operations every backend carries.
    case OpKind::AllGatherCoalesced: return all_gather_each(*this, op);
  }
  unsupported(op.name());
}

std::shared_ptr<Work> Backend::send(const Operation&) { unsupported("send"); }
std::shared_ptr<Work> Backend::recv(const Operation&) { unsupported("recv"); }
void Backend::blocking_send(const Operation& op) { send(op)->wait(); }
int Backend::blocking_recv(const Operation& op) {
  auto work = recv(op);
  work->wait();
  return work->source_rank();
}
std::shared_ptr<Work> Backend::broadcast(const Operation&) { unsupported("broadcast"); }
std::shared_ptr<Work> Backend::all_reduce(const Operation&) { unsupported("all_reduce"); }
std::shared_ptr<Work> Backend::barrier(const Operation&) { unsupported("barrier"); }

// One all_reduce per tensor, issued back to back (every rank issues the same
// ones in the same order), joined into one Work.
std::shared_ptr<Work> Backend::all_reduce_coalesced(const Operation& op) {
  std::vector<std::shared_ptr<Work>> parts;
  parts.reserve(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    Operation part = part_of(op, OpKind::AllReduce);
    part.inputs = op.inputs.subspan(i, 1);
    parts.push_back(all_reduce(part));
  }
  return AggregateWork::join(op.name(), std::move(parts), std::vector<Tensor>(op.inputs.begin(), op.inputs.end()));
}
std::shared_ptr<Work> Backend::reduce(const Operation&) { unsupported("reduce"); }
std::shared_ptr<Work> Backend::all_gather(const Operation&) { unsupported("all_gather"); }
std::shared_ptr<Work> Backend::gather(const Operation&) { unsupported("gather"); }
std::shared_ptr<Work> Backend::scatter(const Operation&) { unsupported("scatter"); }
std::shared_ptr<Work> Backend::reduce_scatter(const Operation&) { unsupported("reduce_scatter"); }
std::shared_ptr<Work> Backend::all_to_all(const Operation&) { unsupported("all_to_all"); }
std::shared_ptr<Work> Backend::monitored_barrier(const Operation&) { unsupported("monitored_barrier"); }

// The forms over one flat tensor are the list forms over its views, for
// every backend that has nothing better. The views are the whole's parts
// (its flight recorder entry included): one operation either way.
std::shared_ptr<Work> Backend::all_gather_into_tensor(const Operation& op) {
  const std::vector<Tensor> blocks = blocks_of(op.output(), size());
  Operation list = op;
  list.kind = OpKind::AllGather;
  list.outputs = blocks;
  return all_gather(list);
}
std::shared_ptr<Work> Backend::reduce_scatter_tensor(const Operation& op) {
  const std::vector<Tensor> blocks = blocks_of(op.tensor(), size());
  Operation list = op;
  list.kind = OpKind::ReduceScatter;
  list.inputs = blocks;
  return reduce_scatter(list);
}
std::shared_ptr<Work> Backend::all_to_all_single(const Operation& op) {
  const std::vector<Tensor> outs = rows_of(op.output(), op.output_split_sizes, size());
  const std::vector<Tensor> ins = rows_of(op.tensor(), op.input_split_sizes, size());
  Operation list = op;
  list.kind = OpKind::AllToAll;
  list.outputs = outs;
  list.inputs = ins;
  return all_to_all(list);
}

}  // namespace tdist
