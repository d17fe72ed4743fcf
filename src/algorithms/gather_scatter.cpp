// gather and scatter: the root exchanges directly with every rank, all
// transfers posted at once (the root's link is the bottleneck either way).
#include <cstring>
#include <memory>
#include <vector>

#include "algorithms/collective.h"

namespace tdist {

void gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) {
  if (ctx.rank() != root) {
    ctx.send(root, 0, input.data(), input.nbytes());
    return;
  }
  std::vector<std::shared_ptr<Request>> reqs;
  for (int r = 0; r < ctx.size(); ++r) {
    if (r == root) continue;
    reqs.push_back(ctx.transport.irecv(r, step_tag(ctx.tag, 0), outputs[r].data(), outputs[r].nbytes()));
  }
  if (outputs[root].data() != input.data() && input.nbytes() > 0)
    std::memcpy(outputs[root].data(), input.data(), input.nbytes());
  for (auto& r : reqs) ctx.transport.wait(*r, ctx.deadline);
}

void scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) {
  if (ctx.rank() != root) {
    ctx.recv(root, 0, output.data(), output.nbytes());
    return;
  }
  std::vector<std::shared_ptr<Request>> reqs;
  for (int r = 0; r < ctx.size(); ++r) {
    if (r == root) continue;
    reqs.push_back(ctx.transport.isend(r, step_tag(ctx.tag, 0), inputs[r].data(), inputs[r].nbytes()));
  }
  if (inputs[root].data() != output.data() && output.nbytes() > 0)
    std::memcpy(output.data(), inputs[root].data(), output.nbytes());
  for (auto& r : reqs) ctx.transport.wait(*r, ctx.deadline);
}

}  // namespace tdist
