// The TCP transport: non-blocking sockets (TCP_NODELAY), the control channel
// to every peer a rank talks to. A pair connects when it first exchanges a
// message (tcp_connect.cpp), not at set-up: a rank of a large job holds
// sockets only to the peers its algorithms use. A peer's messages go over the first data
// path of TDIST_TRANSPORTS that reaches it (transport/data_path.h): the
// shared-memory rings of transport/shm/ for a peer on this host (its socket
// then carries only doorbells and abort notices), or the socket itself. The
// default group makes one per process; every other group is a Communicator
// over it (transport/communicator.h), its messages told apart by the
// communicator id in their headers: receives match on (communicator, peer,
// tag), whichever path a message came by. Sends are written straight from
// the caller when there is room; receives land directly in the posted buffer
// when the receive was posted before the message arrived, otherwise in an
// "unexpected" buffer that a later receive copies from; large socket messages
// wait for their receive (rendezvous), so they always land straight in the
// posted buffer.
//
// Progress is driven by the waiting thread itself: wait() polls the data
// paths and sockets for a short spin and then blocks in epoll, so a reply reaches
// the thread that waits for it with at most one wake-up. A background thread
// makes progress only while nobody waits (asynchronous requests, liveness).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tdist/store.h"
#include "transport/data_path.h"
#include "transport/matching.h"
#include "transport/mesh.h"
#include "transport/transport.h"
#include "util/socket.h"

struct epoll_event;

namespace tdist {

// How a waiting thread polls before it blocks: for `spin` after the last
// movement, without yielding the core for the first `pause_only` of it.
struct SpinPolicy {
  std::chrono::nanoseconds spin;
  std::chrono::nanoseconds pause_only;
};

// The options of connect_mesh (transport/mesh.h).
using TcpTransportOptions = MeshOptions;

class TcpTransport final : public Mesh, private PathHost {
 public:
  // Publishes this rank's address under the store and reads every other
  // rank's; blocks until all ranks published (DistNetworkError naming the
  // missing ranks on timeout). Connections open on first use.
  static std::unique_ptr<TcpTransport> connect(Store& store, int rank, int size, TcpTransportOptions options);
  ~TcpTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void post(std::shared_ptr<Request> request) override;
  void wait(Request& request, Deadline deadline, bool abort_on_error = true) override;
  bool wait_a_while(Request& request, Deadline until) override;
  void abort(std::exception_ptr cause) override;
  // The group left (destroy_process_group): aborts, but tells each connected
  // peer with a goodbye instead of a give-up notice, so that a peer waiting
  // for this rank fails at once saying it left (not that it crashed).
  void close(std::exception_ptr cause) override;
  std::exception_ptr aborted() const override;
  std::exception_ptr failure() const override;
  std::exception_ptr peer_failure(int peer) const override;
  bool peer_vanished(int peer) const override;
  std::vector<int> peers_refusing(const std::vector<int>& peers, Millis limit) const override;  // tcp_probe.cpp
  std::string describe_peer(int peer) const override;
  bool same_host(int peer) const override;
  std::string host_of(int peer) const override;

  // Mesh (transport/mesh.h): a communicator's close; say_goodbye sends
  // wire::kLeaveMagic after the communicator's messages.
  void close_comm(uint32_t comm, std::exception_ptr cause) override;
  void say_goodbye(uint32_t comm, const std::vector<int>& links) override;
  // A communicator's abort (tcp_comm_abort.cpp): whoever holds rx_mu_ (a
  // driving thread, the progress thread, or the caller when nobody does)
  // drops it, so that no reader writes into its buffers after this returns.
  void abort_comm(uint32_t comm, std::exception_ptr cause) override;
  void tell_comm_aborted(uint32_t comm, const std::vector<int>& links, int group_rank, const std::string& group,
                         const std::string& why) override;
  // A communicator's control frame (`h`, then `text`) to each of `links`
  // that has a connection, after what is queued to it: a leave or an abort notice.
  void send_comm_frame(const std::vector<int>& links, const wire::MessageHeader& h, const std::string& text);

