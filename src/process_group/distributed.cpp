// The free functions of torch.distributed over the default or a given group.
#include "tdist/distributed.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "tdist/backend.h"
#include "tdist/errors.h"
#include "backends/nccl_availability.h"
#include "process_group/world.h"
#include "util/settings.h"
#include "util/logging.h"

namespace tdist {

namespace {

// Every call on the default group resolves it, so this is on the path of
// every small collective: each thread remembers the group it last found, by
// the world's version, and takes the mutex only when the version moved on
// (init, destroy). The memory is a weak reference, so a destroyed group is
// not kept alive by threads that used it (its store server, for one, must go).
// Trivially destructible, so that reading it is one thread-local access with
// no guard: the weak reference is made in `storage` by the first lookup, which
// also registers its destruction at the thread's exit (Forget).
struct Remembered {
  uint64_t version = 0;  // 0: nothing remembered yet
  bool made = false;     // storage holds a weak_ptr
  alignas(std::weak_ptr<ProcessGroup>) unsigned char storage[sizeof(std::weak_ptr<ProcessGroup>)] = {};
  std::weak_ptr<ProcessGroup>& group() {
    return *std::launder(reinterpret_cast<std::weak_ptr<ProcessGroup>*>(storage));
  }
};
constinit thread_local Remembered t_remembered;  // constinit: no guard on access

struct Forget {
  ~Forget() {
    if (t_remembered.made) t_remembered.group().~weak_ptr();
    t_remembered = {};
  }
};

// resolve_group's slow path: the first call of a thread, or after init or destroy.
[[gnu::noinline]] Group remember_default_group(const char* op) {
  World& w = world();
  std::lock_guard<std::mutex> lock(w.mu);
  if (!w.default_group)
    throw DistError(std::string(op) + ": the default process group is not initialized (call init_process_group first)");
  Remembered& r = t_remembered;
  if (!r.made) {
    new (r.storage) std::weak_ptr<ProcessGroup>();
    r.made = true;
    thread_local Forget forget;  // destroys the weak reference when this thread exits
    (void)forget;
  }
  r.group() = w.default_group;
  r.version = w.default_version.load(std::memory_order_relaxed);
  return w.default_group;
}

}  // namespace

Group resolve_group(const Group& group, const char* op) {
  if (group) return group;
  Remembered& r = t_remembered;
  const uint64_t version = world().default_version.load(std::memory_order_acquire);
  if (version != 0 && version == r.version)
    if (Group g = r.group().lock()) return g;
  return remember_default_group(op);
}

int to_group_rank_searched(const ProcessGroup& g, PeerRank peer, const char* op, const char* what) {
  if (peer.group_relative) {
    if (peer.rank < 0 || peer.rank >= g.size())
      throw DistValueError(std::string(op) + ": group " + what + " rank " + std::to_string(peer.rank) +
                           " is outside group " + g.group_name() + " (size " + std::to_string(g.size()) + ")");
    return peer.rank;
  }
  int r = g.group_rank(peer.rank);
  if (r < 0)
    throw DistValueError(std::string(op) + ": " + what + " rank " + std::to_string(peer.rank) + " is not in group " +
                         g.group_name() + " (size " + std::to_string(g.size()) + ")");
  return r;
}

bool warn_non_member(const ProcessGroup& g, const char* op) {
  TDIST_LOG(LogLevel::Warn, op << ": this process is not a member of group " << g.group_name()
                               << "; the call does nothing");
  return true;
}

namespace {

std::shared_ptr<Work> finish(std::shared_ptr<Work> work, bool async_op) {
  if (!async_op) work->wait();
  return work;
}

std::shared_ptr<Work> nothing(const char* op) { return Work::completed(op); }

}  // namespace

bool is_available() { return true; }

int get_node_local_rank(std::optional<int> fallback_rank) {
  if (auto v = settings::get<"LOCAL_RANK">()) return static_cast<int>(*v);
  if (fallback_rank) return *fallback_rank;
  throw DistValueError("get_node_local_rank: LOCAL_RANK is not set (a launcher such as tdistrun or torchrun sets it) "
                       "and no fallback_rank was given");
}

DebugLevel get_debug_level() {
  switch (settings::debug_level()) {  // TORCH_DISTRIBUTED_DEBUG where TDIST_DEBUG is unset
    case settings::Debug::Off: return DebugLevel::OFF;
    case settings::Debug::Info: return DebugLevel::INFO;
    case settings::Debug::Detail: return DebugLevel::DETAIL;
  }
  return DebugLevel::OFF;
}

void set_debug_level(DebugLevel level) {
  const char* name = level == DebugLevel::DETAIL ? "DETAIL" : level == DebugLevel::INFO ? "INFO" : "OFF";
  setenv("TDIST_DEBUG", name, 1);
}

void set_debug_level_from_env() { get_debug_level(); }

bool is_gloo_available() { return is_backend_available("gloo"); }
bool is_mpi_available() { return is_backend_available("mpi"); }
bool is_nccl_available() { return is_backend_available("nccl") && nccl_library_loads(); }
std::string nccl_version() { return nccl_library_version(); }

bool is_initialized() {
  std::lock_guard<std::mutex> lock(world().mu);
  return world().default_group != nullptr;
}

Group group_world() { return resolve_group(nullptr, "group_world"); }

int get_pg_count() {
  std::lock_guard<std::mutex> lock(world().mu);
  return world().pg_count;
}

std::vector<Group> all_process_groups() {
  std::lock_guard<std::mutex> lock(world().mu);
  if (!world().default_group) return {};
  std::vector<Group> out{world().default_group};
  out.insert(out.end(), world().groups.begin(), world().groups.end());
  return out;
}

int get_rank(const Group& group) { return resolve_group(group, "get_rank")->rank(); }

int get_world_size(const Group& group) {
  Group g = resolve_group(group, "get_world_size");
  return g->is_member() ? g->size() : -1;
}

std::string get_backend(const Group& group) { return resolve_group(group, "get_backend")->backend_name(); }

int get_group_rank(const Group& group, int global_rank) {
  if (!group) throw DistValueError("get_group_rank: no group given");
  int r = group->group_rank(global_rank);
  if (r < 0)
    throw DistValueError("get_group_rank: global rank " + std::to_string(global_rank) + " is not part of group " +
                         group->group_name());
  return r;
}

int get_global_rank(const Group& group, int group_rank) {
  if (!group) throw DistValueError("get_global_rank: no group given");
  return group->global_rank(group_rank);
}

std::vector<int> get_process_group_ranks(const Group& group) {
  return resolve_group(group, "get_process_group_ranks")->global_ranks();
}

// --- point-to-point -------------------------------------------------------

void send(const Tensor& tensor, PeerRank dst, const Group& group, int tag) {
  Group g = resolve_group(group, "send");
  if (skip_non_member(*g, "send")) return;
  g->blocking_send(tensor, to_group_rank(*g, dst, "send", "destination"), tag);
}

int recv(const Tensor& tensor, PeerRank src, const Group& group, int tag) {
  Group g = resolve_group(group, "recv");
  if (skip_non_member(*g, "recv")) return -1;
  int gsrc = (!src.group_relative && src.rank == kAnySource) ? kAnySource : to_group_rank(*g, src, "recv", "source");
  return g->global_rank(g->blocking_recv(tensor, gsrc, tag));
}

std::shared_ptr<Work> isend(const Tensor& tensor, PeerRank dst, const Group& group, int tag) {
  Group g = resolve_group(group, "isend");
  if (skip_non_member(*g, "isend")) return nothing("send");
  return g->send(tensor, to_group_rank(*g, dst, "isend", "destination"), tag);
}

std::shared_ptr<Work> irecv(const Tensor& tensor, PeerRank src, const Group& group, int tag) {
  Group g = resolve_group(group, "irecv");
  if (skip_non_member(*g, "irecv")) return nothing("recv");
  int gsrc = (!src.group_relative && src.rank == kAnySource) ? kAnySource : to_group_rank(*g, src, "irecv", "source");
  return g->recv(tensor, gsrc, tag);
}

namespace {

// The backend that runs the whole batch, when every operation is on one group
// (this process a member) and one device type: it may run them as one
// (Backend::start_coalescing). Null otherwise: they run one by one.
Backend* batch_backend(const std::vector<P2POp>& ops) {
  if (ops.empty()) return nullptr;
  Group g = resolve_group(ops[0].group, "batch_isend_irecv");
  if (!g->is_member()) return nullptr;
  for (const P2POp& op : ops)
    if (resolve_group(op.group, "batch_isend_irecv") != g || op.tensor.device().type != ops[0].tensor.device().type)
      return nullptr;
  return &g->backend_for(ops[0].tensor.device());
}

}  // namespace

std::vector<std::shared_ptr<Work>> batch_isend_irecv(const std::vector<P2POp>& ops) {
  std::vector<std::shared_ptr<Work>> works(ops.size());
  Backend* batch = batch_backend(ops);
  if (batch) batch->start_coalescing();
  try {
    // Receives first: then no order of sends in the list can fill a socket
    // towards a peer that is not reading yet.
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].kind == P2POp::IRECV) works[i] = irecv(ops[i].tensor, ops[i].peer, ops[i].group, ops[i].tag);
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].kind == P2POp::ISEND) works[i] = isend(ops[i].tensor, ops[i].peer, ops[i].group, ops[i].tag);
  } catch (...) {
    if (batch) batch->end_coalescing();  // what was posted still runs
    throw;
  }
  if (batch) batch->end_coalescing();
  return works;
}

