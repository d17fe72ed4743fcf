// The framing of the TCP transport: every message is a header then `size`
// payload bytes. Host byte order: both ends are the same build on the same
// kind of machine (little-endian x86-64/arm64).
#pragma once

#include <cstdint>

namespace tdist::wire {

inline constexpr uint32_t kMessageMagic = 0x54444d31;  // "TDM1"
inline constexpr uint32_t kHelloMagic = 0x54444832;    // "TDH2"
// A rank that gives up (timeout, lost peer) tells its peers why before it
// closes: the header's size is the length of the text that follows, its
// `reserved` 1 + the group rank it gave up waiting for (0: none; see
// tcp_blame.cpp).
inline constexpr uint32_t kAbortMagic = 0x54444131;    // "TDA1"
inline constexpr uint64_t kMaxAbortText = 64 * 1024;
// An abort notice with this `reserved` is a goodbye: the rank left on purpose
// (destroy_process_group), it did not give up; the text says how it left.
inline constexpr uint32_t kNoticeGoodbye = 0xffffffff;
// A rank left one communicator (destroy_process_group of a group over shared
// connections): a zero-size frame whose `comm` names it, sent after every
// message of that communicator, so that the peer fails its receives from
// this rank there at once, naming it as gone.
inline constexpr uint32_t kLeaveMagic = 0x54444c31;  // "TDL1"
// A rank aborted one communicator (Communicator::abort) while its connections
// stay: `comm` names it, `reserved` is the rank's rank in it, `size` the
// length of the text that follows (at most kMaxCommAbortText), whose first
// `tag` bytes name the group and the rest say why. Sent after the messages of
// that communicator this rank still finishes, so that the peer fails its
// requests there at once, naming this rank, and drops what arrives later.
inline constexpr uint32_t kCommAbortMagic = 0x54445831;  // "TDX1"
inline constexpr uint64_t kMaxCommAbortText = 4096;
// Peers that exchange data through shared-memory rings keep their socket for
// these zero-size frames ("look at the ring") and for abort notices.
inline constexpr uint32_t kDoorbellMagic = 0x54444231;  // "TDB1"

// `comm`: the communicator a message (or request-to-send) belongs to; every
// group of a process shares the process's connections (0: the default group).
struct MessageHeader {
  uint32_t magic;
  uint32_t reserved;
  uint64_t tag;
  uint64_t size;
  uint32_t comm = 0;
  uint32_t unused = 0;
};
static_assert(sizeof(MessageHeader) == 32);

// The connection handshake (transport/tcp/tcp_handshake.h): the acceptor speaks
// first with a fresh nonce, the dialler answers with a Hello that proves it
// knows the job token, the acceptor answers with a Welcome that proves the
// same back. Without a job token the proofs are zero and only the published
// store nonce is checked (torch's open mode).
inline constexpr uint32_t kChallengeMagic = 0x54444332;  // "TDC2"
inline constexpr uint32_t kWelcomeMagic = 0x54445732;    // "TDW2"
inline constexpr uint32_t kChallengeWantsToken = 1;
// Welcome verdicts. Connections open on first use, so two ranks may dial each
// other at once: the lower rank's connection is kept, and the acceptor that
// dials too answers the higher rank's with kWelcomeSuperseded (proven like an
// acceptance); the higher rank then takes the connection the lower one opens.
inline constexpr uint32_t kWelcomeRefused = 0;
inline constexpr uint32_t kWelcomeAccepted = 1;
inline constexpr uint32_t kWelcomeSuperseded = 2;
inline constexpr uint32_t kWelcomeAlreadyConnected = 3;

struct Challenge {
  uint32_t magic;
  uint32_t flags;        // kChallengeWantsToken when the acceptor has a job token
  uint8_t nonce[16];     // fresh for this connection
};
static_assert(sizeof(Challenge) == 24);

struct Hello {
  uint32_t magic;
  uint32_t rank;         // the dialler's rank
  uint32_t size;         // its world size, must match
  uint32_t lane;         // which of the pair's sockets this is: 0 the main one, then the extra ones
  uint64_t store_nonce;  // the acceptor's published nonce: proves the dialler read our address
  uint8_t nonce[16];     // the dialler's fresh nonce
  uint8_t proof[32];     // HMAC of the job token over both nonces and the fields above; zero without a token
};
static_assert(sizeof(Hello) == 72);

struct Welcome {
  uint32_t magic;
  uint32_t accepted;     // a kWelcome* verdict: kWelcomeRefused when the dialler's proof or fields were wrong
  uint8_t proof[32];     // the acceptor's HMAC; zero without a token
};
static_assert(sizeof(Welcome) == 40);

// Choosing a pair's data path, right after the hello, when some registered
// data path other than the socket reaches the peer (transport/data_path.h):
// each end sends the names it would use, in its order of preference, joined
// by commas (list_size bytes follow the frame; 0: only the socket).
inline constexpr uint32_t kPathPickMagic = 0x54445031;  // "TDP1"
inline constexpr uint32_t kMaxPathPickList = 1024;
struct PathPick {
  uint32_t magic;
  uint32_t list_size;
};
static_assert(sizeof(PathPick) == 8);

// Set-up of shared-memory rings between two ranks of one host, right after
// the hello: the lower rank offers a segment (its name follows; name_size 0:
// no offer), the higher rank replies whether it mapped it.
inline constexpr uint32_t kShmOfferMagic = 0x54445331;  // "TDS1"
inline constexpr uint32_t kShmReplyMagic = 0x54445231;  // "TDR1"
inline constexpr uint32_t kMaxShmName = 255;
// Both also say who the rank is for large messages in one copy
// (transport/shm/shm_single_copy.h): its pid, pid namespace, the address of
// its word that will hold the other's nonce, and the nonce the other must
// store (pid 0: it does not take part).
struct ShmOffer {
  uint32_t magic;
  uint32_t name_size;
  uint64_t ring_bytes;  // capacity of each direction's ring
  int32_t pid;
  uint32_t unused;
  uint64_t pid_ns;
  uint64_t probe;
  uint64_t nonce;
};
static_assert(sizeof(ShmOffer) == 48);
struct ShmReply {
  uint32_t magic;
  uint32_t accepted;  // 1: mapped, use the rings; 0: stay on TCP
  int32_t pid;
  uint32_t unused;
  uint64_t pid_ns;
  uint64_t probe;
  uint64_t nonce;
};
static_assert(sizeof(ShmReply) == 40);
// A large message announced in the ring, its bytes left where they are: a
// MessageHeader with this magic and no payload after it; the pair's message
// count in this direction names its slot (transport/shm/shm_single_copy.h).
inline constexpr uint32_t kShmSingleCopyMagic = 0x54445a31;  // "TDZ1"

// Large messages between sockets go by rendezvous, so that they land straight
// in the receive buffer instead of an "unexpected" buffer the receiver would
// allocate (page faults) and copy from: the sender announces the message with
// a request-to-send (tag, size; `reserved` carries the sender's id for it),
// the receiver answers clear-to-send (that id) once a receive matches, and the
// sender then streams the payload framed as rendezvous data. With several
// sockets per peer the payload goes in pieces, one per socket, each framed as
// rendezvous data: `reserved` the id, `tag` the piece's offset in the
// payload, `size` its length (one piece: offset 0, the whole payload).
// The request-to-send carries the payload's first rendezvous_head(size) bytes
// (its head) right after the header, so data streams while the clear-to-send
// travels back; the data frames then cover the rest, from that offset on.
inline constexpr uint32_t kRtsMagic = 0x54445131;      // "TDQ1"
inline constexpr uint32_t kCtsMagic = 0x54444331;      // "TDC1"
inline constexpr uint32_t kRdvDataMagic = 0x54445631;  // "TDV1"

// The head a request-to-send carries: about what streams during the round
// trip of the announcement on loopback (tens of µs), at most half the payload.
// A receiver that has no receive posted yet buffers it (a copy it saves the
// rest of the payload). Both ends compute it.
inline constexpr uint64_t kRendezvousHeadBytes = 256 * 1024;
inline uint64_t rendezvous_head(uint64_t size) {
  return size / 2 < kRendezvousHeadBytes ? size / 2 : kRendezvousHeadBytes;
}

// How the rest of a rendezvous payload (`size` bytes after its head) is cut
// for `sockets` connections (offsets relative to the rest): both ends compute
// it, so the receiver knows which sockets will carry data. Pieces are at least
// kMinPieceBytes (smaller ones would cost more in system calls and wake-ups
// than the parallel streams gain), 64-byte aligned, the last one taking the
// remainder.
inline constexpr uint64_t kMinPieceBytes = 64 * 1024;
inline uint64_t piece_count(uint64_t size, uint64_t sockets) {
  uint64_t n = size / kMinPieceBytes;
  return n < 1 ? 1 : (n < sockets ? n : sockets);
}
inline uint64_t piece_offset(uint64_t size, uint64_t pieces, uint64_t i) {
  return i * (size / pieces & ~uint64_t{63});
}
inline uint64_t piece_size(uint64_t size, uint64_t pieces, uint64_t i) {
  return (i + 1 == pieces ? size : piece_offset(size, pieces, i + 1)) - piece_offset(size, pieces, i);
}

// Largest message the receiver buffers before a matching receive is posted;
// a header announcing more from a peer is a protocol error, not an allocation.
inline constexpr uint64_t kMaxUnexpectedBytes = uint64_t{1} << 38;  // 256 GiB

}  // namespace tdist::wire
