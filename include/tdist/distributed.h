// The torch.distributed functions. They act on the default group unless a
// group is passed; ranks (src, dst) are global ranks as in torch, or ranks
// within the group when written group_src(r) / group_dst(r).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tdist/process_group.h"

namespace tdist {

using Group = std::shared_ptr<ProcessGroup>;

struct InitOptions {
  std::string backend = "tdist";       // or "gloo" (alias), or "cpu:tdist,cuda:nccl"
  std::string init_method{};           // "env://" (default), "tcp://host:port", "file:///path"
  int world_size = -1;                 // -1: from init_method or the environment
  int rank = -1;                       // -1: from init_method or the environment
  std::shared_ptr<Store> store{};      // exclusive with init_method
  std::chrono::milliseconds timeout = kUnsetTimeout;  // kUnsetTimeout: TDIST_TIMEOUT, else 30 min
  std::string group_name{};            // deprecated in torch; kept for messages
  // torch's device_id: the device of this rank (Device{DeviceType::CUDA, LOCAL_RANK}
  // typically). The backends bind to it now (nccl creates its communicator
  // eagerly) and new groups inherit it.
  std::optional<Device> device_id{};
  // Join a job that is already running (a replacement for a rank that died):
  // init_process_group waits, up to the timeout, until the job's members call
  // admit_new_ranks, and returns with the default group of them all. false:
  // TDIST_JOIN_RUNNING_JOB decides (tdistrun --on-failure shrink-and-replace
  // sets it for the workers it starts in place of dead ones).
  bool join_running_job = false;
};

// A rank argument: a global rank (an int converts), or a rank within the
// group (group_src(r), group_dst(r), like torch's group_src=/group_dst=).
struct PeerRank {
  PeerRank(int global_rank) : rank(global_rank) {}  // NOLINT: implicit by design
  PeerRank(int r, bool relative) : rank(r), group_relative(relative) {}
  int rank;
  bool group_relative = false;
};
inline PeerRank group_src(int group_rank) { return PeerRank(group_rank, true); }
inline PeerRank group_dst(int group_rank) { return PeerRank(group_rank, true); }
inline PeerRank group_peer(int group_rank) { return PeerRank(group_rank, true); }
inline const PeerRank kAnyPeer{kAnySource, false};

bool is_available();
// Whether init_process_group can use the backend (torch's names): gloo always
// (tdist answers to it), mpi where the build has MPI, nccl where the build has
// CUDA and the NCCL library loads (no GPU needed, as torch).
bool is_gloo_available();
bool is_mpi_available();
bool is_nccl_available();
// The version of the NCCL library the nccl backend loads ("2.28.9"), or ""
// where none loads (torch.cuda.nccl.version()).
std::string nccl_version();
// Initializes the default group; blocks until every rank joins or the timeout
// passes (then DistError listing the ranks that did not arrive).
void init_process_group(const InitOptions& options = {});
// torch's positional form: init_process_group("tdist", "tcp://10.1.1.20:23456", 4, rank).
// (const char* so that init_process_group({.backend = ...}) stays unambiguous.)
void init_process_group(const char* backend, const std::string& init_method = "", int world_size = -1,
                        int rank = -1, std::chrono::milliseconds timeout = kUnsetTimeout);
bool is_initialized();
bool is_torchelastic_launched();
// torch's get_node_local_rank: LOCAL_RANK, else fallback_rank, else DistValueError.
int get_node_local_rank(std::optional<int> fallback_rank = std::nullopt);
// torch's debug levels (TORCH_DISTRIBUTED_DEBUG; ours: TDIST_DEBUG, read first).
enum class DebugLevel { OFF, INFO, DETAIL };
// The level the environment sets; DistValueError naming a value that is none of them.
DebugLevel get_debug_level();
// Groups made after the call check collectives and log at `level` (it sets TDIST_DEBUG).
void set_debug_level(DebugLevel level);
// get_debug_level() reads the environment on every call: nothing to cache.
void set_debug_level_from_env();
// Destroys the given group, or with nullptr every group and the default one.
void destroy_process_group(const Group& group = nullptr);
// The default group (DistError when not initialized).
Group group_world();

// torch's get_pg_count: the groups made since init_process_group, the default
// one included (every new_group call counts, on members and others alike;
// split_group counts where it makes a group); 0 before init and after
// destroy_process_group().
int get_pg_count();
// The groups of this process: the default one, then those made since
// init_process_group (new_group, new_subgroups, split_group, DeviceMesh) and
// not destroyed, in the order they were made, members or not (as torch's
// _world.pg_map, which breakpoint() sets every timeout of); empty before init.
std::vector<Group> all_process_groups();

// -1 when this process is not a member of `group` (as torch).
int get_rank(const Group& group = nullptr);
int get_world_size(const Group& group = nullptr);
std::string get_backend(const Group& group = nullptr);

// Groups. Every rank of the default group calls new_group with the same
// ranks in the same order, unless use_local_synchronization (then only the
// members call it). A non-member gets a typed handle whose rank is -1;
// operations on it do nothing and return a completed Work (logged), as torch's
// do on GroupMember.NON_GROUP_MEMBER (what Python's new_group returns there).
// group_desc: torch's label of the group (ProcessGroup::group_desc); empty: "undefined".
Group new_group(const std::vector<int>& ranks = {}, std::chrono::milliseconds timeout = kUnsetTimeout,
                const std::string& backend = "", bool use_local_synchronization = false,
                const std::string& group_desc = "");
// The name new_group gives a group of `ranks` (global ranks, sorted) when
// `index` groups of the same members were made before it in this process:
// "group(0,2,3)#1", the name errors show (the default group is "default_pg").
std::string new_group_name(const std::vector<int>& ranks, int index);
// torch's new_subgroups: the default group cut into consecutive groups of
// group_size ranks (which must divide the world size); returns this rank's
// group and all of them. Every rank calls it.
std::pair<Group, std::vector<Group>> new_subgroups(int group_size,
                                                   std::chrono::milliseconds timeout = kUnsetTimeout,
                                                   const std::string& backend = "");
// torch's new_subgroups_by_enumeration: one group per list (disjoint lists of
// global ranks); returns this rank's group (null when in none) and all of them.
std::pair<Group, std::vector<Group>> new_subgroups_by_enumeration(
    const std::vector<std::vector<int>>& ranks_per_subgroup, std::chrono::milliseconds timeout = kUnsetTimeout,
    const std::string& backend = "");
// torch's split_group (2.5+): every rank of parent_group (nullptr: the
// default group) calls it with the same split_ranks, lists of ranks *of the
// parent group* (the global ranks when the parent is the default group). The
// lists must not be empty, repeat a rank, overlap one another or name a rank
// outside the parent (DistValueError on every rank, before anything is
// made). Returns the group of this rank's list, or nullptr when this rank is
// in none (torch's None) -- beware that nullptr passed on to a collective
// means the default group. The new groups reuse the parent's connections.
// A process that is not a member of parent_group gets DistValueError.
Group split_group(const Group& parent_group, const std::vector<std::vector<int>>& split_ranks,
                  std::chrono::milliseconds timeout = kUnsetTimeout, const std::string& group_desc = "");
// Keep going when ranks die (docs/fault_tolerance.md).
// The ranks of `group` (group ranks, sorted) that failed, the same list on
// every survivor, however and whenever each asks: call it after an operation
// of the group failed, then shrink_group with the answer. Empty while the
// group is healthy on this rank and nobody asks. A rank is failed when it
// neither says it is alive nor is proven dead within `silence` (kUnsetTimeout:
// TDIST_FAILURE_DETECTION_TIMEOUT, 10 s); proof (its connection ended without
// a word, its process is gone from this host, tdistrun reaped it) answers at
// once. DistBackendError on a rank the survivors declared failed.
std::vector<int> failed_ranks(const Group& group = nullptr, std::chrono::milliseconds silence = kUnsetTimeout);
// torch's shrink_group flags: SHRINK_ABORT fails what the group still has
// under way before shrinking it.
inline constexpr int kShrinkDefault = 0x00;
inline constexpr int kShrinkAbort = 0x01;
// torch's shrink_group (2.9+): the survivors (every member of `group` not in
// ranks_to_exclude, which are group ranks) call it with the same list and get
// a new group of themselves, in their old order, over new connections, with
// no launcher and no restart. `group` is destroyed. With the default group
// (nullptr), every other group is destroyed too and the new group becomes
// the default one: ranks are renumbered (get_rank answers the new rank).
// All-or-nothing: every survivor returns the same group, or every survivor
// gets DistBackendError (a rank died during the shrink; failed_ranks then
// answers anew, and a second shrink with that answer goes on). DistValueError
// (torch's checks) for an empty, duplicate or out-of-range list, or one that
// excludes every rank; DistError on an excluded rank.
Group shrink_group(const std::vector<int>& ranks_to_exclude, const Group& group = nullptr,
                   int shrink_flags = kShrinkDefault);
// Regrow. Every member of the default group calls admit_new_ranks at the
// same point of its program (between two steps, say): rank 0 takes the
// processes waiting to join (init_process_group with join_running_job) from
// the store, and the members and they form a new default group, the members
// keeping their ranks and the newcomers after them, in the order they came.
// Every other group is destroyed, as by shrink_group. Returns how many joined
// (0: nothing changed; that costs one broadcast). All-or-nothing as
// shrink_group: DistBackendError on every member when the new group could not
// form (the newcomers get it too).
int admit_new_ranks();
// This process joined a running job (init_process_group with
// join_running_job): it has no state yet; the members send it theirs.
bool joined_running_job();
int get_group_rank(const Group& group, int global_rank);  // DistValueError when not a member
int get_global_rank(const Group& group, int group_rank);
std::vector<int> get_process_group_ranks(const Group& group);

// Point-to-point. recv with src = kAnySource takes the first message of that
// tag from any rank and returns the sender's global rank.
void send(const Tensor& tensor, PeerRank dst, const Group& group = nullptr, int tag = 0);
int recv(const Tensor& tensor, PeerRank src = kAnyPeer, const Group& group = nullptr, int tag = 0);
std::shared_ptr<Work> isend(const Tensor& tensor, PeerRank dst, const Group& group = nullptr, int tag = 0);
std::shared_ptr<Work> irecv(const Tensor& tensor, PeerRank src = kAnyPeer, const Group& group = nullptr, int tag = 0);

struct P2POp {
  enum Kind { ISEND, IRECV };
  P2POp(Kind kind, Tensor tensor, PeerRank peer, Group group = nullptr, int tag = 0)
      : kind(kind), tensor(std::move(tensor)), peer(peer), group(std::move(group)), tag(tag) {}
  Kind kind;
  Tensor tensor;
  PeerRank peer;
  Group group;
  int tag;
};
// Posts every operation (receives first, so no order of the list can deadlock)
// and returns their Works in list order.
std::vector<std::shared_ptr<Work>> batch_isend_irecv(const std::vector<P2POp>& ops);

// Collectives: with async_op the returned Work is pending, else already complete.
std::shared_ptr<Work> broadcast(const Tensor& tensor, PeerRank src, const Group& group = nullptr, bool async_op = false);
std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM, const Group& group = nullptr,
                                 bool async_op = false);
