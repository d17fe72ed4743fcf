// All-Reduce 示例: every rank contributes a tensor of ones; after all_reduce
// with SUM each rank holds the world size.
#include <cstdio>
#include <vector>

#include "example_main.h"

void run(int rank, int size) {
  std::vector<float> tensor(1, 1.0f);
  tdist::all_reduce(tensor, tdist::ReduceOp::SUM);
  std::printf("Rank %d has data %g (expected %d)\n", rank, tensor[0], size);
  std::fflush(stdout);
}

int main(int argc, char** argv) { return example::run(argc, argv, run); }
