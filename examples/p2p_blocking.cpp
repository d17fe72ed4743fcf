// 阻塞点对点通信: rank 0 increments a tensor and sends it to rank 1, which
// receives it; both end with 1 (other ranks keep 0).
#include <cstdio>
#include <vector>

#include "example_main.h"

void run(int rank, int /*size*/) {
  std::vector<float> tensor(1, 0.0f);
  if (rank == 0) {
    tensor[0] += 1;
    tdist::send(tensor, /*dst=*/1);  // send the tensor to process 1
  } else if (rank == 1) {
    tdist::recv(tensor, /*src=*/0);  // receive the tensor from process 0
  }
  std::printf("Rank %d has data %g\n", rank, tensor[0]);
  std::fflush(stdout);
}

int main(int argc, char** argv) { return example::run(argc, argv, run); }
