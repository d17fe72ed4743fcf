#include "tdist/backend.h"

#include "tdist/errors.h"
#include "tensor/split.h"
#include "work/aggregate_work.h"

namespace tdist {

void Backend::unsupported(const std::string& op) const {
  throw DistBackendError("backend '" + name() + "' does not support " + op);
}

std::shared_ptr<Work> Backend::send(const Tensor&, int, const SendOptions&) { unsupported("send"); }
std::shared_ptr<Work> Backend::recv(const Tensor&, int, const RecvOptions&) { unsupported("recv"); }
void Backend::blocking_send(const Tensor& tensor, int dst, const SendOptions& opts) { send(tensor, dst, opts)->wait(); }
int Backend::blocking_recv(const Tensor& tensor, int src, const RecvOptions& opts) {
  auto work = recv(tensor, src, opts);
  work->wait();
  return work->source_rank();
}
std::shared_ptr<Work> Backend::broadcast(const Tensor&, const BroadcastOptions&) { unsupported("broadcast"); }
std::shared_ptr<Work> Backend::all_reduce(const Tensor&, const AllReduceOptions&) { unsupported("all_reduce"); }
std::shared_ptr<Work> Backend::barrier(const BarrierOptions&) { unsupported("barrier"); }

// One all_reduce per tensor, issued back to back (every rank issues the same
// ones in the same order), joined into one Work.
std::shared_ptr<Work> Backend::all_reduce_coalesced(const std::vector<Tensor>& tensors,
                                                    const AllReduceCoalescedOptions& opts) {
  std::vector<std::shared_ptr<Work>> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors)
    parts.push_back(all_reduce(t, {.op = opts.op, .timeout = opts.timeout, .async_op = opts.async_op}));
  return AggregateWork::join("all_reduce_coalesced", std::move(parts), tensors);
}
std::shared_ptr<Work> Backend::reduce(const Tensor&, const ReduceOptions&) { unsupported("reduce"); }
std::shared_ptr<Work> Backend::all_gather(const std::vector<Tensor>&, const Tensor&, const AllGatherOptions&) {
  unsupported("all_gather");
}
std::shared_ptr<Work> Backend::gather(const std::vector<Tensor>&, const Tensor&, const GatherOptions&) {
  unsupported("gather");
}
std::shared_ptr<Work> Backend::scatter(const Tensor&, const std::vector<Tensor>&, const ScatterOptions&) {
  unsupported("scatter");
}
std::shared_ptr<Work> Backend::reduce_scatter(const Tensor&, const std::vector<Tensor>&, const ReduceScatterOptions&) {
  unsupported("reduce_scatter");
}
std::shared_ptr<Work> Backend::all_to_all(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                          const AllToAllOptions&) {
  unsupported("all_to_all");
}
std::shared_ptr<Work> Backend::monitored_barrier(const MonitoredBarrierOptions&) { unsupported("monitored_barrier"); }

// The forms over one flat tensor are the list forms over its views, for
// every backend that has nothing better.
std::shared_ptr<Work> Backend::all_gather_into_tensor(const Tensor& output, const Tensor& input,
                                                      const AllGatherOptions& opts) {
  return all_gather(blocks_of(output, size()), input, opts);
}
std::shared_ptr<Work> Backend::reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                                     const ReduceScatterOptions& opts) {
  return reduce_scatter(output, blocks_of(input, size()), opts);
}
std::shared_ptr<Work> Backend::all_to_all_single(const Tensor& output, const Tensor& input,
                                                 const AllToAllOptions& opts) {
  return all_to_all(rows_of(output, opts.output_split_sizes, size()), rows_of(input, opts.input_split_sizes, size()),
                    opts);
}

}  // namespace tdist