  struct Peer;
  struct Directory;
  using Unexpected = BufferedMessage;
  struct Lane;
  struct RendezvousRx;
  struct SendPieces;

 private:
  TcpTransport(int rank, int size, TcpTransportOptions options);
  void start();
  void place_on_this_machine() const;
  // Connections on first use (tcp_connect.cpp). connect_peer returns once the
  // pair is connected (nullptr), or the error that stopped it: the dial or
  // handshake failed, the peer did not dial back, or the transport stopped.
  std::exception_ptr connect_peer(int peer);
  // Dials `p` with all the pair's sockets; false when the peer's own
  // connection to this rank is kept instead (the lower rank's wins).
  bool dial_peer(Peer& p, Deadline deadline);
  // Waits (conn_mu_ held) until the pair is connected or fails.
  std::exception_ptr await_link(Peer& p, Deadline deadline, std::unique_lock<std::mutex>& lock);
  void accept_loop();
  // The peer failed (its connection was lost or it said it gave up or left),
  // the link failed, or the transport stopped: a dial of this rank to it
  // still waiting for its handshake stops at once. Takes dial_mu_ only, so
  // any caller may hold other locks.
  void interrupt_dial(Peer& p);
  // p left communicator `comm` (its goodbye frame came): its receives there fail.
  void on_comm_left(Peer& p, uint32_t comm);
  // Communicator aborts (tcp_comm_abort.cpp). p aborted communicator `comm`
  // (its notice came, `text` after the header): it is dropped here too, with
  // an error naming p. With rx_mu_ held.
  void on_comm_aborted(Peer& p, const wire::MessageHeader& header, const std::string& text);
  // Runs the aborts that abort_comm queued; with rx_mu_ held.
  void run_comm_aborts();
  // Fails and drops everything of `comm`: posted and buffered receives,
  // receives under way (redirected: their payload is read and dropped),
  // queued sends (a send under way finishes from a copy). With rx_mu_ held.
  void drop_comm_locked(uint32_t comm, const std::exception_ptr& cause);
  // Sends of `comm` to p, with p.tx_mu held: as DataPath::abandon_sends_locked.
  void abandon_sends_locked(Peer& p, uint32_t comm, const std::exception_ptr& cause);
  // Announced messages taken off matching that nobody will receive: their
  // data is expected and dropped; the caller then sends each a clear-to-send
  // (their senders wait for it). With mu_ held.
  void discard_announced_locked(const std::vector<std::shared_ptr<Unexpected>>& announced);
  // Makes a connected pair's sockets (and rings) part of the transport.
  void register_peer(Peer& p, Fd main, std::vector<Fd> lanes, std::string address, std::unique_ptr<DataPath> path);
  // The pair could not connect: its posted receives and later sends fail
  // with the first such error, which it returns.
  std::exception_ptr link_failed(Peer& p, std::exception_ptr error);
  int sockets_with(int peer) const;
  // Sets up the data path both ends pick from TDIST_TRANSPORTS and the
  // registered paths (transport/data_path_registry.h) over the pair's fresh
  // (still blocking) socket; null when the socket carries the data (tcp_paths.cpp).
  std::unique_ptr<DataPath> attach_path(int peer, int fd, Deadline deadline);

  // PathHost: what a data path asks of the mesh (tcp_receive.cpp, tcp_transport.cpp).
  char* begin_message(int peer, const wire::MessageHeader& header, MessageSlot& slot) override;
  char* begin_posted_message(int peer, const wire::MessageHeader& header, MessageSlot& slot, bool& waiting) override {
    return matching_.begin_posted_message(peer, header, slot, waiting);
  }
  void end_message(int peer, MessageSlot& slot) override;
  void path_failed(int peer, std::exception_ptr error) override;
  void doorbell_locked(int peer) override;
  void doorbell(int peer) override;

  // Progress (tcp_progress.cpp). Everything that reads from peers runs under
  // rx_mu_, by the background thread or by one waiting thread (the driver).
  void progress_loop();
  void park_while_driven();
  void drive(Request& request, Deadline deadline);
  bool wait_as_bystander(Request& request, Deadline deadline);
  void let_go(std::unique_lock<std::mutex>& rx);
  bool poll_once(bool sockets);  // true when something moved
  bool block_once(Deadline deadline);  // true when it woke for events
  bool prepare_sleep();
  void handle_events(const ::epoll_event* events, int n);
  bool poll_paths();

