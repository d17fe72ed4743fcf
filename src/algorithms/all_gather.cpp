#include <cstring>

#include "algorithms/collective.h"

namespace tdist {

// Ring: in step s every rank forwards the block it received in step s-1 (its
// own first) to the right. n-1 steps, each moving one block per link; blocks
// may differ in size (uneven all_gather).
void all_gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  if (outputs[rank].data() != input.data() && input.nbytes() > 0)
    std::memcpy(outputs[rank].data(), input.data(), input.nbytes());
  const int right = (rank + 1) % n, left = (rank - 1 + n) % n;
  for (int s = 0; s < n - 1; ++s) {
    int send_b = (rank - s + n) % n;
    int recv_b = (rank - s - 1 + n) % n;
    ctx.send_recv(right, outputs[send_b].data(), outputs[send_b].nbytes(), left, outputs[recv_b].data(),
                  outputs[recv_b].nbytes(), static_cast<uint32_t>(s));
  }
}

}  // namespace tdist
