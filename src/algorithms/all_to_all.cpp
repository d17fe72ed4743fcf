#include <cstring>

#include "algorithms/collective.h"

namespace tdist {

// Pairwise exchange: in step s a rank sends to rank+s and receives from
// rank-s, so every link carries one block per step and no rank is hot.
void all_to_all(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  if (outputs[rank].nbytes() > 0 && outputs[rank].data() != inputs[rank].data())
    std::memmove(outputs[rank].data(), inputs[rank].data(), outputs[rank].nbytes());
  for (int s = 1; s < n; ++s) {
    int to = (rank + s) % n, from = (rank - s + n) % n;
    ctx.send_recv(to, inputs[to].data(), inputs[to].nbytes(), from, outputs[from].data(), outputs[from].nbytes(),
                  static_cast<uint32_t>(s));
  }
}

}  // namespace tdist
