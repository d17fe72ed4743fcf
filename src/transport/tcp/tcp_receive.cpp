// Receiving: the framing state machine over a peer's socket, and matching
// the messages that arrive over any path with posted receives.
// Everything here runs with rx_mu_ held.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tdist/errors.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_silence.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"
#include "util/logging.h"

namespace tdist {

namespace {
// Payload reads at least this large go straight into the destination buffer.
constexpr size_t kDirectReadBytes = 16 * 1024;
constexpr size_t kHeaderBytes = sizeof(wire::MessageHeader);
// Reads into the staging buffer (headers, small payloads) take at most this
// much: a larger read would pull the start of the next large payload through
// staging, one extra copy (up to 200 KB of each 1 MiB message when it read the
// whole staging buffer), where it could go straight to its buffer. Many small
// messages still come in one read.
constexpr size_t kStagingReadBytes = 16 * 1024;

std::exception_ptr bad_header(const std::string& peer, const wire::MessageHeader& h) {
  return std::make_exception_ptr(DistNetworkError("protocol error from " + peer + ": bad message header (magic " +
                                                  std::to_string(h.magic) + ", size " + std::to_string(h.size) +
                                                  ")"));
}
}  // namespace

void TcpTransport::on_writable(Peer& p) {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(p.tx_mu);
    error = flush_locked(p);
    if (!error) update_output_locked(p);
  }
  if (error) fail_peer(p, error);
}

void TcpTransport::on_readable(Peer& p) {
  if (p.path) {
    on_control_socket(p);
    return;
  }
  constexpr size_t hsize = kHeaderBytes;
  // A read that returned less than it asked for emptied the socket: asking
  // again would fail with EAGAIN, a wasted system call on every small message
  // (half a recv per 8-byte all_reduce). The epoll registration is
  // level-triggered, so whatever arrives later is reported anyway.
  bool drained = false;
  for (;;) {
    size_t buffered = p.stage_end - p.stage_begin;
    if (!p.in_payload) {
      if (buffered >= hsize) {
        std::memcpy(&p.header, p.staging.data() + p.stage_begin, hsize);
        p.stage_begin += hsize;
        if ((p.header.magic == wire::kAbortMagic && p.header.size <= wire::kMaxAbortText) ||
            (p.header.magic == wire::kCommAbortMagic && p.header.size <= wire::kMaxCommAbortText)) {
          p.abort_text.resize(p.header.size);
          p.in_payload = true;
          p.payload_done = 0;
          p.dst = p.abort_text.data();
          continue;
        }
        if (p.header.size > wire::kMaxUnexpectedBytes) {
          fail_peer(p, bad_header(describe_peer(p.rank), p.header));
          return;
        }
        switch (p.header.magic) {
          case wire::kMessageMagic: begin_payload(p); break;
          case wire::kRtsMagic: on_request_to_send(p); break;
          case wire::kCtsMagic: on_clear_to_send(p); break;
          case wire::kLeaveMagic:  // a header alone: a size would be read as the next header
            if (p.header.size != 0) fail_peer(p, bad_header(describe_peer(p.rank), p.header));
            else on_comm_left(p, p.header.comm);
            break;
          case wire::kRdvDataMagic: begin_rendezvous_data(p); break;
          default: fail_peer(p, bad_header(describe_peer(p.rank), p.header));
        }
        if (p.failed) return;
        continue;
      }
    } else {
      size_t need = p.header.size - p.payload_done;
      if (buffered > 0 && need > 0) {
        size_t take = std::min(buffered, need);
        if (p.dst) std::memcpy(p.dst + p.payload_done, p.staging.data() + p.stage_begin, take);
        p.stage_begin += take;
        p.payload_done += take;
        need -= take;
      }
      if (need == 0) {
        finish_payload(p);
        if (p.failed) return;
        continue;
      }
      if (p.dst && need >= kDirectReadBytes) {
        if (!drained && read_some(p, p.dst + p.payload_done, need, p.payload_done)) continue;
        if (!p.failed) set_rcvlowat(p.fd.get(), p.rcvlowat, static_cast<int>(std::min(need, kStreamReadBytes)));
        return;
      }
    }
    // Refill the staging buffer.
    if (p.stage_begin == p.stage_end) p.stage_begin = p.stage_end = 0;
    if (p.stage_begin > 0 && p.staging.size() - p.stage_end < hsize) {
      std::memmove(p.staging.data(), p.staging.data() + p.stage_begin, p.stage_end - p.stage_begin);
      p.stage_end -= p.stage_begin;
      p.stage_begin = 0;
    }
    const size_t want = std::min(kStagingReadBytes, p.staging.size() - p.stage_end), before = p.stage_end;
    if (drained || !read_some(p, p.staging.data() + p.stage_end, want, p.stage_end)) {
      // Whatever comes next (a header, the tail of a payload) must wake us, however small.
      if (!p.failed) set_rcvlowat(p.fd.get(), p.rcvlowat, 1);
      return;
    }
    drained = p.stage_end - before < want;
  }
}

