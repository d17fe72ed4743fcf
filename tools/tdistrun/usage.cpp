#include "usage.h"

#include <tdist/version.h>

#include "options.h"

namespace tdistrun {

std::string help_text() {
  const std::string cpus = std::to_string(online_cpus());
  return R"(usage: tdistrun [options] PROGRAM [ARGS...]

Starts --nproc-per-node copies of PROGRAM on this node with the environment
torchrun gives (RANK, WORLD_SIZE, MASTER_ADDR, ...), so that
tdist::init_process_group() with init_method "env://" finds the other ranks.
Forwards their output line by line, forwards signals, and stops them all
when one of them fails.

Options end at the first word that is not an option, or at "--"; PROGRAM and
its ARGS follow. As with torchrun, every option may be written with dashes or
underscores (--nproc-per-node, --nproc_per_node), as "--opt V" or "--opt=V",
and abbreviated to a unique prefix (--nproc).

Options:
  --nproc-per-node N   workers on this node [1]. "auto" or "cpu": one per
                       online CPU ()" + cpus + R"( here); "gpu": one per NVIDIA GPU.
  --nnodes N           number of nodes [1]; "N:N" is accepted (elastic
                       MIN:MAX ranges are not).
  --node-rank R        this node's rank, 0 .. nnodes-1 [0].
  --master-addr A      address (name or IP) of the node with RANK 0, where the
                       program's TCPStore listens [127.0.0.1]. The store and
                       the ranks bind that address's interface (loopback for
                       127.0.0.1), not every interface (TDIST_BIND_ALL=1 does).
  --master-port P      port for that store on the master node [29500].
                       0 picks a free port (single node only).
  --standalone         single node: MASTER_ADDR=127.0.0.1 and a free
                       MASTER_PORT (overrides --master-addr/--master-port).
  --rdzv-id ID         job id, exported as TORCHELASTIC_RUN_ID [none].
  --role NAME          role name, exported as ROLE_NAME [default].
  --use-env            pass the local rank only as LOCAL_RANK in the
                       environment; this is the default (torchrun).
  --pass-local-rank    also append "--local-rank=N" to every worker's
                       arguments, as torch.distributed.launch did without
                       --use-env. Same as --use-env=false or --use-env=0.
  --no-prefix          do not prefix output: workers write straight to
                       tdistrun's stdout and stderr (also TDIST_RUN_PREFIX=0).
  --kill-timeout S     seconds between SIGTERM and SIGKILL when stopping
                       workers [5].
  --no-python          accepted for torchrun compatibility; PROGRAM is always
                       executed directly (found through PATH like a shell).
  -h, --help           this text.
  --version            tdistrun's version.

torchrun's PET_<OPTION> variables give defaults for --nproc-per-node,
--nnodes, --node-rank, --master-addr, --master-port, --standalone, --rdzv-id,
--role and --no-python (e.g. PET_NPROC_PER_NODE=4); the command line wins.

Environment of each worker (local_rank 0 .. nproc_per_node-1), on top of
tdistrun's own environment:
  RANK                node_rank * nproc_per_node + local_rank
  LOCAL_RANK          local_rank
  WORLD_SIZE          nnodes * nproc_per_node
  LOCAL_WORLD_SIZE    nproc_per_node
  GROUP_RANK          node_rank            GROUP_WORLD_SIZE  nnodes
  ROLE_RANK           same as RANK         ROLE_WORLD_SIZE   same as WORLD_SIZE
  ROLE_NAME           --role
  MASTER_ADDR         --master-addr        MASTER_PORT       --master-port
  TORCHELASTIC_RUN_ID --rdzv-id ("none" by default)
  TORCHELASTIC_RESTART_COUNT=0, TORCHELASTIC_MAX_RESTARTS=0 (no restarts)
  TDIST_LAUNCHED=1
  TDIST_JOB_TOKEN     a random secret made for this job when one node runs
                      it and neither TDIST_JOB_TOKEN nor TDIST_JOB_TOKEN_FILE
                      is set: the store and the ranks admit only processes
                      that prove they know it. With --nnodes > 1 set the same
                      TDIST_JOB_TOKEN_FILE (mode 600) on every node; without
                      it the job is open, as torch's, and tdistrun warns.
  OMP_NUM_THREADS=1   when it is unset and nproc_per_node > 1, as torchrun
                      does, so that the workers do not overload the node; set
                      it yourself to tune.
Workers read stdin from /dev/null. Each runs in its own process group and
receives SIGKILL if tdistrun itself dies, so no worker outlives the launcher.

Output:
  Every line a worker writes to stdout or stderr goes to tdistrun's stdout
  or stderr with the worker's global rank in front, "[rank3]: ...". Lines
  are never mixed: a partial line waits for its end (or for the worker to
  exit; then it is printed with a newline added). A worker's stdout is a
  pipe, so C stdio buffers it in blocks: flush (std::endl, fflush) to see
  lines as they happen. --no-prefix turns this off.

Signals:
  SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to tdistrun are passed to every
  worker (and to the processes in its process group); workers still running
  after --kill-timeout seconds get SIGKILL. tdistrun then exits with 128 +
  the signal number (130 for SIGINT, 143 for SIGTERM).

Failures:
  When a worker exits non-zero or is killed by a signal, tdistrun sends
  SIGTERM to the others (SIGKILL after --kill-timeout seconds), prints a
  summary to stderr naming the first failure first, e.g.
  tdistrun: rank 2 (local_rank 2, pid 731) failed first: exit code 3
  tdistrun:   rank 0 (local_rank 0, pid 729): terminated by the launcher (SIGTERM)
  tdistrun:   rank 1 (local_rank 1, pid 730): exited 0
  and exits with that worker's exit code, or 128 + its signal number.

Exit status: 0 when every worker exits 0; the first failure's code as
above; 128 + signal when stopped by a signal; 2 for a bad command line; 127
when PROGRAM cannot be found or executed.

Examples:
  One node, four workers:
    tdistrun --nproc-per-node=4 ./train --arg1 --arg2
  One node, one worker per CPU, on a free port:
    tdistrun --standalone --nproc-per-node=auto ./train
  Two nodes, four workers each; node 1 has IP 192.168.1.1 and free port 1234.
    On node 1:
      tdistrun --nproc-per-node=4 --nnodes=2 --node-rank=0 \
               --master-addr=192.168.1.1 --master-port=1234 ./train --arg1
    On node 2:
      tdistrun --nproc-per-node=4 --nnodes=2 --node-rank=1 \
               --master-addr=192.168.1.1 --master-port=1234 ./train --arg1
  A program that parses --local-rank=N (torch.distributed.launch style):
    tdistrun --nproc-per-node=2 --pass-local-rank ./train
)";
}

std::string version_text() { return std::string("tdistrun (tdist) ") + TDIST_VERSION_STRING + "\n"; }

}  // namespace tdistrun
