// A backend carries the operations of one process group for the tensors of
// some devices. Backends are registered by name ("tdist", later "mpi", "nccl").
#pragma once

#include <chrono>
#include <exception>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tdist/dtype.h"
#include "tdist/operation.h"
#include "tdist/options.h"
#include "tdist/reduce_op.h"
#include "tdist/store.h"
#include "tdist/tensor.h"
#include "tdist/work.h"

namespace tdist {

inline constexpr int kAnySource = -1;
inline constexpr std::chrono::milliseconds kDefaultTimeout{30 * 60 * 1000};  // torch's 30 min for CPU backends
// The default of the timeout arguments of init_process_group and of the
// functions that make groups: TDIST_TIMEOUT (seconds) where set, else
// kDefaultTimeout. A timeout given explicitly wins over the setting.
inline constexpr std::chrono::milliseconds kUnsetTimeout{-2};

class Backend;

struct BackendOptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::string group_name{};         // for error messages: "default_pg", "group 3"
  std::vector<int> global_ranks{};  // group rank -> global rank
  // The same backend of the group this one is made from (the default group,
  // for new_group), or null: what it can share (connections, threads, a
  // parent communicator) a new backend takes from there instead of making it.
  std::shared_ptr<Backend> parent{};
  // The device this rank uses (torch's device_id; the index of a CUDA device),
  // -1: not given (LOCAL_RANK's or the current device, chosen at first use).
  int device_id = -1;
  // For the failure agreement (failed_ranks): the rank the launcher started
  // each global rank as (empty: the global ranks themselves; they differ
  // after shrink_group renumbered the default group), and the store where
  // the launcher records a worker it reaped as exited/<rank> (null: none).
  std::vector<int> launch_ranks{};
  std::shared_ptr<Store> death_records{};
  // ProcessGroupOptions::members_gone: asked while the connections form.
  std::function<std::vector<int>(const std::vector<int>& ranks)> members_gone{};
};

