// Output of the results: nccl-tests' table, CSV, or JSON. Only rank 0 prints;
// every other rank gets a reporter that prints nothing.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench_types.h"
#include "options.h"

namespace tbench {

struct RunInfo {
  std::string program;   // "tdist-bench", "mpi_bench"
  std::string library;   // "tdist 0.1.0"
  int world_size = 1;
  std::vector<std::string> ranks;     // per rank: "Pid 123 on host"
  std::vector<std::string> settings;  // "NAME=value"
  std::vector<std::string> notes;     // how columns are measured
  Options options;
};

struct Cell {
  bool measured = false;  // false: n/a
  double time_us = 0;
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
  int64_t wrong = -1;  // -1: not checked
};

struct Record {
  Coll coll;
  Dt dt;
  Op op;
  bool reducing;
  int root;  // -1 when not rooted
  uint64_t bytes;
  size_t count;
  int warmup;
  int iters;
  Cell out, in;
};

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void begin(const RunInfo& info) = 0;
  virtual void section(Coll c, Dt d, const std::string& redop) = 0;
  virtual void row(const Record& r) = 0;
  virtual void note(const std::string& line) = 0;  // e.g. a skipped combination
  virtual void end(double avg_busbw, int64_t wrong_total, bool checked) = 0;
};

// A reporter writing `format` to `out`; nullptr out: prints nothing.
std::unique_ptr<Reporter> make_reporter(Format format, std::FILE* out);

// Fills algbw and busbw from time and size (nccl-tests' formulas).
void compute_bandwidth(Cell& cell, Coll c, uint64_t bytes, int world_size);

}  // namespace tbench
