// Reading a peer's extra sockets (TDIST_SOCKETS_PER_PEER > 1). Each carries
// pieces of rendezvous payloads only: a header (wire.h: message id, offset,
// length) then the bytes, read straight into the receive's buffer. Runs with
// rx_mu_ held, like the main socket's framing.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "tdist/errors.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_silence.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"
#include "util/logging.h"

namespace tdist {

namespace {
constexpr size_t kDiscardBytes = 64 * 1024;
}  // namespace

bool TcpTransport::all_lanes_closed(const Peer& p) const {
  for (auto& lane : p.lanes)
    if (!lane->closed) return false;
  return true;
}

// Messages keep their order on the main socket only: pieces on the extra ones
// may still be arriving after the peer's abort notice or end of stream there
// (a rank that sends a large message and then exits). The peer fails once
// every extra socket has ended too, so what was sent is still received.
void TcpTransport::main_socket_closed(Peer& p, std::exception_ptr error) {
  if (p.main_closed) return;
  if (all_lanes_closed(p)) {
    fail_peer(p, error);
    return;
  }
  p.main_closed = true;
  p.main_closed_error = error;
  epoll_update(EPOLL_CTL_DEL, p.fd.get(), 0, 0);
}

void TcpTransport::on_lane_readable(Peer& p, Lane& lane) {
  constexpr size_t hsize = sizeof(wire::MessageHeader);
  const int fd = lane.fd.get();
  while (!p.failed && !lane.closed) {
    char* into;
    size_t ask;
    if (!lane.in_piece) {
      into = reinterpret_cast<char*>(&lane.header) + lane.header_got;
      ask = hsize - lane.header_got;
    } else if (lane.dst) {
      into = lane.dst + lane.piece_done;
      ask = lane.header.size - lane.piece_done;
    } else {
      if (lane.discard.empty()) lane.discard.resize(kDiscardBytes);
      into = lane.discard.data();
      ask = std::min(kDiscardBytes, lane.header.size - lane.piece_done);
    }
    ssize_t r = ask > 0 ? ::recv(fd, into, ask, MSG_DONTWAIT) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Mid-piece, wake only once a good part of the rest is there.
      if (lane.in_piece)
        set_rcvlowat(fd, lane.rcvlowat, static_cast<int>(std::min(ask, kStreamReadBytes)));
      return;
    }
    if (r <= 0 && ask > 0) {
      const int err = errno;
      if (!lane.in_piece && lane.header_got == 0) {
        // Closed between pieces: the peer is exiting or gone. It fails once
        // its main socket has ended too (main_socket_closed), so messages
        // still arriving there are received first.
        epoll_update(EPOLL_CTL_DEL, fd, 0, 0);
        lane.closed = true;
        if (p.main_closed && all_lanes_closed(p)) fail_peer(p, p.main_closed_error);
        return;
      }
      // Cut in the middle of a piece. If the peer said why, that is the reason.
      if (p.main_closed) {
        fail_peer(p, p.main_closed_error);
        return;
      }
      fail_peer(p, std::make_exception_ptr(DistNetworkError(
                       "connection to " + describe_peer(p.rank) + " lost (one of its " +
                       std::to_string(p.lanes.size() + 1) + " sockets, in the middle of a message): " +
                       (r == 0 ? std::string("closed by the peer (it may have exited or crashed)")
                               : tcp::connection_error_text(err)))));
      return;
    }
    if (!lane.in_piece) {
      lane.header_got += static_cast<size_t>(r);
      if (lane.header_got < hsize) continue;
      lane.header_got = 0;
      if (lane.header.magic != wire::kRdvDataMagic) {
        fail_peer(p, std::make_exception_ptr(DistNetworkError(
                         "protocol error from " + describe_peer(p.rank) + ": bad header on an extra socket (magic " +
                         std::to_string(lane.header.magic) + ", size " + std::to_string(lane.header.size) + ")")));
        return;
      }
      char* dst = nullptr;
      if (!begin_piece(p, lane.header.reserved, lane.header.tag, lane.header.size, dst)) return;
      lane.in_piece = true;
      lane.dst = dst;
      lane.piece_done = 0;
    } else {
      lane.piece_done += static_cast<size_t>(r);
    }
    if (lane.in_piece && lane.piece_done == lane.header.size) {
      lane.in_piece = false;
      lane.dst = nullptr;
      set_rcvlowat(fd, lane.rcvlowat, 1);  // the next header, however small, must wake us
      finish_piece(p, lane.header.reserved, lane.header.size);
    }
  }
}

}  // namespace tdist