class Backend {
 public:
  Backend(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string name() const = 0;
  int rank() const { return rank_; }
  int size() const { return size_; }
  // The sequence number the next collective will get (0: not known), for the
  // front's error about a call it refuses before issuing it.
  virtual uint64_t next_sequence_number() const { return 0; }

  // One operation, as the front describes it (tdist/operation.h): the
  // front calls this for every operation; it calls the method of the
  // operation's kind below, or, for an operation a backend may build from
  // others (the coalesced forms), that composite. A backend overrides the
  // methods of the operations it carries, and a composite's method only
  // where it does better.
  //
  // Ranks here are group ranks. The front has validated every argument
  // before a call gets here: tensors of a device this backend serves, with
  // data; ranks inside the group and not this rank for a peer; lists of one
  // tensor per rank where one is needed, of one dtype; sizes that fit
  // together; split sizes that add up. A backend does not check them again.
  // Each operation carries its resolved timeout and async_op (false: the
  // caller waits at once), and its flight recorder entry
  // (trace::claim_mark). Unsupported operations throw DistBackendError
  // naming them.
  std::shared_ptr<Work> run(const Operation& op);

  virtual std::shared_ptr<Work> send(const Operation& op);
  virtual std::shared_ptr<Work> recv(const Operation& op);  // op.peer may be kAnySource
  // The blocking forms: send(...)->wait(), and recv(...)->wait() returning the
  // source (group rank). A backend may serve them without a Work (a small
  // message over shared memory takes a few hundred nanoseconds).
  virtual void blocking_send(const Operation& op);
  virtual int blocking_recv(const Operation& op);
  virtual std::shared_ptr<Work> broadcast(const Operation& op);
  virtual std::shared_ptr<Work> all_reduce(const Operation& op);
  // Every tensor of op.inputs reduced in place with op.reduce_op, as one
  // operation: one Work that completes once all have, with the first error
  // of any. The tensors (at least one) share a dtype and may differ in size.
  // The default issues one all_reduce per tensor and joins their Works
  // (work/aggregate_work.h); tdist packs the small tensors into one buffer.
  virtual std::shared_ptr<Work> all_reduce_coalesced(const Operation& op);
  virtual std::shared_ptr<Work> barrier(const Operation& op);
  virtual std::shared_ptr<Work> reduce(const Operation& op);
  // outputs[i] receives rank i's input; sizes may differ per rank (outputs[i]
  // matches rank i's input exactly).
  virtual std::shared_ptr<Work> all_gather(const Operation& op);
  // output holds size() * input.numel() elements, rank i's input at block i
  // (blocks_of() in tensor/split.h gives the views).
  virtual std::shared_ptr<Work> all_gather_into_tensor(const Operation& op);
  // outputs: on the root only (one per rank), empty elsewhere.
  virtual std::shared_ptr<Work> gather(const Operation& op);
  // inputs: on the root only (one per rank), empty elsewhere.
  virtual std::shared_ptr<Work> scatter(const Operation& op);
  // output = op over ranks of inputs[rank()].
  virtual std::shared_ptr<Work> reduce_scatter(const Operation& op);
  // input holds size() * output.numel() elements; block i goes to rank i.
  virtual std::shared_ptr<Work> reduce_scatter_tensor(const Operation& op);
  // outputs[i] receives inputs[rank()] of rank i.
  virtual std::shared_ptr<Work> all_to_all(const Operation& op);
  // The split sizes (rows of the first dimension; empty: equal) cut output
  // and input into one part per rank (rows_of() in tensor/split.h).
  virtual std::shared_ptr<Work> all_to_all_single(const Operation& op);
  // Rank 0 waits up to the timeout for every rank; its error names the ranks
  // that did not arrive (all of them with wait_all_ranks, else the first).
  virtual std::shared_ptr<Work> monitored_barrier(const Operation& op);
  // batch_isend_irecv: the point-to-point operations the calling thread
  // issues between these two calls form one batch, which a backend may run as
  // one (nccl: inside one ncclGroupStart/End, so that a ring exchange cannot
  // deadlock on a send queued behind the peer's receive). The batch's Works
  // may not complete before end_coalescing(). The default runs them one by one.
  virtual void start_coalescing() {}
  virtual void end_coalescing() {}
  // Fails pending and later operations and releases connections; idempotent.
  virtual void shutdown() {}
  // Fails the group with `cause` (a DistError naming why: a user interrupt,
  // ...): the operation under way ends with it, later ones fail at once with
  // it, and the peers are told. The default has no cause to keep: it shuts
  // the backend down.
  virtual void abort(std::exception_ptr cause) {
    (void)cause;
    shutdown();
  }
  // shrink_group's questions. Whether this backend can rebuild a group
  // without some of its ranks (torch's supports_shrinking).
  virtual bool supports_shrinking() const { return false; }
  // The ranks of the group that failed, the same list on every survivor
  // (tdist::failed_ranks): empty while the group is healthy. Ranks that
  // neither say they live nor are proven dead count as failed after
  // `silence`. The default: DistBackendError (the backend cannot tell).
  virtual std::vector<int> failed_ranks(std::chrono::milliseconds silence);
  // ProcessGroup::ranks_proven_dead for this backend's connections; the
  // default: none is.
  virtual std::vector<int> ranks_proven_dead(const std::vector<int>&) { return {}; }
  // A shrink built on the last answer of failed_ranks was abandoned (another
  // rank died during it): the next failed_ranks asks anew.
  virtual void shrink_abandoned() {}

 protected:
  [[noreturn]] void unsupported(const std::string& op) const;

 private:
  int rank_;
  int size_;
};

using BackendFactory = std::function<std::shared_ptr<Backend>(
    const std::shared_ptr<Store>& store, int rank, int size, const BackendOptions& options)>;

// Makes `name` usable in init_process_group/new_group for tensors on `devices`.
void register_backend(const std::string& name, BackendFactory factory, std::vector<DeviceType> devices);
bool is_backend_available(const std::string& name);

}  // namespace tdist
