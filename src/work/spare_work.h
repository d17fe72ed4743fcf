// The Works of a backend's recent calls, kept to be reused: a blocking
// call's caller usually drops its Work at once, and an async call's caller
// once it has waited, before the next call (a loop of `wait()`s). Allocating
// one (with its result list and tensor shapes) cost a blocking 8-byte
// all_reduce 3 allocations, and an async one's make and free are a tenth of
// its Python call. Not thread-safe: the backend's issue lock guards it.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <span>
#include <string>

#include "work/pending_work.h"

namespace tdist {

class SpareWork {
 public:
  // A pending Work for operation #seq: a spare one whose last caller has
  // dropped it, else a new one (kept as a spare).
  std::shared_ptr<PendingWork> take(const char* op, uint64_t seq, std::span<const Tensor> result, bool blocking,
                                    const std::shared_ptr<const std::string>& label) {
    // Kept only if holding on to it holds no memory: a spare keeps its result
    // until its next reuse, and an adopted DLPack tensor the user dropped
    // meanwhile must be freed.
    const bool keepable =
        std::none_of(result.begin(), result.end(), [](const Tensor& t) { return t.keeps_memory_alive(); });
    // Blocking calls have a spare of their own, async ones take any of theirs.
    const size_t first = blocking ? 0 : 1, end = blocking ? 1 : kSpares;
    if (keepable)
      for (size_t i = first; i < end; ++i)
        if (reusable(spares_[i])) {
          spares_[i]->reuse(op, seq, result);
          return spares_[i];
        }
    auto work = std::make_shared<PendingWork>(op, seq, label);
    work->set_result(std::vector<Tensor>(result.begin(), result.end()));
    if (keepable) {
      // Async: in turn, replacing one whose caller still holds it, if need be
      // (it then lives on with that caller alone).
      size_t at = 0;
      if (!blocking) at = 1 + next_async_++ % (kSpares - 1);
      spares_[at] = work;
    }
    return work;
  }

 private:
  static constexpr size_t kSpares = 4;  // [0] for blocking calls, the rest for async ones
  // use_count() == 1: only this holds it, so no other thread can reach it;
  // the fence pairs with the release of the caller's last reference.
  static bool reusable(const std::shared_ptr<PendingWork>& w) {
    if (!w || w.use_count() != 1) return false;
    std::atomic_thread_fence(std::memory_order_acquire);
    return true;
  }
  std::array<std::shared_ptr<PendingWork>, kSpares> spares_;
  size_t next_async_ = 0;
};

}  // namespace tdist