// --- collectives ----------------------------------------------------------

// The group, or return a no-op Work for a non-member.
#define TDIST_GROUP_OR_RETURN(name)     \
  Group g = resolve_group(group, name); \
  if (skip_non_member(*g, name)) return nothing(name)

std::shared_ptr<Work> broadcast(const Tensor& tensor, PeerRank src, const Group& group, bool async_op) {
  TDIST_GROUP_OR_RETURN("broadcast");
  return finish(g->broadcast(tensor, {.root = to_group_rank(*g, src, "broadcast", "source"), .async_op = async_op}),
                async_op);
}

std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op, const Group& group, bool async_op) {
  TDIST_GROUP_OR_RETURN("all_reduce");
  return finish(g->all_reduce(tensor, {.op = op, .async_op = async_op}), async_op);
}

std::shared_ptr<Work> all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op, const Group& group,
                                           bool async_op) {
  TDIST_GROUP_OR_RETURN("all_reduce_coalesced");
  return finish(g->all_reduce_coalesced(tensors, {.op = op, .async_op = async_op}), async_op);
}

std::shared_ptr<Work> reduce(const Tensor& tensor, PeerRank dst, ReduceOp op, const Group& group, bool async_op) {
  TDIST_GROUP_OR_RETURN("reduce");
  return finish(
      g->reduce(tensor, {.root = to_group_rank(*g, dst, "reduce", "destination"), .op = op, .async_op = async_op}),
      async_op);
}

