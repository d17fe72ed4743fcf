// What a Slurm job step (srun, sbatch) tells its tasks, for env:// where
// torchrun's variables are unset: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
// SLURM_NODEID, and rank 0's host as the first of SLURM_JOB_NODELIST.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tdist::slurm {

// Every host of a Slurm host list, in order: "node[01-03,07],gpu5" ->
// node01 node02 node03 node07 gpu5 (zero padding kept; several bracket
// groups in one name multiply: "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2).
// DistValueError naming the list when it is malformed.
std::vector<std::string> expand_nodelist(const std::string& list);

// The first host of SLURM_JOB_NODELIST (else SLURM_NODELIST), when in a Slurm job.
std::optional<std::string> master_host();
// A port for rank 0's store that every task of the job computes alike
// (20000 + SLURM_JOB_ID mod 20000), when in a Slurm job.
std::optional<int> master_port();

}  // namespace tdist::slurm
