// Which of its host's ranks this process is, as the launcher that started it
// says: torchrun's and tdistrun's LOCAL_RANK and LOCAL_WORLD_SIZE, else Open
// MPI's mpirun (OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE), else
// MPICH's Hydra (MPI_LOCALRANKID, MPI_LOCALNRANKS). A process started under
// mpirun with env:// then gets a home CPU and the spin of its real rank
// count, as it would under torchrun (util/home_cpu.h).
#pragma once

#include <optional>

namespace tdist {

struct LocalPlacement {
  long long rank = 0;  // among the ranks of this host, from 0
  long long size = 0;  // the ranks of this host
};

// The first launcher's pair that is set whole and consistent (0 <= rank <
// size); none where no launcher said, or said garbage (the launcher's
// business, not a reason to fail here).
std::optional<LocalPlacement> local_placement();

}  // namespace tdist
