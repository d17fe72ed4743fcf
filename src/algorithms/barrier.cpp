#include "algorithms/collective.h"

namespace tdist {

// Dissemination barrier: in round k every rank signals rank+2^k and waits for
// rank-2^k; after ceil(log2 n) rounds everyone has heard from everyone.
void barrier_dissemination(CollectiveContext& ctx) {
  const int n = ctx.size();
  const int r = ctx.rank();
  char out = 1, in = 0;
  uint32_t round = 0;
  for (int k = 1; k < n; k <<= 1, ++round) {
    ctx.send_recv((r + k) % n, &out, 1, (r - k + n) % n, &in, 1, round);
  }
}

}  // namespace tdist
