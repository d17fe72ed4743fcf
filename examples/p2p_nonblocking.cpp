// 非阻塞点对点通信: isend/irecv return a Work; the buffer may be touched only
// after wait() returns.
#include <cstdio>
#include <memory>
#include <vector>

#include "example_main.h"

void run(int rank, int /*size*/) {
  std::vector<float> tensor(1, 0.0f);
  std::shared_ptr<tdist::Work> req;
  if (rank == 0) {
    tensor[0] += 1;
    req = tdist::isend(tensor, /*dst=*/1);
    std::printf("Rank 0 started sending\n");
  } else if (rank == 1) {
    req = tdist::irecv(tensor, /*src=*/0);
    std::printf("Rank 1 started receiving\n");
  }
  if (req) req->wait();
  std::printf("Rank %d has data %g\n", rank, tensor[0]);
  std::fflush(stdout);
}

int main(int argc, char** argv) { return example::run(argc, argv, run); }