// torch's all_reduce_coalesced: every tensor of the list reduced in place
// with `op`, as one operation. The tensors share a dtype (DistValueError
// otherwise, as torch's ValueError) and may differ in size. With async_op
// the one Work completes once every tensor is reduced, with the first error.
std::shared_ptr<Work> all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op = ReduceOp::SUM,
                                           const Group& group = nullptr, bool async_op = false);
std::shared_ptr<Work> reduce(const Tensor& tensor, PeerRank dst, ReduceOp op = ReduceOp::SUM,
                             const Group& group = nullptr, bool async_op = false);
// tensor_list[i] receives rank i's tensor; sizes may differ between ranks.
std::shared_ptr<Work> all_gather(const std::vector<Tensor>& tensor_list, const Tensor& tensor,
                                 const Group& group = nullptr, bool async_op = false);
// output_tensor: world_size x input, concatenated ([w*n, ...]) or stacked ([w, n, ...]).
std::shared_ptr<Work> all_gather_into_tensor(const Tensor& output_tensor, const Tensor& input_tensor,
                                             const Group& group = nullptr, bool async_op = false);
// torch's all_gather_coalesced: output_tensor_lists[r][i] receives input i
// of rank r (one list per rank, each as long as input_tensor_list), every
// input gathered as all_gather does, as one operation with one Work.
std::shared_ptr<Work> all_gather_coalesced(const std::vector<std::vector<Tensor>>& output_tensor_lists,
                                           const std::vector<Tensor>& input_tensor_list,
                                           const Group& group = nullptr, bool async_op = false);
