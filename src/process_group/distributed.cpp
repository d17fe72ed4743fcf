// The free functions of torch.distributed over the default or a given group.
#include "tdist/distributed.h"

#include "tdist/errors.h"
#include "process_group/world.h"

namespace tdist {

World& world() {
  static World w;
  return w;
}

Group resolve_group(const Group& group, const char* op) {
  if (group) return group;
  std::lock_guard<std::mutex> lock(world().mu);
  if (!world().default_group)
    throw DistError(std::string(op) + ": the default process group is not initialized (call init_process_group first)");
  return world().default_group;
}

namespace {

// Global rank -> rank in `g`; DistValueError naming the op when not a member.
int to_group_rank(const ProcessGroup& g, int global, const char* op, const char* what) {
  int r = g.group_rank(global);
  if (r < 0)
    throw DistValueError(std::string(op) + ": " + what + " rank " + std::to_string(global) + " is not in group " +
                         g.group_name() + " (size " + std::to_string(g.size()) + ")");
  return r;
}

std::shared_ptr<Work> finish(std::shared_ptr<Work> work, bool async_op) {
  if (!async_op) work->wait();
  return work;
}

}  // namespace

bool is_available() { return true; }

bool is_initialized() {
  std::lock_guard<std::mutex> lock(world().mu);
  return world().default_group != nullptr;
}

Group group_world() { return resolve_group(nullptr, "group_world"); }

int get_rank(const Group& group) {
  Group g = resolve_group(group, "get_rank");
  return g->rank();
}

int get_world_size(const Group& group) { return resolve_group(group, "get_world_size")->size(); }

std::string get_backend(const Group& group) { return resolve_group(group, "get_backend")->backend_name(); }

void send(const Tensor& tensor, int dst, const Group& group, int tag) { isend(tensor, dst, group, tag)->wait(); }

int recv(const Tensor& tensor, int src, const Group& group, int tag) {
  Group g = resolve_group(group, "recv");
  auto work = irecv(tensor, src, g, tag);
  work->wait();
  return g->global_rank(work->source_rank());
}

std::shared_ptr<Work> isend(const Tensor& tensor, int dst, const Group& group, int tag) {
  Group g = resolve_group(group, "isend");
  return g->send(tensor, to_group_rank(*g, dst, "isend", "destination"), tag);
}

std::shared_ptr<Work> irecv(const Tensor& tensor, int src, const Group& group, int tag) {
  Group g = resolve_group(group, "irecv");
  int gsrc = src == kAnySource ? kAnySource : to_group_rank(*g, src, "irecv", "source");
  return g->recv(tensor, gsrc, tag);
}

std::shared_ptr<Work> broadcast(const Tensor& tensor, int src, const Group& group, bool async_op) {
  Group g = resolve_group(group, "broadcast");
  return finish(g->broadcast(tensor, to_group_rank(*g, src, "broadcast", "source")), async_op);
}

std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op, const Group& group, bool async_op) {
  return finish(resolve_group(group, "all_reduce")->all_reduce(tensor, op), async_op);
}

std::shared_ptr<Work> barrier(const Group& group, bool async_op) {
  return finish(resolve_group(group, "barrier")->barrier(), async_op);
}

}  // namespace tdist
