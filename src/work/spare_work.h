// The Work of a backend's last blocking call, kept to be reused: a blocking
// call's caller usually drops its Work at once, and allocating one (with its
// result list and tensor shapes) cost a blocking 8-byte all_reduce 3
// allocations. Not thread-safe: the backend's issue lock guards it.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <span>
#include <string>

#include "work/pending_work.h"

namespace tdist {

class SpareWork {
 public:
  // A pending Work for operation #seq: the spare one when its last caller
  // has dropped it (blocking calls), else a new one.
  std::shared_ptr<PendingWork> take(const char* op, uint64_t seq, std::span<const Tensor> result, bool blocking,
                                    const std::shared_ptr<const std::string>& label) {
    // use_count() == 1: only spare_ holds it, so no other thread can reach it;
    // the fence pairs with the release of the caller's last reference.
    if (blocking && spare_ && spare_.use_count() == 1) {
      std::atomic_thread_fence(std::memory_order_acquire);
      spare_->reuse(op, seq, result);
      return spare_;
    }
    auto work = std::make_shared<PendingWork>(op, seq, label);
    work->set_result(std::vector<Tensor>(result.begin(), result.end()));
    // Kept only if holding on to it holds no memory: a spare keeps its result
    // until the next blocking call, and an adopted DLPack tensor the user
    // dropped meanwhile must be freed.
    if (blocking && std::none_of(result.begin(), result.end(), [](const Tensor& t) { return t.keeps_memory_alive(); }))
      spare_ = work;
    return work;
  }

 private:
  std::shared_ptr<PendingWork> spare_;
};

}  // namespace tdist
