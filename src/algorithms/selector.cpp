// The selector: forced algorithms and the automatic picks with their
// thresholds. Measurements: tdist-bench over TCP on one host (TDIST_SHM=0),
// forced algorithms compared back to back; see each pick.
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
// when n is not a power of two); the ring 2(n-1)/n in 2(n-1) rounds. Fewer
// elements than ranks: recursive doubling (nothing to split).
//   one host, µs:   256K n=2 RD 196 / ring 252, 1M ring 530 / RD 589;
//                   n=4: 256K RD 489 / Rab 714 / ring 772, 512K RD 712 ~ Rab
//                   706, 1M Rab 1178 / ring 1399 / RD 1989, 2M ring 2573 /
//                   Rab 2802, 8M ring 11543 / Rab 12014; n=8: 256K RD 2041 ~
//                   Rab 2005, 4M Rab 15623 / ring 17199 (the ring wins once
//                   its chunks, bytes/n, pass ~512K); n=3 (fold): ring best
//                   from 1M (856 / Rab 1033 / RD 1064), RD at 256K (305).
//   several hosts:  16K n=4 RD 268 / Rab 490, 64K n=4 Rab 580 / ring 744 /
//                   RD 996; 64K n=8 RD 1494 ~ Rab 1602; 256K-1M n=4,8 Rab ~
//                   ring; 4M n=8 ring 61467 / Rab 82594; 16M n=4 ring 210694 /
//                   Rab 240568.
std::string_view pick_all_reduce(const Shape& s) {
  if (s.count < static_cast<size_t>(s.n)) return "recursive_doubling";
  const bool rabenseifner_fits = power_of_two(s.n) && s.n >= 4;  // n=2: it is the ring; else the fold costs
  if (s.one_host) {
    if (s.bytes < (s.n <= 4 ? 512 * KiB : 256 * KiB)) return "recursive_doubling";
    if (rabenseifner_fits && s.bytes < static_cast<size_t>(s.n) * 512 * KiB) return "rabenseifner";
    return "ring";
  }
  if (s.bytes < 32 * KiB) return "recursive_doubling";
  if (rabenseifner_fits && s.bytes < 512 * KiB) return "rabenseifner";
  return "ring";
}

// One host: the binomial tree moves n-1 buffers in all, the fewest copies,
// and was best or tied at every size but one (n=4, µs: 64K 143 ~ chain 138 /
// vdG 427; 4M 3202 / vdG 4202 / chain 5705; 16M 13543 / 15520 / 28278; 1M
// vdG 878 / 1234 in one run, tied with it in another). Several
// hosts: the chain keeps every link busy (n=8: 64K chain 585 / binomial 1580
// / vdG 1987; 1M 8808 / vdG 15033 / binomial 25940; 4M 35126 / vdG 70269 /
// binomial 106933; 16K chain 444 ~ binomial 446). Scatter + all-gather (vdG)
// was never the fastest: it stays available by name.
std::string_view pick_broadcast(const Shape& s) {
  if (s.n < 3 || s.count < static_cast<size_t>(s.n) || s.one_host) return "binomial";
  return s.bytes < 32 * KiB ? "binomial" : "chain";
}

// One host: the binomial tree was best or tied at every size (n=4, µs: 256K
// 371 / Rab 471; 1M 1874 / 2503; 4M 10463 / 10796; 16M 41415 / 42011; n=2
// better everywhere).
// Several hosts, n=4 and 8: Rabenseifner from 64K (n=4 64K 624 / 1069; n=8
// 256K 3621 / 6360, 4M 79617 / 106325; 16K binomial 247 / 1256). With n < 4
// it moves as much as the tree in more rounds.
std::string_view pick_reduce(const Shape& s) {
  if (s.count < static_cast<size_t>(s.n) || s.n < 4 || s.one_host) return "binomial";
  return s.bytes < 64 * KiB ? "binomial" : "rabenseifner";
}

// Bruck: ceil(log2 n) rounds instead of n-1 (n=4 one host, µs: 16K 190 /
// ring 289; several hosts n=8: 64K 901 / 1638); tied from 256K (n=8 1760 ~
// 1703) where the ring's pipelining takes over. Uneven blocks: ring.
std::string_view pick_all_gather(const Shape& s, bool equal) {
  return equal && s.bytes < 256 * KiB ? "bruck" : "ring";
}

// Recursive halving: log2(n) rounds (n=2 one host, µs: 64K 28 / ring 81;
// n=4: 64K 213 / 315; several hosts n=8: 64K 842 / 1625); the ring from
// 256K (n=2 one host 125 / 229; n=8 several hosts 1M 7562 / 11788).
std::string_view pick_reduce_scatter(const Shape& s) { return s.bytes < 128 * KiB ? "recursive_halving" : "ring"; }

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
