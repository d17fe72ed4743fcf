#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/collective.h"
#include "reduce/reduce.h"

namespace tdist {

// Ring reduce-scatter over a scratch copy of the inputs (they stay as given):
// in step s a rank sends its partial of block (rank-s-1) to the right and
// folds the left neighbour's partial of block (rank-s-2) into its own, so after
// n-1 steps it holds the full reduction of its own block.
void reduce_scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const DType dtype = output.dtype();
  std::vector<size_t> offset(n + 1, 0);
  for (int i = 0; i < n; ++i) offset[i + 1] = offset[i] + inputs[i].nbytes();
  std::vector<char> work(offset[n]);
  for (int i = 0; i < n; ++i)
    if (inputs[i].nbytes() > 0) std::memcpy(work.data() + offset[i], inputs[i].data(), inputs[i].nbytes());
  size_t largest = 0;
  for (int i = 0; i < n; ++i) largest = std::max(largest, inputs[i].nbytes());
  std::vector<char> incoming(largest);
  const int right = (rank + 1) % n, left = (rank - 1 + n) % n;
  try {
    for (int s = 0; s < n - 1; ++s) {
      int send_b = (rank - s - 1 + 2 * n) % n;
      int recv_b = (rank - s - 2 + 2 * n) % n;
      ctx.send_recv(right, work.data() + offset[send_b], inputs[send_b].nbytes(), left, incoming.data(),
                    inputs[recv_b].nbytes(), static_cast<uint32_t>(s));
      reduction::combine(op, dtype, work.data() + offset[recv_b], incoming.data(), work.data() + offset[recv_b],
                         static_cast<size_t>(inputs[recv_b].numel()));
    }
  } catch (...) {
    // A failed send can leave the receive into `incoming` posted: abort the
    // transport (it stops touching buffers) before the scratch memory is freed.
    ctx.transport.abort(std::current_exception());
    throw;
  }
  if (output.nbytes() > 0) std::memcpy(output.data(), work.data() + offset[rank], output.nbytes());
  if (reduction::needs_finalize(op)) reduction::finalize(op, dtype, output.data(), static_cast<size_t>(output.numel()), n);
}

}  // namespace tdist
