#include "usage.h"

#include <tdist/version.h>

#include "options.h"
#include "program.h"

namespace tdistrun {

std::string help_text() {
  const std::string cpus = std::to_string(online_cpus());
  return R"(usage: tdistrun [options] SCRIPT.py [ARGS...]
       tdistrun [options] -m MODULE [ARGS...]
       tdistrun [options] --no-python PROGRAM [ARGS...]

torchrun for tdist: the agent of one node. It meets the agents of the other
nodes (the rendezvous), starts --nproc-per-node workers with the environment
torchrun gives (RANK, WORLD_SIZE, MASTER_ADDR, ...), so that
init_process_group() with init_method "env://" finds the other ranks,
forwards their output line by line and signals, stops them all when one of
them fails, and restarts them all (--max-restarts) when asked.

As torchrun does, each worker runs the script with Python ("python -u
SCRIPT.py ARGS"; the script need not be executable), unless --no-python:
then PROGRAM itself is executed (so is an executable compiled program or
shell script without it: Python could not run them):
  tdistrun --nproc-per-node 4 train.py --lr 0.1
  tdistrun --nproc-per-node 4 --no-python ./train --lr 0.1
The Python is PYTHON_EXEC where set (as torchrun), else the one this build
was configured for ()" + std::string(configured_python()[0] ? configured_python() : "none: python3 from PATH") + R"(),
else a python3 next to tdistrun, else python3 from PATH.

Options end at the first word that is not an option, or at "--"; the script
(or MODULE, or PROGRAM) and its ARGS follow. As with torchrun, every option
may be written with dashes or underscores (--nproc-per-node,
--nproc_per_node), as "--opt V" or "--opt=V", and abbreviated to a unique
prefix (--nproc).

Options:
  --nproc-per-node N   workers on this node [1]. "cpu": one per online CPU
                       ()" + cpus + R"( here); "gpu": one per NVIDIA GPU; "auto":
                       gpu where there are GPUs, else cpu (torchrun's rule).
  --nnodes N|MIN:MAX   number of nodes [1]; MIN:MAX is elastic: the job runs
                       with between MIN and MAX nodes (c10d rendezvous).
  --node-rank R        this node's rank, 0 .. nnodes-1 (static rendezvous).
                       Without it, and with --nnodes > 1 or --rdzv-endpoint,
                       the rendezvous assigns node ranks in joining order.
  --rdzv-backend B     "static" (node ranks from --node-rank) or "c10d"
                       (assigned by the rendezvous) [static, or c10d as above].
  --rdzv-endpoint H[:P] where the agents meet: the node whose address H is
                       hosts the store there [--master-addr:--master-port;
                       port 29400 when only H is given].
  --rdzv-id ID         job id, exported as TORCHELASTIC_RUN_ID [none]; jobs
                       sharing an endpoint must differ.
  --rdzv-conf K=V,...  join_timeout (seconds for MIN nodes to join a round)
                       [600], last_call_timeout (more nodes may join after
                       MIN did) [30], close_timeout (the store's host waits
                       for the others to leave) [60]; torch's other keys are
                       accepted and ignored.
  --master-addr A      address (name or IP) of node 0, whose tdistrun hosts
                       the store [127.0.0.1]. It binds that address's
                       interface (loopback for 127.0.0.1), not every interface
                       (TDIST_BIND_ALL=1 does).
  --master-port P      port of that store [29500]. 0 picks a free port
                       (single node only).
  --standalone         single node: 127.0.0.1 and a free port (overrides
                       --master-addr/--master-port).
  --max-restarts N     when a worker fails, stop every node's workers and
                       start them all again in a new round, up to N times [0].
  --on-failure P       what a worker's failure (non-zero exit, a signal) does:
                       "restart" stops every node's workers and, within
                       --max-restarts, starts them all again (torchrun's)
                       [restart]; "shrink" lets the other workers run on and
                       tells them in the store (key exited/<rank>, one line);
                       the node's tdistrun then exits 0 when one of its workers
                       ran to exit 0. "shrink-and-replace" also starts a
                       replacement for the failed worker (same RANK, with
                       TDIST_JOIN_RUNNING_JOB=1) that joins the running job
                       when the others call admit_new_ranks(), up to
                       --max-restarts replacements. Every node needs the
                       same policy. Also TDIST_ON_FAILURE.
  --monitor-interval S how often (seconds) the agent asks the rendezvous
                       whether to stop or restart [0.1].
  --log-dir DIR        worker logs and error files, in torchrun's layout:
                       DIR/<rdzv-id>_<random>/attempt_<n>/<local_rank>/
                       {stdout.log,stderr.log,error.json}.
  -r, --redirects V    send worker streams to those files instead of the
                       console: 0 none, 1 stdout, 2 stderr, 3 both; or per
                       local rank, "0:1,1:3" [0].
  -t, --tee V          as --redirects, but to the files and the console [0].
  --local-ranks-filter L  only these local ranks' output reaches the console
                       (e.g. 0 or 0,2); their files are unaffected.
  --role NAME          role name, exported as ROLE_NAME [default].
  --use-env            pass the local rank only as LOCAL_RANK in the
                       environment; this is the default (torchrun).
  --pass-local-rank    also append "--local-rank=N" to every worker's
                       arguments, as torch.distributed.launch did without
                       --use-env. Same as --use-env=false or --use-env=0.
  --no-prefix          do not prefix output: workers write straight to
                       tdistrun's stdout and stderr (also TDIST_RUN_PREFIX=0).
  --kill-timeout S     seconds between SIGTERM and SIGKILL when stopping
                       workers [5]. torchrun's --shutdown-timeout S (and its
                       TORCH_ELASTIC_SHUTDOWN_TIMEOUT) set the same; this wins.
  -m, --module         run MODULE as "python -u -m MODULE ARGS".
  --no-python          execute PROGRAM directly (found through PATH like a
                       shell) instead of running it with Python: for C++
                       programs and shell scripts.
  --run-path           run the script with runpy.run_path (torchrun's
                       --run-path; each worker in its own interpreter). Takes
                       precedence over --no-python and -m.
  --log-line-prefix-template T  the console prefix of each worker's lines,
                       with ${role_name}, ${rank}, ${local_rank}, ${hostname}
                       (e.g. '${hostname}:${rank}: ') [[rank${rank}]: ];
                       also TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE.
  --signals-to-handle L  the signals passed to the workers, which then stop
                       (SIGKILL after --kill-timeout); others keep their
                       default action [SIGTERM,SIGINT,SIGHUP,SIGQUIT]. SIGUSR1,
                       when not listed, is passed on and stops nothing.
  --virtual-local-rank every worker gets LOCAL_RANK=0 and, as
                       CUDA_VISIBLE_DEVICES, its local rank's entry of the
                       launcher's list (or the local rank itself).
  -h, --help           this text.
  --version            tdistrun's version.

torchrun's options that mean nothing here are accepted, each with one line on
stderr saying so and why (their values are checked as torchrun does):
  --start-method spawn|fork|forkserver (workers are always new processes),
  --event-log-handler, --duplicate-stdout-filters, --duplicate-stderr-filters,
  --local-addr, --logs-specs, --numa-binding node|socket|exclusive|core-complex,
  --print-completion (exits).
--rdzv-backend etcd or etcd-v2 is an error: the backends are c10d and static.

torchrun's PET_<OPTION> variables give defaults for every option above that
torchrun has (e.g. PET_NPROC_PER_NODE=4, PET_MAX_RESTARTS=3); the command
line wins. In a Slurm allocation (SLURM_JOB_ID, SLURM_NODEID,
SLURM_JOB_NUM_NODES set) without --node-rank or --rdzv-*, the node rank is
SLURM_NODEID, --nnodes SLURM_JOB_NUM_NODES, --master-addr the first host of
SLURM_JOB_NODELIST and --master-port 20000 + SLURM_JOB_ID % 20000: the same
command runs on every node of an sbatch script.

Environment of each worker (local_rank 0 .. nproc_per_node-1), on top of
tdistrun's own environment:
  RANK                the node's first rank + local_rank (nodes in rank order)
  LOCAL_RANK          local_rank
  WORLD_SIZE          every node's --nproc-per-node, summed
  LOCAL_WORLD_SIZE    nproc_per_node
  GROUP_RANK          node rank            GROUP_WORLD_SIZE  nodes in the round
  ROLE_RANK           same as RANK         ROLE_WORLD_SIZE   same as WORLD_SIZE
  ROLE_NAME           --role
  MASTER_ADDR, MASTER_PORT  the store hosted by the agent (see below)
  TORCHELASTIC_USE_AGENT_STORE=True, TDIST_AGENT_STORE_PREFIX  so that
                      env:// uses that store, every rank a client, under this
                      round's prefix
  TORCHELASTIC_RUN_ID --rdzv-id ("none" by default)
  TORCHELASTIC_RESTART_COUNT  failures restarted so far; TORCHELASTIC_MAX_RESTARTS
  TORCHELASTIC_ERROR_FILE  where tdist writes the error a worker dies of (an
                      uncaught C++ exception, a Python traceback); the failure
                      summary prints it
  TDIST_LAUNCHED=1
  TDIST_JOB_TOKEN     a random secret made for this job when one node runs
                      it and neither TDIST_JOB_TOKEN nor TDIST_JOB_TOKEN_FILE
                      is set: the store and the ranks admit only processes
                      that prove they know it. With --nnodes > 1 set the same
                      TDIST_JOB_TOKEN_FILE (mode 600) on every node; without
                      it the job is open, as torch's, and tdistrun warns.
                      The agents' store checks it too.
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
  SIGUSR1 is passed to every worker and nothing stops: a tdist program
  writes its flight recorder to TDIST_FLIGHT_RECORDER_DIR (else to
  $TMPDIR/tdist-flight-recorder-<uid>; read it with tdist-trace). Workers
  start with SIGUSR1 ignored, so a program without a handler for it lives.
  Send it to this job's tdistrun only: kill -USR1 <its pid>.

Failures:
  When a worker exits non-zero or is killed by a signal, tdistrun sends
  SIGTERM to the others (SIGKILL after --kill-timeout seconds), prints a
  summary to stderr naming the first failure first, e.g.
  tdistrun: rank 2 (local_rank 2, pid 731) failed first: exit code 3
  tdistrun:   rank 0 (local_rank 0, pid 729): terminated by the launcher (SIGTERM)
  tdistrun:   rank 1 (local_rank 1, pid 730): exited 0
  with the error from the worker's error file under it, and exits with that
  worker's exit code, or 128 + its signal number. With --max-restarts N the
  failure instead starts a new round on every node (each says "restarting
  the workers in a new round: <the failure>") until N restarts are spent.
  Several nodes: the failure stops every node's workers; each tdistrun
  says "the job failed: <the failure>" and exits non-zero.
  With --on-failure shrink nothing is stopped: tdistrun at once writes
  under the key exited/3 of the workers' store one line such as
    rank 3 (local_rank 1, pid 4242) was killed by signal 9 (SIGKILL)
  the others run on, and at the end the summary lists the workers that
  failed and when.

Exit status: 0 when every worker exits 0 (with --on-failure shrink: when
one of this node's workers exited 0); the first failure's code as
above; 128 + signal when stopped by a signal; 2 for a bad command line; 127
when the script, PROGRAM or the Python cannot be found or executed (a
compiled program or shell script that is not executable says so).

Examples:
  One node, four workers of a Python script, or of a C++ program:
    tdistrun --nproc-per-node=4 train.py --arg1 --arg2
    tdistrun --nproc-per-node=4 --no-python ./train --arg1 --arg2
  One node, one worker per CPU, on a free port:
    tdistrun --standalone --nproc-per-node=cpu train.py
  Three nodes, no node ranks (the rendezvous assigns them), restarts:
    On every node:
      tdistrun --nnodes=3 --nproc-per-node=4 --rdzv-backend=c10d \
               --rdzv-endpoint=192.168.1.1:29400 --max-restarts=3 train.py
  Two to four nodes, whichever come (elastic):
      tdistrun --nnodes=2:4 --nproc-per-node=4 --rdzv-endpoint=192.168.1.1 train.py
  Two nodes, four workers each; node 1 has IP 192.168.1.1 and free port 1234.
    On node 1:
      tdistrun --nproc-per-node=4 --nnodes=2 --node-rank=0 \
               --master-addr=192.168.1.1 --master-port=1234 train.py --arg1
    On node 2:
      tdistrun --nproc-per-node=4 --nnodes=2 --node-rank=1 \
               --master-addr=192.168.1.1 --master-port=1234 train.py --arg1
  A script that parses --local-rank=N (torch.distributed.launch style; it
  comes right after the script, or last with --no-python):
    tdistrun --nproc-per-node=2 --pass-local-rank train.py
)";
}

std::string version_text() { return std::string("tdistrun (tdist) ") + TDIST_VERSION_STRING + "\n"; }

}  // namespace tdistrun