// gather_list: one tensor per rank on dst, empty elsewhere.
std::shared_ptr<Work> gather(const Tensor& tensor, const std::vector<Tensor>& gather_list = {}, PeerRank dst = 0,
                             const Group& group = nullptr, bool async_op = false);
// scatter_list: one tensor per rank on src, empty elsewhere.
std::shared_ptr<Work> scatter(const Tensor& tensor, const std::vector<Tensor>& scatter_list = {}, PeerRank src = 0,
                              const Group& group = nullptr, bool async_op = false);
std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& input_list,
                                     ReduceOp op = ReduceOp::SUM, const Group& group = nullptr,
                                     bool async_op = false);
// input: world_size x output, concatenated or stacked.
std::shared_ptr<Work> reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::SUM,
                                            const Group& group = nullptr, bool async_op = false);
std::shared_ptr<Work> all_to_all(const std::vector<Tensor>& output_tensor_list,
                                 const std::vector<Tensor>& input_tensor_list, const Group& group = nullptr,
                                 bool async_op = false);
// Split sizes count rows of the first dimension; empty means equal splits.
std::shared_ptr<Work> all_to_all_single(const Tensor& output, const Tensor& input,
                                        const std::vector<int64_t>& output_split_sizes = {},
                                        const std::vector<int64_t>& input_split_sizes = {},
                                        const Group& group = nullptr, bool async_op = false);
