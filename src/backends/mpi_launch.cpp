#include "backends/mpi_launch.h"

#include "util/settings.h"

namespace tdist {

// The variables mpirun / mpiexec (Open MPI, MPICH's Hydra) and srun with PMI
// or PMIx give every process they start.
bool started_by_mpi_launcher() {
  return settings::get<"OMPI_COMM_WORLD_SIZE">() || settings::get<"PMI_SIZE">() || settings::get<"PMIX_RANK">() ||
         settings::get<"MPI_LOCALNRANKS">();
}

}  // namespace tdist
