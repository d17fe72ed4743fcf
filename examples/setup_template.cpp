// run.py of the tutorial: spawn processes, initialize, run a function.
//   tdist-example-setup_template [world_size]          (spawns itself)
//   tdistrun --nproc-per-node 4 --no-python tdist-example-setup_template
#include <cstdio>

#include "example_main.h"

// The distributed function to be implemented later.
void run(int rank, int size) {
  std::printf("Hello from rank %d of %d (backend %s)\n", rank, size, tdist::get_backend().c_str());
  std::fflush(stdout);
}

int main(int argc, char** argv) { return example::run(argc, argv, run); }
