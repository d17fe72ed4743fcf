// The TCP transport: a full mesh of non-blocking sockets (TCP_NODELAY) served
// by one progress thread (epoll). Sends are written straight from the caller
// when the socket has room; receives land directly in the posted buffer when
// the receive was posted before the message arrived, otherwise in an
// "unexpected" buffer that a later receive copies from.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tdist/store.h"
#include "transport/transport.h"
#include "util/socket.h"

namespace tdist {

struct TcpTransportOptions {
  std::string label;              // "rank 1 of group default_pg": prefixes errors
  std::vector<int> global_ranks;  // transport rank -> global rank, for messages
  Millis timeout{300'000};        // for the connection set-up
  // Given the tag of a receive waiting on a peer and the tag of a message that
  // peer sent instead, says how the ranks are out of step ("" if they are not).
  // The waiting receive then fails at once rather than at its deadline.
  std::function<std::string(uint64_t waiting_tag, uint64_t arrived_tag)> desync{};
};

class TcpTransport final : public Transport {
 public:
  // Publishes this rank's address under the store and connects to every other
  // rank (lower ranks are dialled, higher ranks accepted). Blocks until the
  // mesh is complete; DistNetworkError naming the missing ranks on timeout.
  static std::unique_ptr<TcpTransport> connect(Store& store, int rank, int size, TcpTransportOptions options);
  ~TcpTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::shared_ptr<Request> isend(int peer, uint64_t tag, const void* data, size_t size) override;
  std::shared_ptr<Request> irecv(int peer, uint64_t tag, void* data, size_t size) override;
  void wait(Request& request, Deadline deadline, bool abort_on_error = true) override;
  void abort(std::exception_ptr cause) override;
  std::exception_ptr aborted() const override;
  std::exception_ptr failure() const override;
  std::string describe_peer(int peer) const override;
  bool same_host(int peer) const override;

  struct Peer;
  struct Unexpected;

 private:
  TcpTransport(int rank, int size, TcpTransportOptions options);
  void start();
  void progress_loop();
  void on_readable(Peer& p);
  void on_writable(Peer& p);
  bool read_some(Peer& p, char* dst, size_t n, size_t& counter);
  void begin_payload(Peer& p);
  void finish_payload(Peer& p);
  void fail_peer(Peer& p, std::exception_ptr error);
  std::exception_ptr flush_locked(Peer& p);
  void arm_output_locked(Peer& p, bool on);
  void check_peer_arg(int peer, const char* what) const;
  std::exception_ptr size_mismatch(int peer, uint64_t tag, size_t posted, size_t arrived) const;
  // The desync error for a receive from `peer` waiting on `waiting_tag`, or nullptr.
  std::exception_ptr out_of_step(int peer, uint64_t waiting_tag, uint64_t arrived_tag) const;

  const int rank_;
  const int size_;
  const TcpTransportOptions options_;
  std::vector<std::unique_ptr<Peer>> peers_;  // peers_[rank_] is null
  Fd epoll_fd_;
  Fd wake_fd_;
  std::thread progress_;
  std::atomic<bool> stop_{false};

  mutable std::mutex mu_;  // guards the lists below and aborted_
  std::list<std::shared_ptr<Request>> posted_;        // receives waiting for a message, in post order
  std::list<std::shared_ptr<Unexpected>> unexpected_;  // messages waiting for a receive, in arrival order
  std::exception_ptr aborted_;
};

}  // namespace tdist
