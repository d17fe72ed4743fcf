// What the flight recorders of one process share: who this process is (for
// the dump's header and file name), the live recorders (for a dump), the
// observers of finished operations, and where dumps go.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "tdist/trace.h"

namespace tdist::trace {

class FlightRecorder;

// TDIST_FLIGHT_RECORDER_ENTRIES: a new group's ring size (0: no recorder).
size_t recorder_capacity();

// This process's rank and world, from its default group (or the first group
// made, where there is none); and its clock offset to rank 0 (µs), once measured.
void set_identity(int rank, int world_size);
bool identity_set();
void set_clock_offset(int64_t offset_us, int64_t error_us);
struct Identity {
  int rank = 0;
  int world_size = 1;
  int64_t clock_offset_us = 0;
  int64_t clock_error_us = -1;  // -1: not measured
};
Identity identity();

// At init_process_group and at each new group: makes the folders that
// TDIST_TRACE, TDIST_FLIGHT_RECORDER_DIR and TORCH_FR_DUMP_TEMP_FILE name (or
// throws DistValueError naming the setting, the path and why), and installs
// the SIGUSR1 dump (once per process; without a folder it dumps to
// default_dump_folder() and logs where).
void prepare_process();

void register_recorder(FlightRecorder* recorder);
void unregister_recorder(FlightRecorder* recorder);

void notify_observers(const OpEvent& event);

// The dump's destination for a rank: TORCH_FR_DUMP_TEMP_FILE<rank>.json, else
// TDIST_FLIGHT_RECORDER_DIR/tdist_fr_<rank>.json; "" when neither is set.
std::string dump_destination(int rank);
// Writes a dump ("failure", "timeout", "signal", "request") to `path`; returns it.
std::string write_dump(const std::string& path, const std::string& reason, const std::string& detail);
// The same, unless a failure's dump was written (it says more; one under way
// is waited for): whether it wrote.
bool write_dump_unless_failure_dumped(const std::string& path, const std::string& reason, const std::string& detail);
// A dump after a failure, where a destination is set; logs where it went.
void dump_after_failure(const std::string& reason, const std::string& detail);

}  // namespace tdist::trace
