// The framing of the TCP transport: every message is a header then `size`
// payload bytes. Host byte order: both ends are the same build on the same
// kind of machine (little-endian x86-64/arm64).
#pragma once

#include <cstdint>

namespace tdist::wire {

inline constexpr uint32_t kMessageMagic = 0x54444d31;  // "TDM1"
inline constexpr uint32_t kHelloMagic = 0x54444831;    // "TDH1"
// A rank that gives up (timeout, lost peer) tells its peers why before it
// closes: the header's size is the length of the text that follows.
inline constexpr uint32_t kAbortMagic = 0x54444131;    // "TDA1"
inline constexpr uint64_t kMaxAbortText = 64 * 1024;

struct MessageHeader {
  uint32_t magic;
  uint32_t reserved;
  uint64_t tag;
  uint64_t size;
};
static_assert(sizeof(MessageHeader) == 24);

// Sent by the dialling rank right after connecting.
struct Hello {
  uint32_t magic;
  uint32_t rank;   // the dialler's rank
  uint32_t size;   // its world size, must match
  uint32_t reserved;
  uint64_t nonce;  // the acceptor's published nonce: proves the dialler read our address
};
static_assert(sizeof(Hello) == 24);

// Largest message the receiver buffers before a matching receive is posted;
// a header announcing more from a peer is a protocol error, not an allocation.
inline constexpr uint64_t kMaxUnexpectedBytes = uint64_t{1} << 38;  // 256 GiB

}  // namespace tdist::wire
