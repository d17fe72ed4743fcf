// The "mpi" backend: tdist's operations over the process's MPI library, for
// CPU tensors. Each group is an MPI communicator (the world's a duplicate of
// MPI_COMM_WORLD, the others made with MPI_Comm_create_group from it, by the
// members only). A blocking call is MPI's blocking call; an async_op one is
// MPI's non-blocking call, driven to completion by the MPI thread
// (mpi_runtime.h), so the caller's work overlaps it.
//
// What MPI cannot do: abort an operation posted to a dead peer. Open MPI ends
// the whole job when a rank dies or calls MPI_Abort; a blocking collective
// waits as MPI does, without tdist's timeout. Point-to-point calls,
// monitored_barrier and Work.wait(timeout) keep their deadlines: they test
// their requests and fail with a timeout error naming the operation.
#pragma once

#include <mpi.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "tdist/backend.h"
#include "backends/mpi/mpi_runtime.h"
#include "util/deadline.h"
#include "util/sleeping_lock.h"
#include "work/pending_work.h"
#include "work/spare_work.h"

namespace tdist::mpi {

class MpiBackend final : public Backend {
 public:
  MpiBackend(int rank, int size, const BackendOptions& options);
  ~MpiBackend() override;

  std::string name() const override { return "mpi"; }
  std::shared_ptr<Work> send(const Operation& operation) override;
  std::shared_ptr<Work> recv(const Operation& operation) override;
  void blocking_send(const Operation& operation) override;
  int blocking_recv(const Operation& operation) override;
  std::shared_ptr<Work> broadcast(const Operation& operation) override;
  std::shared_ptr<Work> all_reduce(const Operation& operation) override;
  std::shared_ptr<Work> barrier(const Operation& operation) override;
  std::shared_ptr<Work> reduce(const Operation& operation) override;
  std::shared_ptr<Work> all_gather(const Operation& operation) override;
  std::shared_ptr<Work> all_gather_into_tensor(const Operation& operation) override;
  std::shared_ptr<Work> gather(const Operation& operation) override;
  std::shared_ptr<Work> scatter(const Operation& operation) override;
  std::shared_ptr<Work> reduce_scatter(const Operation& operation) override;
  std::shared_ptr<Work> reduce_scatter_tensor(const Operation& operation) override;
  std::shared_ptr<Work> all_to_all(const Operation& operation) override;
  std::shared_ptr<Work> all_to_all_single(const Operation& operation) override;
  std::shared_ptr<Work> monitored_barrier(const Operation& operation) override;
  void shutdown() override;

  // This group's communicator (what groups made from it derive theirs from).
  MPI_Comm comm() const;

  struct State;

 private:
  // One collective as MPI runs it: blocking(comm) is MPI's blocking form,
  // start(comm, &request) its non-blocking form; `after` (may be empty) runs
  // once the data is in place (copies out of staging buffers, AVG's division);
  // `keep` holds what the buffers live in until then. MPI's collectives take
  // no timeout (see above); Work.wait(timeout) still has one.
  template <typename Blocking, typename Start>
  std::shared_ptr<Work> run(const char* op, const char* mpi_name, std::span<const Tensor> result,
                            const Operation& operation,
                            Blocking&& blocking, Start&& start, std::function<void()> after = nullptr,
                            std::shared_ptr<void> keep = nullptr);
  std::shared_ptr<Work> point_to_point(bool is_send, const Operation& operation);
  std::exception_ptr blocking_p2p(bool is_send, const Operation& operation, uint64_t seq, int* source);
  uint64_t next_p2p_seq() { return p2p_seq_.fetch_add(1, std::memory_order_relaxed) + 1; }
  Millis timeout_of(Millis requested) const { return requested == kGroupTimeout ? options_.timeout : requested; }

  BackendOptions options_;
  std::shared_ptr<State> state_;
  SleepingLock issue_mu_;  // issuing is thread-safe; the order is the callers'
  uint64_t seq_ = 0;       // collectives issued, under issue_mu_
  SpareWork spare_;        // recent calls' Works, reused; under issue_mu_
  std::atomic<uint64_t> p2p_seq_{0};
};

// Registers "mpi" (backends/backend_registry.cpp's table of built-ins).
void register_backend_entry();

}  // namespace tdist::mpi
