#include "options.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

namespace tbench {

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool parse_int(const std::string& s, long lo, long hi, long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parse_double(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// Option table: short letter, long name, whether it takes a value.
struct Spec {
  char short_name;
  const char* long_name;
  bool has_value;
};
constexpr Spec kSpecs[] = {
    {'b', "minbytes", true},     {'e', "maxbytes", true}, {'f', "stepfactor", true}, {'i', "stepbytes", true},
    {'d', "datatype", true},     {'o', "op", true},       {'r', "root", true},       {'w', "warmup_iters", true},
    {'n', "iters", true},        {'c', "check", false},   {'t', "op-name", true},    {'C', "cap_bytes", true},
    {'\0', "place", true},       {'\0', "csv", false},    {'\0', "json", false},     {'h', "help", false},
    {'\0', "sizes", true},      {'\0', "backend", true}, {'\0', "device", true},
    {'\0', "copy-limit", false},
};

const Spec* find_long(const std::string& name) {
  std::string n = name;
  std::replace(n.begin(), n.end(), '-', '_');
  for (const Spec& s : kSpecs) {
    std::string l = s.long_name;
    std::replace(l.begin(), l.end(), '-', '_');
    if (l == n) return &s;
  }
  if (n == "op_name" || n == "collective" || n == "coll") return &kSpecs[10];
  if (n == "warmup") return &kSpecs[7];
  return nullptr;
}

const Spec* find_short(char c) {
  for (const Spec& s : kSpecs)
    if (s.short_name == c) return &s;
  return nullptr;
}

// Applies one option; returns an error line or "".
std::string apply(const Spec& spec, const std::string& value, Options& o, bool& help) {
  const std::string name = spec.long_name;
  auto bad = [&](const std::string& why) { return "--" + name + " " + value + ": " + why; };
  long iv = 0;
  if (name == "minbytes") {
    if (!parse_bytes(value, &o.min_bytes)) return bad("expected a size such as 8, 64K, 4M, 1G");
  } else if (name == "maxbytes") {
    if (!parse_bytes(value, &o.max_bytes)) return bad("expected a size such as 8, 64K, 4M, 1G");
  } else if (name == "stepbytes") {
    if (!parse_bytes(value, &o.step_bytes) || o.step_bytes == 0) return bad("expected a positive size");
  } else if (name == "stepfactor") {
    if (!parse_double(value, &o.step_factor) || o.step_factor < 1.0) return bad("expected a factor >= 1");
  } else if (name == "datatype") {
    o.dts.clear();
    for (const std::string& item : split_list(value)) {
      if (item == "all") {
        o.dts.assign(std::begin(kAllDts), std::end(kAllDts));
        continue;
      }
      auto d = parse_dt(item);
      if (!d) return bad("unknown datatype '" + item + "' (int8 uint8 int32 int64 half bfloat16 float double all)");
      o.dts.push_back(*d);
    }
    if (o.dts.empty()) return bad("no datatype");
  } else if (name == "op") {
    o.ops.clear();
    for (const std::string& item : split_list(value)) {
      if (item == "all") {
        o.ops.assign(std::begin(kAllOps), std::end(kAllOps));
        continue;
      }
      auto op = parse_op(item);
      if (!op) return bad("unknown op '" + item + "' (sum prod min max avg all)");
      o.ops.push_back(*op);
    }
    if (o.ops.empty()) return bad("no op");
  } else if (name == "op-name") {
    o.colls.clear();
    for (const std::string& item : split_list(value)) {
      if (item == "all") {
        o.colls.assign(std::begin(kAllColls), std::end(kAllColls));
        continue;
      }
      auto c = parse_coll(item);
      if (!c)
        return bad("unknown collective '" + item +
                   "' (all_reduce broadcast reduce all_gather reduce_scatter all_to_all sendrecv copy all)");
      o.colls.push_back(*c);
    }
    if (o.colls.empty()) return bad("no collective");
  } else if (name == "root") {
    if (!parse_int(value, 0, 1 << 30, &iv)) return bad("expected a rank >= 0");
    o.root = static_cast<int>(iv);
  } else if (name == "warmup_iters") {
    if (!parse_int(value, 0, 1 << 30, &iv)) return bad("expected a count >= 0");
    o.warmup = static_cast<int>(iv);
  } else if (name == "iters") {
    if (!parse_int(value, 1, 1 << 30, &iv)) return bad("expected a count >= 1");
    o.iters = static_cast<int>(iv);
  } else if (name == "cap_bytes") {
    if (!parse_bytes(value, &o.cap_bytes)) return bad("expected a size (0: no cap)");
  } else if (name == "sizes") {
    o.sizes.clear();
    for (const std::string& item : split_list(value)) {
      uint64_t b = 0;
      if (!parse_bytes(item, &b)) return bad("'" + item + "' is not a size such as 8, 64K, 4M, 1G");
      o.sizes.push_back(b);
    }
    if (o.sizes.empty()) return bad("no size");
    o.min_bytes = *std::min_element(o.sizes.begin(), o.sizes.end());
    o.max_bytes = *std::max_element(o.sizes.begin(), o.sizes.end());
  } else if (name == "check") {
    o.check = true;
  } else if (name == "place") {
    if (value == "both") o.places = Places::Both;
    else if (value == "out" || value == "out-of-place" || value == "oop") o.places = Places::OutOnly;
    else if (value == "in" || value == "in-place" || value == "ip") o.places = Places::InOnly;
    else return bad("expected both, out or in");
  } else if (name == "backend") {
    if (value.empty()) return bad("expected a backend name (tdist, mpi)");
    o.backend = value;
  } else if (name == "device") {
    if (value == "cpu") o.device = Memory::Cpu;
    else if (value == "cuda" || value == "gpu") o.device = Memory::Cuda;
    else return bad("expected cpu or cuda");
  } else if (name == "copy-limit") {
    o.copy_limit = true;
  } else if (name == "csv") {
    o.format = Format::Csv;
  } else if (name == "json") {
    o.format = Format::Json;
  } else if (name == "help") {
    help = true;
  }
  return "";
}

}  // namespace

bool parse_bytes(const std::string& s, uint64_t* out) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  size_t pos = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
  uint64_t v = std::strtoull(s.substr(0, pos).c_str(), nullptr, 10);
  std::string suffix = s.substr(pos);
  std::transform(suffix.begin(), suffix.end(), suffix.begin(), [](unsigned char c) { return std::toupper(c); });
  if (!suffix.empty() && suffix.back() == 'B') suffix.pop_back();
  if (suffix.size() == 2 && suffix[1] == 'I') suffix.pop_back();  // KiB, MiB, GiB
  uint64_t mult = 1;
  if (suffix.empty()) mult = 1;
  else if (suffix == "K") mult = 1ull << 10;
  else if (suffix == "M") mult = 1ull << 20;
  else if (suffix == "G") mult = 1ull << 30;
  else return false;
  if (v > (UINT64_MAX / mult)) return false;
  *out = v * mult;
  return true;
}

ParseResult parse_options(int argc, char** argv) {
  ParseResult r;
  bool help = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const Spec* spec = nullptr;
    std::string value;
    bool inline_value = false;
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      std::string name = arg.substr(2);
      auto eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      spec = find_long(name);
      if (!spec) {
        r.action = Action::UsageError;
        r.error = "unknown option " + arg;
        return r;
      }
    } else if (arg.size() >= 2 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1]))) {
      spec = find_short(arg[1]);
      if (!spec) {
        r.action = Action::UsageError;
        r.error = "unknown option " + arg;
        return r;
      }
      if (arg.size() > 2) {
        value = arg.substr(2);
        inline_value = true;
      }
    } else {
      r.action = Action::UsageError;
      r.error = "unexpected argument " + arg;
      return r;
    }
    if (spec->has_value && !inline_value) {
      if (i + 1 >= argc) {
        r.action = Action::UsageError;
        r.error = "option " + arg + " needs a value";
        return r;
      }
      value = argv[++i];
    } else if (!spec->has_value && inline_value) {
      // nccl-tests spells -c 1 / -c 0; accept --check=1 / --check=0 too.
      if (std::string(spec->long_name) == "check" && (value == "0" || value == "1")) {
        r.options.check = value == "1";
        continue;
      }
      r.action = Action::UsageError;
      r.error = "option " + arg + " takes no value";
      return r;
    } else if (!spec->has_value && std::string(spec->long_name) == "check" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "0" || std::string(argv[i + 1]) == "1")) {
      r.options.check = std::string(argv[++i]) == "1";
      continue;
    }
    std::string err = apply(*spec, value, r.options, help);
    if (!err.empty()) {
      r.action = Action::UsageError;
      r.error = err;
      return r;
    }
  }
  if (help) {
    r.action = Action::Help;
    return r;
  }
  // After every -t: the copy table comes last, after the collectives it bounds.
  if (r.options.copy_limit &&
      std::find(r.options.colls.begin(), r.options.colls.end(), Coll::Copy) == r.options.colls.end())
    r.options.colls.push_back(Coll::Copy);
  if (r.options.sizes.empty() && r.options.min_bytes > r.options.max_bytes) {
    r.action = Action::UsageError;
    r.error = "--minbytes (" + std::to_string(r.options.min_bytes) + ") is larger than --maxbytes (" +
              std::to_string(r.options.max_bytes) + ")";
  }
  return r;
}

