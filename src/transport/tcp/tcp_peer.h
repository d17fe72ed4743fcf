// The per-connection state of the TCP transport (shared by the engine and
// the rendezvous that creates the connections).
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/request.h"
#include "transport/data_path.h"
#include "transport/tcp/tcp_record.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"
#include "util/socket.h"

namespace tdist {

inline constexpr size_t kStagingBytes = 64 * 1024;
// While a large payload streams into its buffer, the socket reports readable
// only once this much of it (or all that is left) has arrived: fewer, larger
// reads, and fewer window updates and wake-ups for the sender.
inline constexpr size_t kStreamReadBytes = 256 * 1024;

// Sets a socket's SO_RCVLOWAT, remembering it in `current` (no call when unchanged).
inline void set_rcvlowat(int fd, int& current, int bytes) {
  if (current == bytes) return;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof(bytes)) == 0) current = bytes;
}
// epoll data ids: peers' main sockets use their rank, extra sockets
// size + rank * kMaxSocketsPerPeer + index; then the transport's own eventfds.
inline constexpr uint32_t kWakeEventId = UINT32_MAX;
inline constexpr uint32_t kRescanEventId = UINT32_MAX - 1;

// A received rendezvous message whose payload is arriving, in one piece or in
// several (one per socket of the peer, see Lane).
struct TcpTransport::RendezvousRx {
  std::shared_ptr<Request> request;  // null: discard the data (the receive already failed)
  size_t size = 0;                   // the announced size
  size_t left = 0;                   // payload bytes not yet arrived (the head counts too)
  bool on_lanes = false;             // some pieces come over the extra sockets
};

// A send whose payload goes out in pieces over several sockets: it completes
// when the last piece is written (all queues are under the peer's tx_mu).
struct TcpTransport::SendPieces {
  size_t left = 0;
  bool failed = false;  // completed with an error already
};

// What set-up read from the store, and where this rank listens: what a pair
// needs to connect on first use.
struct TcpTransport::Directory {
  std::vector<tcp::PeerRecord> records;                 // by rank, this rank's included
  std::vector<std::vector<std::string>> per_interface;  // this rank's addresses on each listed interface
  std::optional<std::string> token;                     // the job token, read once
  std::vector<Fd> listeners;                            // one per listed interface, else one
};

struct TcpTransport::Peer {
  int rank = -1;
  std::string host_id;     // from its record
  std::string advertised;  // "address:port" from its record, before it is connected
  // How far the pair is in connecting (under the transport's conn_mu_).
  // Awaiting: this rank's dial was superseded, the peer's is on its way;
  // Accepting: the peer's connection is in, its other sockets may follow.
  enum class Link { None, Dialling, Awaiting, Accepting, Connected, Failed };
  Link link = Link::None;
  std::exception_ptr link_error;  // Failed: why
  // The socket this rank's dialling thread is handshaking on (-1: none;
  // under the transport's dial_mu_): shut when the peer fails, so that the
  // dial stops waiting at once (TcpTransport::interrupt_dial).
  int dialling_fd = -1;
  // Set (release) once the fields below describe live sockets; nothing
  // else touches them before.
  std::atomic<bool> connected{false};
  Fd fd;
  std::vector<std::unique_ptr<Lane>> lanes;  // the extra sockets (none by default)
  std::string address;  // "host:port" of the remote end
  // The peer's messages go over this path when set (shared-memory rings),
  // else over the socket.
  std::unique_ptr<DataPath> path;
  bool failed = false;  // set by the progress thread (under mu_)
  std::exception_ptr error;

  // Sending: guarded by tx_mu.
  struct TxItem {
    wire::MessageHeader header;
    std::shared_ptr<Request> request;  // null for a control frame (clear-to-send)
    size_t sent = 0;     // header and payload bytes written
    size_t length = 0;   // payload bytes after the header (all, a piece, or a request-to-send's head)
    size_t offset = 0;   // where they start in the request's data
    bool completes = true;  // writing it completes the send (not a request-to-send's: the rest follows)
    std::shared_ptr<SendPieces> pieces{};  // set when the payload is one of several pieces
    size_t bytes() const { return sizeof(header) + length; }
    char* payload_data() const { return static_cast<char*>(request->data()) + offset; }
  };
  std::mutex tx_mu;
  std::deque<TxItem> txq;
  // Sends announced by a request-to-send, waiting for the peer's clear-to-send.
  std::unordered_map<uint32_t, std::shared_ptr<Request>> awaiting_cts;
  // The largest frame of rendezvous data on the main socket (0: the whole
  // rest in one), so that a clear-to-send for the peer's own message can pass.
  uint64_t slice_bytes = 0;
  uint32_t next_rendezvous_id = 0;
  std::atomic<bool> out_armed{false};  // written under tx_mu; read without it by poll_once
  bool tx_failed = false;
  std::exception_ptr tx_error;
  // Give-up notices (tcp_blame.cpp): this rank told the peer it gives up,
  // and nothing may follow; or a message was cut off half-written, and no
  // notice may follow either.
  bool notice_sent = false;
  bool tx_torn = false;

  // Receiving: guarded by the transport's rx_mu_.
  std::vector<char> staging;  // kStagingBytes, once connected
  size_t stage_begin = 0, stage_end = 0;
  bool in_payload = false;
  wire::MessageHeader header{};
  char* dst = nullptr;  // nullptr: discard the payload
  size_t payload_done = 0;
  int rcvlowat = 1;  // the socket's SO_RCVLOWAT (raised while a large payload streams in)
  uint64_t bytes_read = 0;  // from the socket, ever: tells a poll that something moved
  MessageSlot rx;  // where the message arriving over the socket goes
  // Receives matched to the peer's requests-to-send, by its id, waiting for the
  // data (guarded by the transport's mu_).
  std::unordered_map<uint32_t, RendezvousRx> rendezvous_rx;
  // Work on the extra sockets is under way (cleared rendezvous receives whose
  // pieces use them, and lanes waiting to write): the lone-peer fast poll,
  // which reads the main socket only, must then ask epoll.
  std::atomic<int> lanes_busy{0};
  std::string abort_text;  // the reason a peer sent before closing
  // The peer's notice arrived: its socket stays open for writing, so that
  // this rank can still tell it whom it waits for.
  bool notice_heard = false;
  // The main socket ended (EOF or reset) with no notice before it: the peer's
  // process is gone (Mesh::peer_vanished). Written by the reader, read by anyone.
  std::atomic<bool> vanished{false};
  // The main socket is closed while extra sockets still deliver pieces sent
  // before it: the peer fails with this error once they are closed too
  // (rx_mu_; see main_socket_closed).
  bool main_closed = false;
  std::exception_ptr main_closed_error;
};

// One of a peer's extra sockets (TDIST_SOCKETS_PER_PEER > 1). They carry only
// pieces of rendezvous payloads, so one large message streams over all the
// connections at once; everything else, and the order of messages, stays on
// the main socket.
struct TcpTransport::Lane {
  Fd fd;
  uint32_t event_id = 0;
  bool closed = false;  // the peer closed it while idle (it exits); the main socket tells why
  // Sending: guarded by the peer's tx_mu.
  std::deque<Peer::TxItem> txq;
  bool out_armed = false;
  // Receiving: guarded by rx_mu_. A piece is a header then its bytes.
  wire::MessageHeader header{};
  size_t header_got = 0;
  bool in_piece = false;
  char* dst = nullptr;  // nullptr: discard (into `discard`)
  size_t piece_done = 0;
  int rcvlowat = 1;
  std::vector<char> discard;
};

}  // namespace tdist
