// Message tags. Collectives of one group run in the same order on every rank
// and carry their sequence number in the tag, so a fast rank's messages for
// the next operation can never be taken for this one's.
//   bit 63       1 = collective, 0 = point-to-point
//   bits 56..62  operation code (collectives)
//   bits 24..55  sequence number, modulo 2^32
//   bits 0..23   step within the operation
// Point-to-point: bits 0..31 hold the user's tag.
#pragma once

#include <cstdint>
#include <string>

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
};

inline uint64_t collective_tag(OpCode op, uint64_t seq) {
  return (uint64_t{1} << 63) | (uint64_t(op) << 56) | ((seq & 0xffffffffu) << 24);
}
inline uint64_t step_tag(uint64_t base, uint32_t step) { return base | (step & 0xffffffu); }
inline uint64_t p2p_tag(int user_tag) { return static_cast<uint32_t>(user_tag); }

inline bool is_collective_tag(uint64_t tag) { return (tag >> 63) != 0; }
// The operation a tag belongs to: op code and sequence number, without the step.
inline uint64_t operation_of(uint64_t tag) { return tag >> 24; }
const char* op_code_name(uint64_t tag);

// Two tags from the same peer that prove the ranks are out of step: the peer
// sent a message of a different collective while this rank still waits for
// one of its current collective. Returns "" when they are not.
std::string describe_desync(uint64_t waiting_tag, uint64_t arrived_tag);

}  // namespace tdist
