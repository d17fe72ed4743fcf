#include "backends/mpi_launch.h"

#include "util/env.h"

namespace tdist {

// The variables mpirun / mpiexec (Open MPI, MPICH's Hydra) and srun with PMI
// or PMIx give every process they start.
bool started_by_mpi_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (get_env(name)) return true;
  return false;
}

}  // namespace tdist
