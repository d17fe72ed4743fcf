#include <cstring>
#include <vector>

#include "algorithms/collective.h"
#include "reduce/reduce.h"

namespace tdist {

// Binomial tree toward the root: in round k a rank whose relative rank has
// bit k set sends its partial result to the rank 2^k below and leaves. The
// partial result lives in a scratch buffer so non-root tensors stay as given.
void reduce_binomial(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) {
  const int n = ctx.size();
  const size_t bytes = t.nbytes();
  const size_t count = static_cast<size_t>(t.numel());
  const int vrank = (ctx.rank() - root + n) % n;
  const bool is_root = vrank == 0;
  std::vector<char> scratch(is_root ? 0 : bytes);
  char* acc = is_root ? static_cast<char*>(t.data()) : scratch.data();
  if (!is_root && bytes > 0) std::memcpy(acc, t.data(), bytes);
  std::vector<char> incoming(bytes);
  uint32_t step = 0;
  for (int mask = 1; mask < n; mask <<= 1, ++step) {
    if (vrank & mask) {
      ctx.send((vrank - mask + root) % n, step, acc, bytes);
      break;
    }
    if (vrank + mask < n) {
      ctx.recv((vrank + mask + root) % n, step, incoming.data(), bytes);
      // The child's partial covers higher relative ranks: it is the right operand.
      reduction::combine(op, t.dtype(), acc, acc, incoming.data(), count);
    }
  }
  if (is_root && reduction::needs_finalize(op)) reduction::finalize(op, t.dtype(), acc, count, n);
}

}  // namespace tdist
