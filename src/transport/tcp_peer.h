// The per-connection state of the TCP transport (shared by the engine and
// the rendezvous that creates the connections).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/request.h"
#include "transport/shm_link.h"
#include "transport/tcp_transport.h"
#include "transport/wire.h"
#include "util/socket.h"

namespace tdist {

inline constexpr size_t kStagingBytes = 64 * 1024;
// epoll data id of the transport's wake-up eventfd (peers use their rank).
inline constexpr uint32_t kWakeEventId = UINT32_MAX;

struct TcpTransport::Unexpected {
  int peer;
  uint64_t tag;
  size_t size = 0;       // the message's size (data holds it unless this is a rendezvous)
  bool rendezvous = false;  // only announced: the sender waits for our clear-to-send
  uint32_t rendezvous_id = 0;
  PayloadPool::Buffer data;  // from the transport's pool; returned once copied out
  bool complete = false;
  std::shared_ptr<Request> waiter;  // a receive matched while the payload was still arriving
};

struct TcpTransport::Peer {
  int rank = -1;
  Fd fd;
  std::string address;  // "host:port" of the remote end
  std::string host_id;
  std::unique_ptr<ShmLink> shm;  // data through shared-memory rings when set
  bool failed = false;  // set by the progress thread (under mu_)
  std::exception_ptr error;

  // Sending: guarded by tx_mu.
  struct TxItem {
    wire::MessageHeader header;
    std::shared_ptr<Request> request;  // null for a control frame (clear-to-send)
    size_t sent = 0;  // header and payload bytes written
    bool payload = true;  // false: the header alone (request-to-send, clear-to-send)
    size_t bytes() const { return sizeof(header) + (payload && request ? request->size() : 0); }
  };
  std::mutex tx_mu;
  std::deque<TxItem> txq;
  // A ring peer's txq is not empty: set under tx_mu, read without it by the
  // pollers, which then take tx_mu to flush (a spinning waiter polls the
  // rings in every round, and takes no lock while nothing is queued).
  std::atomic<bool> ring_backlog{false};
  // Sends announced by a request-to-send, waiting for the peer's clear-to-send.
  std::unordered_map<uint32_t, std::shared_ptr<Request>> awaiting_cts;
  uint32_t next_rendezvous_id = 0;
  std::atomic<bool> out_armed{false};  // written under tx_mu; read without it by poll_once
  bool tx_failed = false;
  std::exception_ptr tx_error;

  // Receiving: guarded by the transport's rx_mu_.
  std::vector<char> staging = std::vector<char>(kStagingBytes);
  size_t stage_begin = 0, stage_end = 0;
  bool in_payload = false;
  wire::MessageHeader header{};
  char* dst = nullptr;  // nullptr: discard the payload
  size_t payload_done = 0;
  int rcvlowat = 1;  // the socket's SO_RCVLOWAT (raised while a large payload streams in)
  uint64_t bytes_read = 0;  // from the socket, ever: tells a poll that something moved
  std::shared_ptr<Request> rx_request;
  std::shared_ptr<Unexpected> rx_unexpected;
  // Receives matched to the peer's requests-to-send, by its id, waiting for the
  // data (guarded by the transport's mu_). A null request: discard the data
  // (the receive failed, e.g. on a size mismatch, after the peer was cleared).
  std::unordered_map<uint32_t, std::shared_ptr<Request>> rendezvous_rx;
  std::string abort_text;  // the reason a peer sent before closing
};

}  // namespace tdist
