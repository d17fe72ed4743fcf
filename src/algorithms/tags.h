// Message tags. Collectives of one group run in the same order on every rank
// and carry their sequence number in the tag, so a fast rank's messages for
// the next operation can never be taken for this one's.
//   bit 63       1 = collective, 0 = point-to-point
//   bits 56..62  operation code (collectives)
//   bits 36..55  sequence number, modulo 2^20
//   bits 24..35  the call's signature (CollectiveCall): dtype, reduce op, root
//   bits 0..23   step within the operation
// A message whose signature differs from the receive's comes from a rank that
// called the same collective with other arguments: the receive fails at once
// naming both calls (describe_desync), on every path the message takes, at no
// cost in messages.
// Point-to-point: bits 0..31 hold the user's tag.
#pragma once

#include <cstdint>
#include <string>

#include "tdist/dtype.h"
#include "tdist/reduce_op.h"

namespace tdist {

enum class OpCode : uint8_t {
  Broadcast = 1,
  AllReduce = 2,
  Barrier = 3,
  Reduce = 4,
  AllGather = 5,
  Gather = 6,
  Scatter = 7,
  ReduceScatter = 8,
  AllToAll = 9,
  MonitoredBarrier = 10,
  Fingerprint = 11,  // the TDIST_DEBUG=DETAIL check before a collective
  // A step of a hierarchical collective (engines/hierarchical_engine.cpp), on
  // the communicators inside a host or among hosts: the signature field holds
  // the step's number, so consecutive steps never share a tag.
  HostStep = 12,
};

// One collective call: its operation and the arguments every rank must agree
// on, packed in 12 bits (4 each; 0: not an argument of this collective; a
// root is kept modulo 15).
struct CollectiveCall {
  OpCode code;
  uint16_t signature = 0;
  CollectiveCall(OpCode c) : code(c) {}  // NOLINT: a call without arguments to agree on
  CollectiveCall(OpCode c, DType dtype, int root = -1) : code(c), signature(pack(dtype, 0, root)) {}
  CollectiveCall(OpCode c, DType dtype, ReduceOp op, int root = -1)
      : code(c), signature(pack(dtype, static_cast<unsigned>(op.kind()) + 1, root)) {}

 private:
  static uint16_t pack(DType dtype, unsigned op, int root) {
    const unsigned r = root < 0 ? 0 : static_cast<unsigned>(root % 15) + 1;
    return static_cast<uint16_t>((static_cast<unsigned>(dtype) + 1) | (op << 4) | (r << 8));
  }
};

inline uint64_t collective_tag(OpCode op, uint64_t seq, uint16_t signature = 0) {
  return (uint64_t{1} << 63) | (uint64_t(op) << 56) | ((seq & 0xfffffu) << 36) | (uint64_t(signature & 0xfff) << 24);
}
inline uint64_t step_tag(uint64_t base, uint32_t step) { return base | (step & 0xffffffu); }
inline uint64_t p2p_tag(int user_tag) { return static_cast<uint32_t>(user_tag); }

inline bool is_collective_tag(uint64_t tag) { return (tag >> 63) != 0; }
// The operation a tag belongs to: op code and sequence number, without the
// signature and the step.
inline uint64_t operation_of(uint64_t tag) { return tag >> 36; }
inline uint64_t sequence_of(uint64_t tag) { return (tag >> 36) & 0xfffffu; }
inline uint16_t signature_of(uint64_t tag) { return static_cast<uint16_t>((tag >> 24) & 0xfff); }
const char* op_code_name(uint64_t tag);

// What a tag belongs to, for messages that would otherwise show its number:
// "all_reduce #2 (float32, SUM, step 1)", "point-to-point, tag 7".
std::string describe_tag(uint64_t tag);

// Two tags from the same peer that prove the ranks are out of step: the peer
// sent a message of a different collective while this rank still waits for
// one of its current collective. Returns "" when they are not.
std::string describe_desync(uint64_t waiting_tag, uint64_t arrived_tag);

}  // namespace tdist