std::shared_ptr<Work> all_gather(const std::vector<Tensor>& tensor_list, const Tensor& tensor, const Group& group,
                                 bool async_op) {
  TDIST_GROUP_OR_RETURN("all_gather");
  return finish(g->all_gather(tensor_list, tensor, {.async_op = async_op}), async_op);
}

std::shared_ptr<Work> all_gather_into_tensor(const Tensor& output_tensor, const Tensor& input_tensor,
                                             const Group& group, bool async_op) {
  TDIST_GROUP_OR_RETURN("all_gather_into_tensor");
  return finish(g->all_gather_into_tensor(output_tensor, input_tensor, {.async_op = async_op}), async_op);
}

std::shared_ptr<Work> all_gather_coalesced(const std::vector<std::vector<Tensor>>& output_tensor_lists,
                                           const std::vector<Tensor>& input_tensor_list, const Group& group,
                                           bool async_op) {
  TDIST_GROUP_OR_RETURN("all_gather_coalesced");
  // The descriptor's outputs are input-major: input i of rank r at i * size + r.
  const size_t n = static_cast<size_t>(g->size()), inputs = input_tensor_list.size();
  if (output_tensor_lists.size() != n)
    throw DistValueError("all_gather_coalesced: " + std::to_string(output_tensor_lists.size()) +
                         " output lists, expected one per rank (" + std::to_string(n) + ")");
  std::vector<Tensor> outputs(inputs * n);
  for (size_t r = 0; r < n; ++r) {
    if (output_tensor_lists[r].size() != inputs)
      throw DistValueError("all_gather_coalesced: output list " + std::to_string(r) + " has " +
                           std::to_string(output_tensor_lists[r].size()) + " tensors for " + std::to_string(inputs) +
                           " inputs");
    for (size_t i = 0; i < inputs; ++i) outputs[i * n + r] = output_tensor_lists[r][i];
  }
  return finish(g->issue({.kind = OpKind::AllGatherCoalesced, .inputs = input_tensor_list, .outputs = outputs,
                          .async_op = async_op}),
                async_op);
}

