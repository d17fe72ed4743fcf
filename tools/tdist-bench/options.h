// tdist-bench's command line (nccl-tests' option letters), shared with
// bench/mpi_bench.cpp. Parsing never exits; main decides what to do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_types.h"

namespace tbench {

enum class Format { Table, Csv, Json };
// Where the buffers live: host memory, or a CUDA device (tdist-bench --device cuda).
enum class Memory { Cpu, Cuda };
enum class Places { Both, OutOnly, InOnly };

struct Options {
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 32ull << 20;
  double step_factor = 2.0;       // multiplicative step; 1 means additive steps of step_bytes
  uint64_t step_bytes = 1 << 20;  // used when step_factor is 1
  std::vector<uint64_t> sizes;    // --sizes: an explicit list instead of the sweep
  std::vector<Coll> colls{Coll::AllReduce};
  std::vector<Dt> dts{Dt::Float};
  std::vector<Op> ops{Op::Sum};
  int root = 0;
  int warmup = 5;
  int iters = 20;
  // Iterations shrink for big sizes so that size * iterations stays under this
  // many bytes per timed loop (at least 1 iteration); 0: no cap.
  uint64_t cap_bytes = 1ull << 30;
  bool check = false;
  Places places = Places::Both;
  Format format = Format::Table;
  std::string backend = "tdist";  // --backend (tdist-bench only)
  Memory device = Memory::Cpu;     // --device (tdist-bench only)
  bool copy_limit = false;         // --copy-limit: Coll::Copy is added after the collectives
};

enum class Action { Run, Help, UsageError };

struct ParseResult {
  Action action = Action::Run;
  Options options;
  std::string error;  // one line for UsageError
};

// `program` names the binary in messages and help ("tdist-bench", "mpi_bench").
ParseResult parse_options(int argc, char** argv);
std::string help_text(const std::string& program);

// "8", "64K", "4M", "1G" (powers of 1024; an optional trailing B).
bool parse_bytes(const std::string& s, uint64_t* out);

// The sweep: min, min*f, ... <= max (or min, min+step, ... when f is 1), or --sizes.
std::vector<uint64_t> sweep_sizes(const Options& o);

// Iterations and warm-up iterations for one size under the cap.
int scaled_iters(const Options& o, uint64_t bytes);
int scaled_warmup(const Options& o, uint64_t bytes);

}  // namespace tbench