// One non-blocking read of up to n bytes into dst, adding what arrived to
// `counter`. False when the socket has nothing more now, or the connection is
// gone (then the peer is failed).
bool TcpTransport::read_some(Peer& p, char* dst, size_t n, size_t& counter) {
  for (;;) {
    ssize_t r = ::recv(p.fd.get(), dst, n, MSG_DONTWAIT);
    if (r > 0) {
      counter += static_cast<size_t>(r);
      p.bytes_read += static_cast<uint64_t>(r);
      return true;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    const int err = r < 0 ? errno : 0;
    // Proof that the peer's process is gone only when its kernel said so (an
    // end or a reset); a host that stopped answering (ETIMEDOUT: power, cable)
    // is silence, which the failure agreement weighs by its own timeout.
    const bool peer_kernel_spoke = r == 0 || err == ECONNRESET || err == EPIPE;
    if (peer_kernel_spoke && !p.notice_heard && !stop_.load(std::memory_order_acquire))
      p.vanished.store(true, std::memory_order_release);
    main_socket_closed(p, std::make_exception_ptr(DistNetworkError(
                     "connection to " + describe_peer(p.rank) + " lost: " +
                     (r == 0 ? std::string("closed by the peer (it may have exited or crashed)")
                             : tcp::connection_error_text(err)))));
    return false;
  }
}

// A header arrived over the socket: find its receive, or buffer it.
void TcpTransport::begin_payload(Peer& p) {
  p.in_payload = true;
  p.payload_done = 0;
  p.dst = begin_message(p.rank, p.header, p.rx);
}

// A header arrived over any path: matching finds its receive, or buffers it.
char* TcpTransport::begin_message(int peer, const wire::MessageHeader& header, MessageSlot& slot) {
  return matching_.begin_message(peer, header, slot);
}

void TcpTransport::finish_payload(Peer& p) {
  p.in_payload = false;
  p.dst = nullptr;
  if (p.header.magic == wire::kRdvDataMagic) {
    finish_piece(p, p.header.reserved, p.header.size);
    return;
  }
  if (p.header.magic == wire::kCommAbortMagic) {
    on_comm_aborted(p, p.header, p.abort_text);
    return;
  }
  if (p.header.magic == wire::kAbortMagic) {
    record_notice(p, p.header.reserved, p.abort_text);
    main_socket_closed(p, notice_error(p, p.header.reserved, p.abort_text));
    return;
  }
  if (p.rx.buffered && p.rx.buffered->rendezvous) {
    auto entry = std::move(p.rx.buffered);
    p.rx.buffered.reset();
    finish_unexpected_head(p, std::move(entry));
    return;
  }
  end_message(p.rank, p.rx);
}

void TcpTransport::end_message(int peer, MessageSlot& slot) { matching_.end_message(peer, slot); }

// The socket of a peer whose data comes through another path carries only
// complete small frames: doorbells (look at the path) and an abort notice.
void TcpTransport::on_control_socket(Peer& p) {
  for (;;) {
    while (p.stage_end - p.stage_begin >= kHeaderBytes) {
      wire::MessageHeader h;
      std::memcpy(&h, p.staging.data() + p.stage_begin, kHeaderBytes);
      if (h.magic == wire::kDoorbellMagic && h.size == 0) {
        p.stage_begin += kHeaderBytes;
        continue;
      }
      if (h.magic == wire::kLeaveMagic && h.size == 0) {
        p.stage_begin += kHeaderBytes;
        poll_path(p);  // the communicator's last messages came through the ring first
        on_comm_left(p, h.comm);
        continue;
      }
      if (h.magic == wire::kCommAbortMagic && h.size <= wire::kMaxCommAbortText) {
        if (p.stage_end - p.stage_begin < kHeaderBytes + h.size) break;  // the text is still on its way
        std::string text(p.staging.data() + p.stage_begin + kHeaderBytes, h.size);
        p.stage_begin += kHeaderBytes + h.size;
        poll_path(p);  // the communicator's messages before the notice came through the ring
        on_comm_aborted(p, h, text);
        if (p.failed) return;
        continue;
      }
      if (h.magic != wire::kAbortMagic || h.size > wire::kMaxAbortText) {
        fail_peer(p, bad_header(describe_peer(p.rank), h));
        return;
      }
      if (p.stage_end - p.stage_begin < kHeaderBytes + h.size) break;  // the text is still on its way
      std::string text(p.staging.data() + p.stage_begin + kHeaderBytes, h.size);
      p.stage_begin += kHeaderBytes + h.size;
      poll_path(p);  // what the peer sent before giving up still counts
      record_notice(p, h.reserved, text);
      if (!p.failed) fail_peer(p, notice_error(p, h.reserved, text));
      return;
    }
    if (p.stage_begin == p.stage_end) p.stage_begin = p.stage_end = 0;
    if (p.stage_begin > 0) {
      std::memmove(p.staging.data(), p.staging.data() + p.stage_begin, p.stage_end - p.stage_begin);
      p.stage_end -= p.stage_begin;
      p.stage_begin = 0;
    }
    ssize_t r = ::recv(p.fd.get(), p.staging.data() + p.stage_end, p.staging.size() - p.stage_end, MSG_DONTWAIT);
    if (r > 0) {
      p.stage_end += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    int err = errno;
    poll_path(p);  // a peer that sent and exited: its last messages are in its path
    if (!p.failed)
      fail_peer(p, std::make_exception_ptr(DistNetworkError(
                       "connection to " + describe_peer(p.rank) + " lost: " +
                       (r == 0 ? std::string("closed by the peer (it may have exited or crashed)")
                               : tcp::connection_error_text(err)))));
    return;
  }
}

bool TcpTransport::poll_path(Peer& p) {
  if (p.failed) return false;
  return p.path->drain();
}

void TcpTransport::path_failed(int peer, std::exception_ptr error) {
  Peer& p = *peers_[peer];
  if (!p.failed) fail_peer(p, std::move(error));
}

}  // namespace tdist
