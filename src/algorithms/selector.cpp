// The selector: forced algorithms and the automatic picks with their
// thresholds. Every threshold comes from tdist-bench (in place, float32 SUM,
// the slowest rank's mean time; forced algorithms run back to back, the best
// or median of 3-5 runs quoted) on a 2-core VM shared with other work, so
// only clear differences were acted on:
//  - one host: TCP over loopback (TDIST_SHM=0), 2, 3, 4 and 8 ranks. The
//    ranks share the cores: every copy costs, links do not.
//  - several hosts: each rank in its own network namespace, every link
//    limited to 1 Gbit/s each way (tc tbf), 4 and 8 ranks: an emulated
//    1 GbE cluster where links cost and copies hardly do.
#include "algorithms/selector.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "tdist/errors.h"
#include "util/env.h"

namespace tdist {

std::string forced_algorithm(const char* collective) {
  std::string var = std::string("TDIST_ALGO_") + collective;
  std::transform(var.begin(), var.end(), var.begin(), [](unsigned char c) { return std::toupper(c); });
  auto v = get_env(var.c_str());
  if (!v) return "";
  std::string out = *v;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

ForcedAlgorithms read_forced_algorithms() {
  ForcedAlgorithms forced;
  // The collectives with algorithms to pick: Broadcast .. AllToAll.
  for (size_t code = 1; code <= static_cast<size_t>(OpCode::AllToAll); ++code) {
    uint64_t tag = collective_tag(static_cast<OpCode>(code), 0);
    forced[code] = forced_algorithm(op_code_name(tag));
  }
  return forced;
}

void throw_unknown_algorithm(const char* collective, const std::string& name, const std::string& valid) {
  std::string var = std::string("TDIST_ALGO_") + collective;
  std::transform(var.begin(), var.end(), var.begin(), [](unsigned char c) { return std::toupper(c); });
  throw DistValueError(var + "=" + name + " is not a " + collective + " algorithm (valid: " + valid + ")");
}

bool one_host(CollectiveContext& ctx) {
  for (int peer = 0; peer < ctx.size(); ++peer)
    if (!ctx.transport.same_host(peer)) return false;
  return true;
}

namespace {
constexpr size_t KiB = 1024, MiB = 1024 * KiB;
bool power_of_two(int n) { return (n & (n - 1)) == 0; }
}  // namespace

// Recursive doubling moves log2(n) whole buffers in log2(n) rounds;
// Rabenseifner 2(n-1)/n of it in 2 log2(n) rounds (plus a whole-buffer fold
// when n is not a power of two: there the ring is better); the ring 2(n-1)/n
// in 2(n-1) rounds. Fewer elements than ranks: recursive doubling.
//   one host, µs:   n=2: 256K Rab 133 ~ RD 142 / ring 159, 512K Rab 192 /
//                   RD 227, 1M Rab 296 / ring 368 / RD 611, 4M Rab 2134 ~
//                   ring 2235, 16M ring 9112 / Rab 10323; n=4: 256K RD 605 /
//                   Rab 684 / ring 786, 512K Rab 840 / RD 903, 1M Rab 1129 /
//                   ring 1726, 4M Rab 6352 / ring 7123, 16M ring 21106 / Rab
//                   24456; n=8: 4M Rab 15623 / ring 17199; n=3: 256K RD 277 /
//                   Rab 417 / ring 443, 1M ring 845 / RD 1115 / Rab 1161.
//                   n=2 again after the TCP transport's changes (2026-11-22,
//                   medians of 3-4 alternating runs): Rab 4M 936 / ring 1105,
//                   8M 2743 / 3084, 16M 6191 / 7283, 32M 17767 / 18321, 64M
//                   36670 / 39999; ring 128M 72767 / Rab 112868, 256M 154702 /
//                   224497 (unpipelined, the fold of a 64 MiB half misses the
//                   cache); n=4: 8M ring 13608 ~ Rab 13123, 32M 45501 / 55140.
//                   n=2 once the ring's segments there were 1 MiB (medians
//                   of 3, us): 4M Rab 1000 / ring 1197, 8M ring 2501 / Rab
//                   2629, 16M 5209 / 5864, 32M 11340 / 12414, 64M 25138 /
//                   28436.
//   several hosts:  16K n=4 RD 268 / Rab 490, 64K n=4 Rab 580 / ring 744 /
//                   RD 996; 64K n=8 RD 1494 ~ Rab 1602; 256K-1M n=4,8 Rab ~
//                   ring; 4M n=8 ring 61467 / Rab 82594; 16M n=4 ring 210694 /
//                   Rab 240568.
std::string_view pick_all_reduce(const Shape& s) {
  if (s.count < static_cast<size_t>(s.n)) return "recursive_doubling";
  if (s.bytes < (s.one_host ? 512 * KiB : 32 * KiB)) return "recursive_doubling";
  const size_t rabenseifner_below = !s.one_host ? 512 * KiB : 8 * MiB;
  if (power_of_two(s.n) && s.bytes < rabenseifner_below) return "rabenseifner";
  return "ring";
}

// One host: the binomial tree moves n-1 buffers in all, the fewest copies,
// and was best or tied at every size but one (n=4, µs: 64K 143 ~ chain 138 /
// vdG 427; 4M 3202 / vdG 4202 / chain 5705; 16M 13543 / 15520 / 28278; 1M
// vdG 878 / 1234 in one run, tied with it in another). Several
// hosts: the chain keeps every link busy (n=8: 64K chain 585 / binomial 1580
// / vdG 1987; 1M 8906 / vdG 15033 / binomial 25940; 4M 35419 / vdG 70269 /
// binomial 106933; 16K chain 444 ~ binomial 446). Scatter + all-gather (vdG)
// was never the fastest: it stays available by name.
std::string_view pick_broadcast(const Shape& s) {
  if (s.n < 3 || s.count < static_cast<size_t>(s.n) || s.one_host) return "binomial";
  return s.bytes < 32 * KiB ? "binomial" : "chain";
}

// One host: the pipelined chain reduces each segment as it arrives, while it
// is in cache, and every rank sends the buffer once. From 1 MiB it beat the
// tree and Rabenseifner at every world size (TCP, medians of 2-4 alternating
// runs, µs: n=2 4M 602 / binomial 923, 64M 17549 / 47011, 256M 71194 /
// 319161, 1M 163 ~ 168; n=3 16M 9912 / binomial 13438, 1M 551 ~ 484; n=4
// 1M 844 / Rab 1014, 64M 69524 / 118046; n=8 1M 2118 / 2594, 16M 35020 /
// 40570). Several hosts: Rabenseifner sends about 2x the buffer per rank
// where the tree sends up to log2(n)x, in more rounds; with n < 4 it moves as
// much as the tree (n=4 16K binomial 101 / Rab 317, 64K Rab 624 / 1069; n=8
// 256K 3621 / 6360, 4M 79617 / 106325).
// Two ranks on one host again after the chain's segments there grew to 1 MiB
// (pipeline.cpp; 2026-11-22, medians of 4 alternating runs, us): 1M chain 168
// ~ binomial 165, 2M 281 / 322, 4M 546 / 787, 8M 1478 / 2039.
std::string_view pick_reduce(const Shape& s) {
  if (s.count < static_cast<size_t>(s.n)) return "binomial";
  if (s.one_host) return s.bytes < 1 * MiB ? "binomial" : "chain";
  return s.n < 4 || s.bytes < 64 * KiB ? "binomial" : "rabenseifner";
}

// Bruck: ceil(log2 n) rounds instead of n-1, the same volume, plus one copy
// of the whole output (one host, n=4, µs: 64K 266 / ring 450, 1M 872 /
// 1023, 4M ring 3923 / 4245, 16M 13279 / 19022; several hosts n=8: 64K 901 /
// 1638, tied from 256K). Uneven blocks: ring.
// With 2 ranks both are one exchange, and the ring's lands in place where
// Bruck's goes through scratch (TCP, medians of 4 alternating runs, µs: 256K
// ring 39 / Bruck 45, 1M 114 / 138, 64K tied).
std::string_view pick_all_gather(const Shape& s, bool equal) {
  return equal && s.n > 2 && s.bytes < 2 * MiB ? "bruck" : "ring";
}

// Recursive halving: log2(n) rounds (one host n=4, µs: 128K 251 / ring 422,
// 256K 451 ~ 456, 512K 619 ~ 587, 1M ring 855 / 1001, 4M 4217 / 5001; n=2
// within 20% either way; several hosts n=8: 64K 842 / 1625, 1M ring 7562 /
// 11788).
std::string_view pick_reduce_scatter(const Shape& s) { return s.bytes < 256 * KiB ? "recursive_halving" : "ring"; }

// The binomial gather was never faster than the linear one, where the root
// takes every block at once (µs, 1K blocks: n=4 19 / 32, n=8 59 / 58, n=16
// 195 / 199, 4K n=16 216 / 284; several hosts n=8 4K 259 / 231 at best): it
// stays available by name.
std::string_view pick_gather(const Shape&) { return "linear"; }

// The binomial scatter halves the root's sends per round: 2x faster for
// small blocks from 8 ranks (one host, µs, 1K blocks: n=8 98 / linear 207,
// n=16 187 / 364; 4K n=16 272 / 453), tied at 4 ranks and from 64K blocks,
// slower from 256K (n=4 453 / 323).
std::string_view pick_scatter(const Shape& s) {
  return s.n >= 8 && s.bytes < 16 * KiB ? "binomial" : "linear";
}

// Bruck: log2(n) rounds, each block forwarded up to log2(n) times: 2x faster
// for small blocks (µs, whole buffer per rank: n=4 one host 16K 211 /
// pairwise 345, several hosts 16K 287 / 469; n=8 one host 64K 958 / 1442).
// At n=4 one host 64K (16K blocks) pairwise was ahead (370 / 416). Only when
// the caller knows every block of every rank has one size.
std::string_view pick_all_to_all(const Shape& s, bool uniform) {
  return uniform && s.n > 2 && s.bytes <= 8 * KiB ? "bruck" : "pairwise";
}

}  // namespace tdist