std::vector<uint64_t> sweep_sizes(const Options& o) {
  if (!o.sizes.empty()) return o.sizes;
  std::vector<uint64_t> sizes;
  uint64_t s = o.min_bytes;
  while (s <= o.max_bytes) {
    sizes.push_back(s);
    uint64_t next;
    if (o.step_factor > 1.0) {
      double d = std::floor(static_cast<double>(s == 0 ? 1 : s) * o.step_factor);
      next = d >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(d);
      if (next <= s) next = s + 1;
    } else {
      next = s + o.step_bytes;
    }
    if (next < s) break;  // overflow
    s = next;
  }
  return sizes;
}

int scaled_iters(const Options& o, uint64_t bytes) {
  if (o.cap_bytes == 0 || bytes == 0) return o.iters;
  uint64_t fit = o.cap_bytes / bytes;
  return static_cast<int>(std::clamp<uint64_t>(fit, 1, static_cast<uint64_t>(o.iters)));
}

int scaled_warmup(const Options& o, uint64_t bytes) {
  if (o.cap_bytes == 0 || bytes == 0 || o.warmup == 0) return o.warmup;
  uint64_t fit = o.cap_bytes / bytes / 4;
  return static_cast<int>(std::clamp<uint64_t>(fit, 1, static_cast<uint64_t>(o.warmup)));
}

