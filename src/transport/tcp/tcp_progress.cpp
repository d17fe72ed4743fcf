// Making progress: who reads the sockets and rings, when, and how waiting
// threads sleep.
//
// A thread that waits for a request drives the transport itself (under
// rx_mu_): it polls for a short spin, then blocks in epoll with the rings'
// sleep flags raised, so the message it waits for wakes it directly. Other
// threads waiting meanwhile are bystanders: the driver completes their
// requests, and pokes them when it leaves so one of them takes over.
// The background thread only works while nobody drives: it parks for as long
// as waits keep coming, which keeps it off the cores in tight loops.
#include <sched.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "tdist/errors.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_transport.h"
#include "util/cpu_relax.h"
#include "util/error_context.h"
#include "util/home_cpu.h"
#include "util/logging.h"

namespace tdist {

namespace {
constexpr int kMaxEvents = 64;
// Blocking waits are sliced so that a missed doorbell can never stall anyone
// for long, and so that a parked background thread rechecks its state.
constexpr Millis kBlockSlice{100};
// The parked background thread looks again after a tick that doubles, up to
// the longest, for as long as waits keep coming: each look is a wake-up that
// may preempt a rank at work (docs/tuning_log.md: Transport). It resumes at
// most that long after the last wait, and only after waits kept it parked for
// about as long.
constexpr auto kFirstParkTick = std::chrono::milliseconds(1);
constexpr auto kLongestParkTick = std::chrono::milliseconds(16);
// While spinning over data paths only, the sockets (abort notices, closed peers)
// are polled on every this-many-th round.
constexpr unsigned kSocketPollEvery = 64;
// While spinning, the clock is read on every this-many-th round only.
constexpr unsigned kRoundsPerClockRead = 8;

}  // namespace

void TcpTransport::wait(Request& request, Deadline deadline, bool abort_on_error) {
  if (!request.done()) {
    drive(request, deadline);
    // Aborted meanwhile: abort() completes every request, at once.
    if (!request.done() && stop_.load(std::memory_order_acquire)) request.wait_until(deadline);
  }
  if (!request.done()) {
    bool send = request.kind() == Request::Kind::Send;
    std::string what = std::string(send ? "sending " : "receiving ") + std::to_string(request.size()) + " bytes " +
                       (send ? "to " : "from ") + describe_peer(request.link_peer()) + ": Timed out after " +
                       format_ms(deadline.timeout());
    auto err = std::make_exception_ptr(DistBackendError(explain_stall(request.link_peer(), deadline, what, true)));
    abort(err);
    std::rethrow_exception(err);
  }
  if (request.error()) {
    if (!abort_on_error) std::rethrow_exception(request.error());
    // A peer that gave up waiting for someone: say for whom, and so on.
    std::exception_ptr err = request.error();
    const int peer = request.link_peer();
    bool waiting_peer = false;
    if (peer >= 0 && peer < size_) {
      std::lock_guard<std::mutex> lock(mu_);
      waiting_peer = notices_[peer].heard && notices_[peer].waited_for >= 0;
    }
    if (waiting_peer)
      err = std::make_exception_ptr(DistNetworkError(explain_stall(peer, deadline, error_message(err), false)));
    abort(err);
    std::rethrow_exception(err);
  }
}

bool TcpTransport::wait_a_while(Request& request, Deadline until) {
  if (!request.done()) {
    drive(request, until);
    if (!request.done() && stop_.load(std::memory_order_acquire)) request.wait_until(until);
  }
  return request.done();
}

// Returns when the request is done, the transport stopped, or the deadline passed.
void TcpTransport::drive(Request& request, Deadline deadline) {
  return_home();
  drivers_.fetch_add(1, std::memory_order_acq_rel);
  driver_epoch_.fetch_add(1, std::memory_order_release);
  std::unique_lock<std::mutex> rx(rx_mu_, std::defer_lock);
  while (!rx.try_lock()) {
    // The background thread holds rx_mu_ only for moments (it never sleeps
    // holding it) and leaves as soon as it sees a driver: wait for it here
    // rather than sleeping as a bystander, which would cost a wake-up.
    if (bg_holds_.load(std::memory_order_acquire)) {
      cpu_relax();
      continue;
    }
    if (!wait_as_bystander(request, deadline)) break;  // done, stopped or expired
  }
  if (rx.owns_lock()) {
    // The spin counts from the last time something moved, not from the start
    // of the wait: while a large message streams in (or out) the next bytes
    // come within microseconds, and sleeping between chunks would cost a
    // wake-up each. The clock is read only every few rounds while spinning (a
    // clock read costs a good part of a small shared-memory message), and not
    // at all when the reply is there within those rounds (docs/tuning_log.md:
    // Transport).
    Clock::time_point spin_end{}, pause_end{};
    bool rebase = true;     // something moved: the spin starts again at the next clock read
    bool yielding = false;  // past the pause-only part of the spin
    unsigned round = 0;
    while (!request.done() && !stop_.load(std::memory_order_acquire)) {
      ++round;
      if (poll_once(tcp_data_peers_.load(std::memory_order_relaxed) || round % kSocketPollEvery == 0)) rebase = true;
      if (request.done()) break;
      if (spin_.count() > 0 && round % kRoundsPerClockRead != 0) {
        if (yielding && !rebase)
          sched_yield();
        else
          cpu_relax();
        continue;
      }
      // A communicator's abort waits for this thread to let go of rx_mu_ or run it.
      if (comm_aborts_pending_.load(std::memory_order_relaxed)) run_comm_aborts();
      auto now = Clock::now();
      if (rebase) {
        spin_end = now + spin_;
        pause_end = now + pause_only_;
        rebase = false;
      }
      if (now < spin_end) {
        // After a few microseconds, poll with yields: when the scheduler has
        // put the peer on this core, it runs at once instead of after the spin.
        yielding = now >= pause_end;
        if (yielding)
          sched_yield();
        else
          cpu_relax();
        continue;
      }
      if (now >= deadline.at()) break;
      if (block_once(deadline)) rebase = true;
    }
    drivers_.fetch_sub(1, std::memory_order_acq_rel);
    let_go(rx);
  } else {
    drivers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

// Releases rx_mu_ and hands over: a bystander may be waiting for a message
// that nobody reads now.
void TcpTransport::let_go(std::unique_lock<std::mutex>& rx) {
  rx.unlock();
  // Pairs with the fence in wait_as_bystander: either the bystander's try_lock
  // sees rx_mu_ free, or this load sees it registered (store, fence, load on
  // both sides). Most waits have no bystander: no lock then.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (bystander_count_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(bystanders_mu_);
  for (Request* r : bystanders_) r->poke();
}

// Waits while another thread drives. Returns true when this thread should
// take over (the driver left before the request completed).
bool TcpTransport::wait_as_bystander(Request& request, Deadline deadline) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(bystanders_mu_);
      bystanders_.push_back(&request);
      bystander_count_.store(bystanders_.size(), std::memory_order_relaxed);
    }
    // Registered first, then tried again: a driver leaving in between either
    // lets this try succeed or pokes us (see let_go).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    bool take_over = rx_mu_.try_lock();
    if (take_over) rx_mu_.unlock();
    if (!take_over && !request.done() && !stop_.load(std::memory_order_acquire))
      request.wait_done_or_poked(deadline.earlier(Deadline::after(kBlockSlice)));
    {
      std::lock_guard<std::mutex> lock(bystanders_mu_);
      bystanders_.erase(std::find(bystanders_.begin(), bystanders_.end(), &request));
      bystander_count_.store(bystanders_.size(), std::memory_order_relaxed);
    }
    if (request.done() || stop_.load(std::memory_order_acquire) || deadline.expired()) return false;
    if (take_over) return true;
    if (rx_mu_.try_lock()) {
      rx_mu_.unlock();
      return true;
    }
  }
}