std::shared_ptr<Work> barrier(const Group& group = nullptr, bool async_op = false);
// Rank 0 waits up to `timeout` (kGroupTimeout: the group's; 0: no time at
// all, as torch's timedelta(0)) for every rank and throws naming the ranks
// that did not arrive (every one with wait_all_ranks), in torch's words.
void monitored_barrier(const Group& group = nullptr, std::chrono::milliseconds timeout = kGroupTimeout,
                       bool wait_all_ranks = false);

// Object collectives on byte strings (serialize your objects yourself; tdist
// never runs code on what it receives). Wire format: each rank's object count
// and sizes travel first as int64 tensors, then the bytes concatenated.
void broadcast_object_list(std::vector<std::string>& object_list, PeerRank src = 0, const Group& group = nullptr);
// object_list is resized to the group size; entry i is rank i's obj.
void all_gather_object(std::vector<std::string>& object_list, const std::string& obj, const Group& group = nullptr);
// On dst, object_gather_list is resized to the group size; elsewhere untouched.
void gather_object(const std::string& obj, std::vector<std::string>* object_gather_list = nullptr, PeerRank dst = 0,
                   const Group& group = nullptr);
// scatter_object_output_list[0] receives entry `rank` of src's scatter_object_input_list.
void scatter_object_list(std::vector<std::string>& scatter_object_output_list,
                         const std::vector<std::string>& scatter_object_input_list = {}, PeerRank src = 0,
                         const Group& group = nullptr);
void send_object_list(const std::vector<std::string>& object_list, PeerRank dst, const Group& group = nullptr);
// object_list must have as many entries as were sent; returns the sender's global rank.
int recv_object_list(std::vector<std::string>& object_list, PeerRank src = kAnyPeer, const Group& group = nullptr);

}  // namespace tdist