std::string help_text(const std::string& program) {
  return "usage: " + program + R"( [options]

Measures collectives the way nccl-tests does: for each size of a sweep, warm-up
iterations, a barrier, a timed loop; the time printed is the slowest rank's
average (MAX over ranks of each rank's mean time per iteration).
Run it under a launcher: tdistrun --nproc-per-node N tdist-bench ... (only rank 0
prints; add tdistrun's --no-prefix for clean --csv/--json output).

Options (nccl-tests letters; "-b 8", "-b8", "--minbytes 8", "--minbytes=8"):
  -t, --op-name LIST     collectives, comma-separated: all_reduce broadcast reduce
                         all_gather reduce_scatter all_to_all sendrecv, or all [all_reduce];
                         copy: a local copy of the same bytes on every rank (see --copy-limit)
  -b, --minbytes SIZE    smallest size [8]; suffixes K, M, G (powers of 1024)
  -e, --maxbytes SIZE    largest size [32M]
  -f, --stepfactor F     multiply the size by F each step [2]; 1: add --stepbytes
  -i, --stepbytes SIZE   additive step when -f is 1 [1M]
  --sizes LIST           exactly these sizes, comma-separated (e.g. 8,64K,1M), instead of
                         -b/-e/-f/-i
  -d, --datatype LIST    int8 uint8 int32 int64 half bfloat16 float double, or all [float]
  -o, --op LIST          sum prod min max avg, or all [sum] (reducing collectives only)
  -r, --root R           root of broadcast and reduce [0]
  -w, --warmup_iters N   warm-up iterations per size [5]
  -n, --iters N          timed iterations per size [20]
  -C, --cap_bytes SIZE   for big sizes run fewer iterations so that size x iterations
                         stays under SIZE per timed loop (at least 1 iteration, warm-up
                         1/4 of that); 0: no cap [1G]
  -c, --check [0|1]      verify every result (one extra run per size with fresh inputs)
                         and count mismatching elements, summed over ranks, in #wrong;
                         the exit status is 1 when any is wrong
  --place both|out|in    which columns to measure [both]
  --csv                  CSV on stdout instead of the table, one record per size
  --json                 one JSON document on stdout, one record per size
  --backend NAME         tdist-bench: the backend to measure, tdist or mpi (under mpirun)
                         [tdist]
  --device cpu|cuda      tdist-bench: where the buffers live [cpu]. cuda: device memory
                         (cudaMalloc) on GPU LOCAL_RANK % device count, operations on a
                         stream of the benchmark's own (tdist's current stream); each timed
                         iteration ends with the host waiting for that stream, so times are
                         end to end (call, device work, completion seen by the host)
  --copy-limit           also measure, last, a local copy of each size on every rank
                         (-t copy: memcpy, or a device-to-device cudaMemcpyAsync with
                         --device cuda, timed the same way): the physical limit the
                         collectives are compared with (busbw = algbw for copy)
  -h, --help             this text

Sizes and columns (as nccl-tests):
  size     bytes of the buffer: for all_gather the output, for reduce_scatter the input,
           for all_to_all each rank's send buffer (world_size chunks); for sendrecv one
           message. Counts of those three are rounded down to multiples of world_size.
  time     microseconds per operation, slowest rank; sendrecv: half the round trip of a
           ping-pong between ranks 0 and 1 (other ranks idle)
  algbw    size / time (GB/s, 1e9 bytes)
  busbw    algbw x 2(n-1)/n for all_reduce, x (n-1)/n for all_gather, reduce_scatter,
           all_to_all, x 1 for broadcast, reduce, sendrecv
  #wrong   mismatching elements over all ranks with --check, N/A without

Placements: out-of-place uses separate send and receive buffers; in-place one buffer.
  tdist's all_reduce, broadcast and reduce are in-place only (as in torch): their
  out-of-place column is a memcpy of the send buffer into the receive buffer followed by
  the in-place call (on the root only for broadcast and reduce), timed together.
  all_gather in-place: the input is the rank's slice of the output; reduce_scatter
  in-place: the output is the rank's slice of the input. all_to_all and sendrecv have
  no in-place form (n/a).

Inputs hold small integers that depend on the rank and the index, so that every
result is exact in every type (AVG on floating types is compared with a tolerance;
on integers it truncates, as NCCL and tdist do).
)";
}

}  // namespace tbench
