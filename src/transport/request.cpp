#include "transport/request.h"

#include "util/cpu_relax.h"

namespace tdist {

namespace {
// A few microseconds of spinning (a pause is about 40 ns on the AMD EPYC
// measured) before sleeping. Only waits that do not drive the transport come
// here (a user's Work::wait with its own timeout, the end of an abort).
constexpr int kSpinIterations = 200;
}  // namespace

bool Request::wait_until(Deadline deadline) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (done()) return true;
    cpu_relax();
  }
  std::unique_lock<std::mutex> lock(mu_);
  waiting_ = true;
  if (deadline.is_never()) {
    cv_.wait(lock, [&] { return done(); });
    return true;
  }
  return cv_.wait_until(lock, deadline.at(), [&] { return done(); });
}

bool Request::wait_done_or_poked(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  waiting_ = true;
  cv_.wait_until(lock, deadline.at(), [&] { return done() || poked_; });
  poked_ = false;
  return done();
}

void Request::poke() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    poked_ = true;
  }
  cv_.notify_all();
}

bool Request::complete(std::exception_ptr error, int source) {
  if (claimed_.exchange(true, std::memory_order_acq_rel)) return false;
  error_ = std::move(error);
  source_ = source;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  return true;
}

}  // namespace tdist