  // Receiving (tcp_receive.cpp).
  void on_readable(Peer& p);
  // Everything the peer's data path holds; true when it consumed anything.
  bool poll_path(Peer& p);
  void on_writable(Peer& p);
  void on_control_socket(Peer& p);
  bool read_some(Peer& p, char* dst, size_t n, size_t& counter);
  void begin_payload(Peer& p);
  void finish_payload(Peer& p);
  // Rendezvous (tcp_rendezvous_protocol.cpp): large socket messages wait for a receive.
  bool uses_rendezvous(const Peer& p, size_t size) const;
  void on_request_to_send(Peer& p);
  void finish_unexpected_head(Peer& p, std::shared_ptr<Unexpected> entry);
  void on_clear_to_send(Peer& p);
  void begin_rendezvous_data(Peer& p);
  void send_clear_to_send(Peer& p, uint32_t id);
  void expect_rendezvous_data_locked(Peer& p, uint32_t id, std::shared_ptr<Request> req, size_t size,
                                     size_t arrived);
  bool begin_piece(Peer& p, uint32_t id, uint64_t offset, uint64_t bytes, char*& dst);
  void finish_piece(Peer& p, uint32_t id, size_t bytes);
  void fail_rendezvous_receives_locked(Peer& p, const std::exception_ptr& error);
  // The extra sockets (tcp_lanes.cpp): pieces of rendezvous payloads only.
  void on_lane_readable(Peer& p, Lane& lane);
  // The peer closed its main socket (or said why it gives up): fails it, once
  // the pieces still streaming over its extra sockets are in.
  void main_socket_closed(Peer& p, std::exception_ptr error);
  bool all_lanes_closed(const Peer& p) const;
  void fail_peer(Peer& p, std::exception_ptr error);
  void fail_sends_locked(Peer& p, const std::exception_ptr& error);  // with p.tx_mu held
  void fail_incoming_locked(Peer& p, const std::exception_ptr& error);  // with rx_mu_ and mu_ held
  // A receive matched an announced message (Matching::Served::Announced):
  // the rest of it may come now. With mu_ held.
  void clear_announced_locked(const std::shared_ptr<Request>& req, const std::shared_ptr<Unexpected>& entry);
  std::exception_ptr flush_locked(Peer& p);
  std::exception_ptr flush_queue_locked(Peer& p, Lane* lane);  // lane null: the main socket
  void update_output_locked(Peer& p);
  void post_send(std::shared_ptr<Request> req);
  void post_recv(std::shared_ptr<Request> req);
  // Blaming a stall (tcp_blame.cpp).
  struct Notice {
    bool heard = false;
    int waited_for = -1;  // the rank the peer gave up waiting for; -1: it failed otherwise
    std::string text;
    bool left = false;    // a goodbye: the peer left the group, it did not give up
  };
  // Sends this rank's give-up notice, saying whom it waited for (-1: none),
  // to every peer it has not told yet. With p.tx_mu held, for one peer.
  void send_notice_locked(Peer& p, int waited_for, const std::string& text);
  // The same frame as a goodbye (wire::kNoticeGoodbye): this rank leaves.
  void send_goodbye_locked(Peer& p);
  void write_notice_locked(Peer& p, uint32_t reserved, const std::string& text);
  // The error a notice from p fails its requests with: it left, or it gave up.
  std::exception_ptr notice_error(const Peer& p, uint32_t reserved, const std::string& text) const;
  void record_notice(Peer& p, uint32_t waited_for_plus_1, const std::string& text);  // rx_mu_ held
  // What a wait for `peer` that failed with `what` says once the notices of
  // the ranks that gave up are in: it tells every peer whom it waited for,
  // listens a short while, and follows the chain of waits to its end.
  std::string explain_stall(int peer, Deadline deadline, const std::string& what, bool timed_out);
  std::string chain_of_waits(int peer, bool timed_out, bool& settled) const;
  std::string name_peer(int peer) const;  // describe_peer without the address

