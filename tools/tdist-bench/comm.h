// The interface a benchmark runner implements: tdist (tdist_comm.cpp) or MPI
// (bench/mpi_bench.cpp). The driver (driver.cpp) does the sweep, the timing, the
// checks and the output identically for both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_types.h"

namespace tbench {

// One row's operation on this rank.
struct Call {
  Coll coll;
  Dt dt;
  Op op;       // reducing collectives only
  int root;    // broadcast and reduce
  Place place;
  void* send;  // buffers of at least the row's size in bytes each
  void* recv;
  size_t count;  // the row's count (whole buffer for chunked collectives)
};

// A prepared operation: `run` performs one iteration. `input` (input_count
// elements) is what this rank contributes and gets the rank's pattern before a
// check; `result` (result_count elements) is what the check verifies.
struct Prepared {
  std::function<void()> run;
  void* input = nullptr;
  size_t input_count = 0;
  void* result = nullptr;
  size_t result_count = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual std::string library() const = 0;  // "tdist 0.1.0", "Open MPI v4.1.4, ..."
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;
  virtual double max_double(double v) = 0;
  virtual int64_t sum_int64(int64_t v) = 0;
  // Every rank's string, in rank order, on every rank.
  virtual std::vector<std::string> all_gather_strings(const std::string& s) = 0;
  // Settings that choose transports and algorithms ("NAME=value").
  virtual std::vector<std::string> settings() const = 0;
  // Lines for the header on how this runner measures (e.g. emulated placements).
  virtual std::vector<std::string> notes() const = 0;
  // "" when the combination runs, else why not (printed as a skipped row).
  virtual std::string unsupported(Coll c, Dt d, Op o) const = 0;
  virtual Prepared prepare(const Call& call) = 0;

  // Device buffers (tdist-bench --device cuda): `bytes` of device memory, or
  // null where the buffers are host memory, which the driver allocates itself.
  // The driver fills inputs and checks results of device buffers through host
  // copies (upload, download), outside the timed loops.
  virtual std::shared_ptr<void> device_buffer(size_t /*bytes*/) { return nullptr; }
  virtual void upload(void* /*device_dst*/, const void* /*host_src*/, size_t /*bytes*/) {}
  virtual void download(void* /*host_dst*/, const void* /*device_src*/, size_t /*bytes*/) {}
};

}  // namespace tbench
