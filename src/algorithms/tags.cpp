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
  }
  return "unknown collective";
}

std::string describe_desync(uint64_t waiting_tag, uint64_t arrived_tag) {
  if (!is_collective_tag(waiting_tag) || !is_collective_tag(arrived_tag)) return "";
  if (operation_of(waiting_tag) == operation_of(arrived_tag)) return "";
  auto seq = [](uint64_t tag) { return std::to_string((tag >> 24) & 0xffffffffu); };
  return std::string("the ranks are out of step: it sent a message of its ") + op_code_name(arrived_tag) + " #" +
         seq(arrived_tag) + " while this rank waits for one of its " + op_code_name(waiting_tag) + " #" +
         seq(waiting_tag) + " (the ranks called different collectives, or the same with different arguments)";
}

}  // namespace tdist