std::shared_ptr<Work> gather(const Tensor& tensor, const std::vector<Tensor>& gather_list, PeerRank dst,
                             const Group& group, bool async_op) {
  TDIST_GROUP_OR_RETURN("gather");
  return finish(
      g->gather(gather_list, tensor, {.root = to_group_rank(*g, dst, "gather", "destination"), .async_op = async_op}),
      async_op);
}

std::shared_ptr<Work> scatter(const Tensor& tensor, const std::vector<Tensor>& scatter_list, PeerRank src,
                              const Group& group, bool async_op) {
  TDIST_GROUP_OR_RETURN("scatter");
  return finish(
      g->scatter(tensor, scatter_list, {.root = to_group_rank(*g, src, "scatter", "source"), .async_op = async_op}),
      async_op);
}

std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& input_list, ReduceOp op,
                                     const Group& group, bool async_op) {
  TDIST_GROUP_OR_RETURN("reduce_scatter");
  return finish(g->reduce_scatter(output, input_list, {.op = op, .async_op = async_op}), async_op);
}

std::shared_ptr<Work> reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op,
                                            const Group& group, bool async_op) {
  TDIST_GROUP_OR_RETURN("reduce_scatter_tensor");
  return finish(g->reduce_scatter_tensor(output, input, {.op = op, .async_op = async_op}), async_op);
}

std::shared_ptr<Work> all_to_all(const std::vector<Tensor>& output_tensor_list,
                                 const std::vector<Tensor>& input_tensor_list, const Group& group, bool async_op) {
  TDIST_GROUP_OR_RETURN("all_to_all");
  return finish(g->all_to_all(output_tensor_list, input_tensor_list, {.async_op = async_op}), async_op);
}

std::shared_ptr<Work> all_to_all_single(const Tensor& output, const Tensor& input,
                                        const std::vector<int64_t>& output_split_sizes,
                                        const std::vector<int64_t>& input_split_sizes, const Group& group,
                                        bool async_op) {
  TDIST_GROUP_OR_RETURN("all_to_all_single");
  return finish(g->all_to_all_single(output, input,
                                     {.output_split_sizes = output_split_sizes,
                                      .input_split_sizes = input_split_sizes,
                                      .async_op = async_op}),
                async_op);
}

std::shared_ptr<Work> barrier(const Group& group, bool async_op) {
  TDIST_GROUP_OR_RETURN("barrier");
  return finish(g->barrier({.async_op = async_op}), async_op);
}

void monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  Group g = resolve_group(group, "monitored_barrier");
  if (skip_non_member(*g, "monitored_barrier")) return;
  g->monitored_barrier({.timeout = timeout, .wait_all_ranks = wait_all_ranks})->wait();
}

#undef TDIST_GROUP_OR_RETURN

}  // namespace tdist