bool TcpTransport::poll_paths() {
  bool moved = false;
  const size_t n = path_peer_count_.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i) {
    Peer* p = path_peers_[i].load(std::memory_order_relaxed);
    if (p->failed) continue;
    moved = p->path->poll() || moved;
    if (!p->path->backlog()) continue;
    std::unique_lock<std::mutex> tx(p->tx_mu, std::try_to_lock);
    if (tx.owns_lock() && !p->failed) p->path->flush_locked();
  }
  return moved;
}

bool TcpTransport::poll_once(bool sockets) {
  bool moved = poll_paths();
  if (!sockets) return moved;
  // A group of two over TCP: read the peer's socket itself rather than ask
  // epoll first. When the message is there that is one system call instead
  // of two (epoll_wait, then recv), and when it is not, one either way. Not
  // while a large payload streams in (epoll then reports it only once much of
  // it arrived: fewer, larger reads) or sends wait for room in the socket,
  // nor while the extra sockets carry pieces.
  if (Peer* p = lone_socket_peer_.load(std::memory_order_acquire);
      p && !p->failed && !p->main_closed && p->rcvlowat == 1 && !p->out_armed &&
      p->lanes_busy.load(std::memory_order_relaxed) == 0) {
    const uint64_t before = p->bytes_read;
    on_readable(*p);
    return moved || p->bytes_read != before || p->failed;
  }
  epoll_event events[kMaxEvents];
  int n = epoll_wait(epoll_fd_.get(), events, kMaxEvents, 0);
  if (n > 0) handle_events(events, n);
  return moved || n > 0;
}

// Sleeps until a socket event, a doorbell, the deadline or the end of a slice.
bool TcpTransport::block_once(Deadline deadline) {
  if (prepare_sleep()) return true;
  Deadline slice = deadline.earlier(Deadline::after(kBlockSlice));
  epoll_event events[kMaxEvents];
  int n = epoll_wait(epoll_fd_.get(), events, kMaxEvents, slice.poll_ms());
  if (n > 0) handle_events(events, n);
  return n > 0;
}