  const int rank_;
  const int size_;
  const TcpTransportOptions options_;
  // Every peer has its Peer from the start (peers_[rank_] is null); its
  // sockets are there once it is connected (Peer::connected).
  std::vector<std::unique_ptr<Peer>> peers_;
  std::unique_ptr<Directory> directory_;  // the records read at set-up, the listeners
  std::thread acceptor_;                  // answers the peers that dial this rank
  // Guards each Peer's link state; signalled when a pair connects or fails.
  std::mutex conn_mu_;
  std::mutex dial_mu_;  // guards Peer::dialling_fd; a leaf: nothing else is locked under it
  std::condition_variable conn_cv_;
  // Written when a pair with rings connects, so that a thread asleep in
  // epoll looks at the new rings (read back by whoever wakes).
  Fd rescan_fd_;
  // The same sockets in two epoll sets: a driving thread sleeps on the first,
  // the background thread on the second. epoll wakes one sleeper per set per
  // event, so sharing one set could hand a driver's wake-up to the background
  // thread, which then leaves it unhandled because the driver holds rx_mu_.
  Fd epoll_fd_;
  Fd bg_epoll_fd_;
  // Applies an epoll_ctl to both sets.
  void epoll_update(int op, int fd, uint32_t events, uint32_t id);
  Fd wake_fd_;  // written once, by abort(): stays readable so every epoll_wait returns
  std::thread progress_;
  // The peers reached through a data path other than their socket: the
  // first path_peer_count_ entries, appended as pairs connect (capacity for
  // every peer, so readers need no lock).
  std::unique_ptr<std::atomic<Peer*>[]> path_peers_;
  std::atomic<size_t> path_peer_count_{0};
  std::atomic<bool> tcp_data_peers_{false};   // some peer exchanges data over its socket
  std::atomic<Peer*> lone_socket_peer_{nullptr};  // the only peer, when it exchanges data over its socket
  std::chrono::nanoseconds spin_{0};  // how long a waiter polls before blocking
  std::chrono::nanoseconds pause_only_{0};  // the first part of the spin, polling without yielding
  size_t rendezvous_bytes_ = 0;  // socket messages larger than this go by rendezvous (0: none)

  std::mutex rx_mu_;  // receive state of every peer; held by whoever makes progress
  std::atomic<int> drivers_{0};          // threads inside wait()
  std::atomic<uint64_t> driver_epoch_{0};  // bumped by each wait(): the background thread stays parked
  uint64_t bg_epoch_ = 0;
  std::atomic<bool> bg_holds_{false};  // the background thread holds rx_mu_ (for moments only)                  // the epoch the background thread last saw (its own)
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  std::mutex bystanders_mu_;
  std::vector<Request*> bystanders_;  // waiting threads that could not drive: poked when the driver leaves
  std::atomic<size_t> bystander_count_{0};  // bystanders_.size(), read by let_go without the lock

  // Posted receives, buffered messages, lost peers and closed communicators,
  // above any one wire (transport/matching.h).
  Matching matching_;
  // Matching's mutex, which also guards each Peer's failed/error and
  // rendezvous receives, and notices_: they change together with matching.
  std::mutex& mu_;
  std::atomic<bool> leaving_{false};  // close() rather than abort(): peers get a goodbye
  // Communicator aborts waiting for the holder of rx_mu_ (abort_comm): each
  // gets a ticket; run_comm_aborts runs them in order and counts them done.
  struct CommAbort {
    uint32_t comm;
    std::exception_ptr cause;
  };
  std::mutex comm_abort_mu_;
  std::condition_variable comm_abort_cv_;
  std::vector<CommAbort> comm_aborts_;  // queued, not yet run
  uint64_t comm_aborts_queued_ = 0, comm_aborts_done_ = 0;
  std::atomic<bool> comm_aborts_pending_{false};  // comm_aborts_ is not empty: read by the drivers' loops
  std::vector<Notice> notices_;  // by peer: what its give-up notice said
};

}  // namespace tdist
