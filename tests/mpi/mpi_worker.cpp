// Ranks of a job under mpirun for tests/mpi/CMakeLists.txt:
//
//   tdist-mpi-worker tdist-through-mpi   the tdist backend with no MASTER_ADDR: rank 0's store
//                                        is found through MPI, with a job token of its making;
//                                        the collective matrix; MPI finalised by destroy
//   tdist-mpi-worker cpu-spec            init_process_group("cpu:mpi"): a per-device spec of only
//                                        the mpi backend needs no store either
//   tdist-mpi-worker die                 the mpi backend; rank 1 exits in the middle of the
//                                        others' all_reduces
//   tdist-mpi-worker abort               the same, rank 1 calls MPI_Abort
//
// Exits 0 when every check passes, else prints what failed (naming the rank) and exits 1.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/collective_matrix.h"
#include "tdist/tdist.h"

using namespace tdist;

namespace {

int through_mpi() {
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
  unsetenv("TDIST_JOB_TOKEN");
  unsetenv("TDIST_JOB_TOKEN_FILE");
  init_process_group({.backend = "tdist"});
  const int rank = get_rank(), n = get_world_size();
  const char* mpi_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (get_backend() != "tdist" || (mpi_rank && std::atoi(mpi_rank) != rank)) {
    std::fprintf(stderr, "rank %d: the world is not mpirun's (backend %s)\n", rank, get_backend().c_str());
    return 1;
  }
  const char* token = std::getenv("TDIST_JOB_TOKEN");
  if (!token || std::string(token).size() != 64) {
    std::fprintf(stderr, "rank %d: no job token was shared through MPI\n", rank);
    return 1;
  }
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}})
    tdist::testing::matrix::check_collectives(group_world(), count, "the world");
  destroy_process_group();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    std::fprintf(stderr, "rank %d: destroy_process_group left MPI initialised\n", rank);
    return 1;
  }
  if (rank == 0) std::printf("tdist backend on %d ranks through MPI: ok\n", n);
  return 0;
}

int cpu_spec() {
  unsetenv("MASTER_ADDR");
  init_process_group({.backend = "cpu:mpi"});
  const int rank = get_rank(), n = get_world_size();
  std::vector<int64_t> x(3, rank);
  all_reduce(Tensor(x.data(), x.size()))->wait();
  if (get_backend() != "cpu:mpi" || x[2] != static_cast<int64_t>(n) * (n - 1) / 2) {
    std::fprintf(stderr, "rank %d: backend %s, all_reduce gave %lld\n", rank, get_backend().c_str(),
                 static_cast<long long>(x[2]));
    return 1;
  }
  destroy_process_group();
  if (rank == 0) std::printf("cpu:mpi on %d ranks: ok\n", n);
  return 0;
}

int lose_a_rank(bool abort) {
  init_process_group({.backend = "mpi"});
  const int rank = get_rank();
  barrier()->wait();
  std::vector<float> x(1000, 1.0f);
  for (int i = 0; i < 20; ++i) all_reduce(Tensor(x.data(), x.size()))->wait();
  if (rank == 1) {
    std::fprintf(stderr, "rank 1: leaving the job (%s)\n", abort ? "MPI_Abort" : "_exit");
    if (abort) MPI_Abort(MPI_COMM_WORLD, 5);
    _exit(3);
  }
  for (;;) all_reduce(Tensor(x.data(), x.size()))->wait();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "tdist-through-mpi") return through_mpi();
    if (mode == "cpu-spec") return cpu_spec();
    if (mode == "die" || mode == "abort") return lose_a_rank(mode == "abort");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: tdist-mpi-worker tdist-through-mpi|cpu-spec|die|abort\n");
  return 2;
}
