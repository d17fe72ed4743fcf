#include "tdist/errors.h"
#include "algorithms/collective.h"

namespace tdist {

// Binomial tree rooted at `root`: log2(n) rounds; each rank receives once from
// its parent, then sends to its children, farthest subtree first.
void broadcast_binomial(CollectiveContext& ctx, const Tensor& t, int root) {
  const int n = ctx.size();
  const int vrank = (ctx.rank() - root + n) % n;  // rank relative to the root
  int mask = 1;
  while (mask < n) {
    if (vrank & mask) {
      int parent = (vrank - mask + root) % n;
      ctx.recv(parent, 0, t.data(), t.nbytes());
      break;
    }
    mask <<= 1;
  }
  mask >>= 1;
  while (mask > 0) {
    if (vrank + mask < n) {
      int child = (vrank + mask + root) % n;
      ctx.send(child, 0, t.data(), t.nbytes());
    }
    mask >>= 1;
  }
}

void broadcast(CollectiveContext& ctx, const Tensor& t, int root) {
  std::string forced = forced_algorithm("broadcast");
  if (!forced.empty() && forced != "binomial")
    throw DistValueError("TDIST_ALGO_BROADCAST=" + forced + " is not a broadcast algorithm (binomial)");
  broadcast_binomial(ctx, t, root);
}

}  // namespace tdist
