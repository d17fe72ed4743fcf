// Backend specs: "tdist", "gloo" (alias), "cpu:tdist,cuda:nccl".
#pragma once

#include <string>

namespace tdist {

// Throws DistValueError naming the unknown backend or device in `spec`.
void validate_backend_spec(const std::string& spec);
// Whether every backend `spec` names takes its ranks from MPI_COMM_WORLD (the
// mpi backend): such a group needs no store.
bool spec_takes_world_from_mpi(const std::string& spec);

}  // namespace tdist
