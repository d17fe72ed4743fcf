#include "tdist/backend.h"

#include "tdist/errors.h"

namespace tdist {

void Backend::unsupported(const std::string& op) const {
  throw DistBackendError("backend '" + name() + "' does not support " + op);
}

std::shared_ptr<Work> Backend::send(const Tensor&, int, int) { unsupported("send"); }
std::shared_ptr<Work> Backend::recv(const Tensor&, int, int) { unsupported("recv"); }
std::shared_ptr<Work> Backend::broadcast(const Tensor&, int) { unsupported("broadcast"); }
std::shared_ptr<Work> Backend::all_reduce(const Tensor&, ReduceOp) { unsupported("all_reduce"); }
std::shared_ptr<Work> Backend::barrier() { unsupported("barrier"); }

}  // namespace tdist
