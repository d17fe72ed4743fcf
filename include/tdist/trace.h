// Seeing inside a running job: the flight recorder (every group's last
// operations, dumped to a file on failure, on SIGUSR1 or on request) and the
// operations as they finish, for timelines and profilers. Formats:
// docs/trace_format.md; the reader: tools/tdist-trace (docs/tdist-trace.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tdist {

// One operation of a group, as the flight recorder holds it. Times are
// microseconds of this process's system clock (CLOCK_REALTIME); 0: not yet.
struct OpEvent {
  std::string group;  // the group's name
  uint64_t seq = 0;   // the group's collective (or, p2p, point-to-point) sequence number, from 1
  std::string op;     // torch's name: "all_reduce", "send", ...
  bool p2p = false;
  std::string dtype;                            // "float32", or "" (barrier)
  std::vector<std::vector<int64_t>> shapes;     // input shapes, one per tensor
  std::vector<std::vector<int64_t>> out_shapes; // output shapes where they differ from the inputs
  uint64_t bytes = 0;                           // what this rank contributes
  int root = -1;                                // group rank of the root, or -1
  int peer = -1;                                // send/recv: the peer's group rank, or -1
  std::string reduce_op;                        // "sum", ..., or ""
  std::string engine;                           // "transport", "shm", "hierarchical", "mpi", or ""
  std::string algorithm;                        // "ring", ..., or ""
  std::string state;                            // "queued", "started", "completed", "failed"
  std::string error;                            // the failure's message when state is "failed"
  int64_t queued_us = 0, started_us = 0, ended_us = 0;
  // How coarse these times are: 0 to the microsecond, else the resolution of
  // the coarse clock (small blocking operations, where nobody watches: a
  // precise clock read would cost them more than the recorder may).
  int64_t time_resolution_us = 0;
};

// Called on the thread that finished the operation, once per operation of
// every group of this process, after it completed or failed. Observers must be
// quick and must not issue operations of the group that called them.
using OpObserver = std::function<void(const OpEvent&)>;
// Returns a handle for remove_op_observer. While any observer is registered,
// every operation pays for building its OpEvent (a few allocations).
int add_op_observer(OpObserver observer);
void remove_op_observer(int handle);

// Writes every live group's flight recorder to this rank's dump file:
// `path` if given, else TDIST_FLIGHT_RECORDER_DIR/tdist_fr_<rank>.json (or
// TORCH_FR_DUMP_TEMP_FILE<rank>.json). Returns the path written.
// DistValueError when neither a path nor a setting says where; DistError
// naming the path when it cannot be written.
std::string dump_flight_recorder(const std::string& path = "");
// The same dump as a JSON document, without writing anything.
std::string flight_recorder_json(const std::string& reason = "request");

}  // namespace tdist
