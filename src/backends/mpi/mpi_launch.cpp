#include "backends/mpi_launch.h"

#include <cstdint>

#include "tdist/errors.h"
#include "backends/mpi/mpi_backend.h"
#include "backends/mpi/mpi_runtime.h"
#include "backends/backend_registry.h"

namespace tdist {

bool built_with_mpi() { return true; }

MpiWorld mpi_world(const std::string& who) {
  MpiWorld w;
  auto runtime = mpi::acquire_runtime(who);
  runtime->call([&] {
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  });
  w.from_rank0 = [runtime, who, rank = w.rank](const std::string& text) {
    std::string out;
    runtime->call([&] {
      // The length first, then the bytes: one broadcast each.
      uint64_t length = rank == 0 ? text.size() : 0;
      int rc = MPI_Bcast(&length, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
      if (rc == MPI_SUCCESS) {
        out = rank == 0 ? text : std::string(length, '\0');
        rc = MPI_Bcast(out.data(), static_cast<int>(length), MPI_CHAR, 0, MPI_COMM_WORLD);
      }
      if (rc != MPI_SUCCESS)
        throw DistBackendError(who + ": sharing rank 0's word over MPI_COMM_WORLD failed: MPI_Bcast returned " +
                               mpi::error_string(rc));
    });
    return out;
  };
  w.hold = runtime;
  return w;
}

void let_go_of_mpi() { mpi::let_go(); }

void register_mpi_backend() {
  mpi::register_backend_entry();
}

}  // namespace tdist
