#include "tdist/backend.h"

#include "tdist/errors.h"

namespace tdist {

void Backend::unsupported(const std::string& op) const {
  throw DistBackendError("backend '" + name() + "' does not support " + op);
}

std::shared_ptr<Work> Backend::send(const Tensor&, int, int) { unsupported("send"); }
std::shared_ptr<Work> Backend::recv(const Tensor&, int, int) { unsupported("recv"); }
void Backend::blocking_send(const Tensor& tensor, int dst, int tag) { send(tensor, dst, tag)->wait(); }
int Backend::blocking_recv(const Tensor& tensor, int src, int tag) {
  auto work = recv(tensor, src, tag);
  work->wait();
  return work->source_rank();
}
std::shared_ptr<Work> Backend::broadcast(const Tensor&, int) { unsupported("broadcast"); }
std::shared_ptr<Work> Backend::all_reduce(const Tensor&, ReduceOp) { unsupported("all_reduce"); }
std::shared_ptr<Work> Backend::barrier() { unsupported("barrier"); }
std::shared_ptr<Work> Backend::reduce(const Tensor&, int, ReduceOp) { unsupported("reduce"); }
std::shared_ptr<Work> Backend::all_gather(const std::vector<Tensor>&, const Tensor&) { unsupported("all_gather"); }
std::shared_ptr<Work> Backend::all_gather_into_tensor(const Tensor&, const Tensor&) {
  unsupported("all_gather_into_tensor");
}
std::shared_ptr<Work> Backend::gather(const std::vector<Tensor>&, const Tensor&, int) { unsupported("gather"); }
std::shared_ptr<Work> Backend::scatter(const Tensor&, const std::vector<Tensor>&, int) { unsupported("scatter"); }
std::shared_ptr<Work> Backend::reduce_scatter(const Tensor&, const std::vector<Tensor>&, ReduceOp) {
  unsupported("reduce_scatter");
}
std::shared_ptr<Work> Backend::reduce_scatter_tensor(const Tensor&, const Tensor&, ReduceOp) {
  unsupported("reduce_scatter_tensor");
}
std::shared_ptr<Work> Backend::all_to_all(const std::vector<Tensor>&, const std::vector<Tensor>&) {
  unsupported("all_to_all");
}
std::shared_ptr<Work> Backend::all_to_all_single(const Tensor&, const Tensor&, const std::vector<int64_t>&,
                                                 const std::vector<int64_t>&) {
  unsupported("all_to_all_single");
}
std::shared_ptr<Work> Backend::monitored_barrier(std::chrono::milliseconds, bool) { unsupported("monitored_barrier"); }

}  // namespace tdist
