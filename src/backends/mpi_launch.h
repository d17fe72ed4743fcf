// What an MPI launcher (mpirun, mpiexec, srun with PMI) gives a process, read
// through the MPI library when the build has one (backends/mpi/), or nothing
// (backends/mpi_absent/): init uses it to start without MASTER_ADDR and
// MASTER_PORT, and to take the mpi backend's world from MPI_COMM_WORLD.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tdist {

struct MpiWorld {
  int rank = 0;
  int size = 1;
  // Collective over MPI_COMM_WORLD: every rank returns rank 0's `text`.
  std::function<std::string(const std::string& text)> from_rank0;
  // Keeps MPI initialised (see let_go_of_mpi).
  std::shared_ptr<void> hold;
};

// Whether this build can use an MPI library.
bool built_with_mpi();
// Whether a launcher of an MPI library started this process (its variables
// are set), with or without MPI in this build (backends/mpi_launch.cpp).
bool started_by_mpi_launcher();
// MPI_COMM_WORLD's rank and size, initialising MPI if nobody has;
// DistBackendError without MPI in the build (naming `who`).
MpiWorld mpi_world(const std::string& who);
// destroy_process_group is done with MPI: finalise it, if tdist initialised
// it, once no group uses it (a failed init does not: MPI cannot start twice).
void let_go_of_mpi();

}  // namespace tdist