// Raises the paths' sleep flags, then looks once more: a writer that moved
// before seeing a flag has left data (or space) that would otherwise be
// missed. True when there is something to do now (do not sleep).
bool TcpTransport::prepare_sleep() {
  bool ready = false;
  const size_t n = path_peer_count_.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i) {
    Peer* p = path_peers_[i].load(std::memory_order_relaxed);
    if (p->failed) continue;
    if (p->path->prepare_sleep()) ready = true;
    // A backlog is left by a sender (which raises the writer's flag itself) or
    // by this thread's own polls.
    if (!p->path->backlog()) continue;
    std::lock_guard<std::mutex> tx(p->tx_mu);
    if (!p->tx_failed && p->path->prepare_sleep_locked()) ready = true;
  }
  return ready;
}

void TcpTransport::handle_events(const epoll_event* events, int n) {
  for (int i = 0; i < n && !stop_.load(std::memory_order_relaxed); ++i) {
    uint32_t id = events[i].data.u32;
    if (id == kWakeEventId) continue;  // abort(): stop_ is set, the loops end
    if (id == kRescanEventId) {  // a pair with rings connected: the loops look at them from now on
      uint64_t count = 0;
      [[maybe_unused]] ssize_t r = ::read(rescan_fd_.get(), &count, sizeof(count));
      if (comm_aborts_pending_.load(std::memory_order_relaxed)) run_comm_aborts();  // abort_comm woke us
      continue;
    }
    if (id >= static_cast<uint32_t>(size_)) {  // an extra socket
      const uint32_t index = id - static_cast<uint32_t>(size_);
      Peer* peer = peers_[index / tcp::kMaxSocketsPerPeer].get();
      Lane* lane = peer->lanes[index % tcp::kMaxSocketsPerPeer].get();
      if (peer->failed || lane->closed) continue;
      if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_lane_readable(*peer, *lane);
      if (!peer->failed && (events[i].events & EPOLLOUT)) on_writable(*peer);
      continue;
    }
    Peer& p = *peers_[id];
    if (p.failed) continue;
    if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(p);
    if (p.failed) continue;
    if (p.path) {
      p.path->poll();  // a doorbell: data arrived, or space to write
      if (p.failed || !p.path->backlog()) continue;
      std::lock_guard<std::mutex> tx(p.tx_mu);
      if (!p.failed) p.path->flush_locked();
    } else if (events[i].events & EPOLLOUT) {
      on_writable(p);
    }
  }
}

// Returns once no thread has driven for a whole tick (or on stop).
void TcpTransport::park_while_driven() {
  auto tick = kFirstParkTick;
  for (;;) {
    if (stop_.load(std::memory_order_acquire)) return;
    uint64_t epoch = driver_epoch_.load(std::memory_order_acquire);
    if (drivers_.load(std::memory_order_acquire) == 0 && epoch == bg_epoch_) return;
    bg_epoch_ = epoch;
    std::unique_lock<std::mutex> lock(park_mu_);
    park_cv_.wait_for(lock, tick, [&] { return stop_.load(std::memory_order_acquire); });
    tick = std::min(2 * tick, kLongestParkTick);
  }
}

void TcpTransport::progress_loop() {
  epoll_event events[kMaxEvents];
  while (!stop_.load(std::memory_order_acquire)) {
    park_while_driven();
    {
      std::unique_lock<std::mutex> rx(rx_mu_, std::try_to_lock);
      if (!rx.owns_lock()) continue;  // a driver: park again
      bg_holds_.store(true, std::memory_order_release);
      poll_once(true);
      if (comm_aborts_pending_.load(std::memory_order_relaxed)) run_comm_aborts();
      bool ready = prepare_sleep();
      bg_holds_.store(false, std::memory_order_release);
      let_go(rx);
      if (ready) continue;
    }
    // Not holding rx_mu_ while asleep: a waiting thread can start driving at
    // once. Sliced even with no rings yet: a pair's rings may be registered
    // just before this sleep, and a driver may read the rescan event that
    // announced them, so this thread would not have raised their sleep flag
    // and no doorbell would come (a message that waited for the background
    // thread stayed unread until the deadline).
    int n = epoll_wait(bg_epoll_fd_.get(), events, kMaxEvents, int(kBlockSlice.count()));
    if (n < 0 && errno != EINTR) {
      TDIST_LOG(LogLevel::Error, options_.label << ": epoll_wait failed: " << errno_string(errno));
      return;
    }
    // A thread that started waiting meanwhile handles these events itself.
    if (drivers_.load(std::memory_order_acquire) > 0) continue;
    std::unique_lock<std::mutex> rx(rx_mu_, std::try_to_lock);
    if (rx.owns_lock()) {
      bg_holds_.store(true, std::memory_order_release);
      if (n > 0) handle_events(events, n);
      bg_holds_.store(false, std::memory_order_release);
      let_go(rx);
    }
  }
}

}  // namespace tdist
