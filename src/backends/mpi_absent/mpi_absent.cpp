// A build without MPI: no "mpi" backend, and init says what to set instead.
#include "backends/mpi_launch.h"
#include "backends/backend_registry.h"
#include "tdist/errors.h"

namespace tdist {

bool built_with_mpi() { return false; }

MpiWorld mpi_world(const std::string& who) {
  throw DistBackendError(who + ": this build of tdist has no MPI (it was configured without an MPI library, or "
                               "with -DTDIST_WITH_MPI=OFF): install one (apt-get install libopenmpi-dev) and rebuild");
}

void let_go_of_mpi() {}

void register_mpi_backend() {}

}  // namespace tdist
