#include "algorithms/tags.h"

namespace tdist {

const char* op_code_name(uint64_t tag) {
  switch (static_cast<OpCode>((tag >> 56) & 0x7f)) {
    case OpCode::Broadcast: return "broadcast";
    case OpCode::AllReduce: return "all_reduce";
    case OpCode::Barrier: return "barrier";
    case OpCode::Reduce: return "reduce";
    case OpCode::AllGather: return "all_gather";
    case OpCode::Gather: return "gather";
    case OpCode::Scatter: return "scatter";
    case OpCode::ReduceScatter: return "reduce_scatter";
    case OpCode::AllToAll: return "all_to_all";
    case OpCode::MonitoredBarrier: return "monitored_barrier";
    case OpCode::Fingerprint: return "collective check";
    case OpCode::HostStep: return "step of a hierarchical collective";
  }
  return "unknown collective";
}

namespace {

// The arguments a signature packs (CollectiveCall), 4 bits each; 0: none.
unsigned field(uint16_t sig, int shift) { return (sig >> shift) & 0xfu; }
std::string dtype_field(unsigned v) {
  return v == 0 || v > kNumDTypes ? std::string("none") : std::string(dtype_name(static_cast<DType>(v - 1)));
}
std::string op_field(unsigned v) {
  return v == 0 || v > 9 ? std::string("none") : std::string(ReduceOp(static_cast<ReduceOp::Kind>(v - 1)).name());
}
std::string root_field(unsigned v) { return v == 0 ? std::string("none") : std::to_string(v - 1); }

// "dtype float32 against int32 here", for each argument the two calls differ in.
std::string differences(uint16_t theirs, uint16_t ours) {
  std::string out;
  auto add = [&](const std::string& what) { out += (out.empty() ? "" : ", ") + what; };
  if (field(theirs, 0) != field(ours, 0))
    add("dtype " + dtype_field(field(theirs, 0)) + " against " + dtype_field(field(ours, 0)) + " here");
  if (field(theirs, 4) != field(ours, 4))
    add("reduce op " + op_field(field(theirs, 4)) + " against " + op_field(field(ours, 4)) + " here");
  if (field(theirs, 8) != field(ours, 8))
    add("root " + root_field(field(theirs, 8)) + " against " + root_field(field(ours, 8)) + " here (modulo 15)");
  return out;
}

}  // namespace

std::string describe_tag(uint64_t tag) {
  if (!is_collective_tag(tag)) return "point-to-point, tag " + std::to_string(static_cast<int32_t>(tag));
  std::string out = std::string(op_code_name(tag)) + " #" + std::to_string(sequence_of(tag)) + " (";
  const uint16_t sig = signature_of(tag);
  // A hierarchical step's signature field is the step's number, not arguments.
  if (static_cast<OpCode>((tag >> 56) & 0x7f) != OpCode::HostStep) {
    if (field(sig, 0)) out += dtype_field(field(sig, 0)) + ", ";
    if (field(sig, 4)) out += op_field(field(sig, 4)) + ", ";
    if (field(sig, 8)) out += "root " + root_field(field(sig, 8)) + " (mod 15), ";
  }
  return out + "step " + std::to_string(tag & 0xffffffu) + ")";
}

std::string describe_desync(uint64_t waiting_tag, uint64_t arrived_tag) {
  if (!is_collective_tag(waiting_tag) || !is_collective_tag(arrived_tag)) return "";
  auto seq = [](uint64_t tag) { return std::to_string(sequence_of(tag)); };
  if (operation_of(waiting_tag) == operation_of(arrived_tag)) {
    if (signature_of(waiting_tag) == signature_of(arrived_tag)) return "";
    return std::string("the ranks called ") + op_code_name(arrived_tag) + " #" + seq(arrived_tag) +
           " with different arguments: " + differences(signature_of(arrived_tag), signature_of(waiting_tag));
  }
  return std::string("the ranks are out of step: it sent a message of its ") + op_code_name(arrived_tag) + " #" +
         seq(arrived_tag) + " while this rank waits for one of its " + op_code_name(waiting_tag) + " #" +
         seq(waiting_tag) + " (the ranks called different collectives, or the same with different arguments)";
}

}  // namespace tdist
