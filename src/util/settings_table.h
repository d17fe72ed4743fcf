// The registry's table: every environment variable tdist reads, declared once
// with its type, typed default, range and meaning (util/settings.h reads them;
// docs/configuration.md is this table rendered). Keep each group together:
// the order is the order of the documentation.
#pragma once

#include <array>
#include <climits>
#include <optional>

namespace tdist {

enum class SettingType {
  Bool,               // 1/0, true/false, yes/no, on/off
  Int,                // a whole number
  Bytes,              // a whole number of bytes
  Micros,             // a whole number of microseconds
  Millis,             // a whole number of milliseconds
  Seconds,            // a whole number of seconds
  FractionalSeconds,  // seconds, fractions allowed (0.5), read as milliseconds, at least one
  Choice,             // one of `choices`, in any case, or an alias
  Text,
  Path,
  PathPrefix,         // a path to which tdist appends a name
  List,               // comma-separated
};

struct SettingInfo {
  const char* name;     // "TDIST_SHM"
  SettingType type;
  const char* group;    // "launch" (set by the launcher), or the layer that reads it
  const char* meaning;  // one or two sentences
  // The typed default: a bool's 0 or 1, a number in its type's unit (a
  // FractionalSeconds one in whole seconds), or the text of a choice, text,
  // path or list. Neither: no default; the reader does what `note` says.
  std::optional<long long> default_number = std::nullopt;
  const char* default_text = nullptr;
  // Shown after the default in the documentation: the default in words, or
  // what tdist does where the setting is unset.
  const char* note = nullptr;
  // The range of a number, where its reader cannot take every value.
  long long min = LLONG_MIN;
  long long max = LLONG_MAX;
  const char* choices = nullptr;  // a Choice's values, "OFF, INFO, DETAIL"
  // A choice's other spellings, each to the one it stands for ("WARNING=WARN,FATAL=ERROR").
  const char* aliases = nullptr;
  const char* torch_name = nullptr;  // torch's equivalent, read where `name` is unset

  constexpr bool has_default() const { return default_number.has_value() || default_text != nullptr; }
};

inline constexpr long long kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;

inline constexpr std::array kSettingTable{
    // Set by torchrun, tdistrun or mpirun; read by init_process_group and for placement.
    SettingInfo{.name = "MASTER_ADDR", .type = SettingType::Text, .group = "launch",
                .meaning = "Host of rank 0's store for `env://`; the mesh's listeners also bind the interface that "
                           "reaches it."},
    SettingInfo{.name = "MASTER_PORT", .type = SettingType::Int, .group = "launch",
                .meaning = "Port of rank 0's store for `env://`.", .min = 0, .max = 65535},
    SettingInfo{.name = "RANK", .type = SettingType::Int, .group = "launch",
                .meaning = "This process's rank for `env://`."},
    SettingInfo{.name = "WORLD_SIZE", .type = SettingType::Int, .group = "launch",
                .meaning = "The number of ranks for `env://`."},
    SettingInfo{.name = "LOCAL_RANK", .type = SettingType::Int, .group = "launch",
                .meaning = "This process's rank on its host: picks its home CPU."},
    SettingInfo{.name = "LOCAL_WORLD_SIZE", .type = SettingType::Int, .group = "launch",
                .meaning = "Ranks on this host: more ranks than cores make waiting threads yield sooner."},
    SettingInfo{.name = "TORCHELASTIC_RUN_ID", .type = SettingType::Text, .group = "launch",
                .meaning = "Set by torchrun: `is_torchelastic_launched()`."},
    SettingInfo{.name = "TORCHELASTIC_USE_AGENT_STORE", .type = SettingType::Bool, .group = "launch",
                .meaning = "Set by tdistrun and torchrun: `env://` connects to the launcher's store at "
                           "MASTER_ADDR:MASTER_PORT (every rank a client) instead of rank 0 hosting one; "
                           "torchrun's (no TDIST_AGENT_STORE_PREFIX) in torch's protocol, under the prefix "
                           "`/worker/attempt_<TORCHELASTIC_RESTART_COUNT>`."},
    SettingInfo{.name = "TDIST_AGENT_STORE_PREFIX", .type = SettingType::Text, .group = "launch",
                .meaning = "Set by tdistrun: the key prefix of this round's workers in its store; it also says that "
                           "the store is tdistrun's (tdist's protocol), not torchrun's."},
    SettingInfo{.name = "TDIST_LAUNCHED", .type = SettingType::Bool, .group = "launch",
                .meaning = "Set by tdistrun in every worker: the process was started by tdist's launcher (spawn "
                           "clears it in its children, which meet among themselves)."},
    SettingInfo{.name = "TORCHELASTIC_RESTART_COUNT", .type = SettingType::Int, .group = "launch",
                .meaning = "Set by tdistrun and torchrun: how many times the workers were restarted.",
                .default_number = 0},
    SettingInfo{.name = "TORCHELASTIC_ERROR_FILE", .type = SettingType::Path, .group = "launch",
                .meaning = "Set by tdistrun and torchrun: where an uncaught error is written (torch's JSON), for "
                           "the launcher's failure summary."},
    SettingInfo{.name = "OMPI_COMM_WORLD_RANK", .type = SettingType::Int, .group = "launch",
                .meaning = "Rank under Open MPI's mpirun, where RANK is unset."},
    SettingInfo{.name = "OMPI_COMM_WORLD_SIZE", .type = SettingType::Int, .group = "launch",
                .meaning = "World size under Open MPI's mpirun, where WORLD_SIZE is unset."},
    SettingInfo{.name = "OMPI_COMM_WORLD_LOCAL_RANK", .type = SettingType::Int, .group = "launch",
                .meaning = "This process's rank on its host under Open MPI's mpirun, where LOCAL_RANK is unset: "
                           "picks its home CPU (util/local_placement.h)."},
    SettingInfo{.name = "OMPI_COMM_WORLD_LOCAL_SIZE", .type = SettingType::Int, .group = "launch",
                .meaning = "Ranks on this host under Open MPI's mpirun, where LOCAL_WORLD_SIZE is unset."},
    SettingInfo{.name = "PMI_RANK", .type = SettingType::Int, .group = "launch",
                .meaning = "Rank under MPICH/Hydra (PMI), where RANK is unset."},
    SettingInfo{.name = "PMI_SIZE", .type = SettingType::Int, .group = "launch",
                .meaning = "World size under MPICH/Hydra (PMI), where WORLD_SIZE is unset."},
    SettingInfo{.name = "PMIX_RANK", .type = SettingType::Int, .group = "launch",
                .meaning = "Set by PMIx launchers (Open MPI 4+, Slurm's pmix): with OMPI_COMM_WORLD_SIZE, PMI_SIZE "
                           "and MPI_LOCALNRANKS, tells that an MPI launcher started the process (docs/mpi.md)."},
    SettingInfo{.name = "MPI_LOCALNRANKS", .type = SettingType::Int, .group = "launch",
                .meaning = "Set by MPICH's Hydra: an MPI launcher started the process (see PMIX_RANK); the ranks "
                           "on this host where LOCAL_WORLD_SIZE and Open MPI's are unset."},
    SettingInfo{.name = "MPI_LOCALRANKID", .type = SettingType::Int, .group = "launch",
                .meaning = "This process's rank on its host under MPICH's Hydra, where LOCAL_RANK and Open MPI's "
                           "are unset."},
    SettingInfo{.name = "SLURM_PROCID", .type = SettingType::Int, .group = "launch",
                .meaning = "Rank in a Slurm job step, where RANK and MPI's are unset."},
    SettingInfo{.name = "SLURM_NTASKS", .type = SettingType::Int, .group = "launch",
                .meaning = "World size in a Slurm job step, where WORLD_SIZE and MPI's are unset."},
    SettingInfo{.name = "SLURM_JOB_NODELIST", .type = SettingType::Text, .group = "launch",
                .meaning = "The Slurm job's hosts (e.g. node[01-04,07]): the first is rank 0's host where "
                           "MASTER_ADDR is unset."},
    SettingInfo{.name = "SLURM_NODELIST", .type = SettingType::Text, .group = "launch",
                .meaning = "Older name of SLURM_JOB_NODELIST, read where it is unset."},
    SettingInfo{.name = "SLURM_JOB_ID", .type = SettingType::Int, .group = "launch",
                .meaning = "The Slurm job's id: where MASTER_PORT is unset, rank 0's store listens on 20000 + "
                           "SLURM_JOB_ID mod 20000."},

    // Security.
    SettingInfo{.name = "TDIST_JOB_TOKEN", .type = SettingType::Text, .group = "util",
                .meaning = "The job's secret: the store refuses clients without it and ranks prove it to each other "
                           "(HMAC). tdistrun and spawn set a fresh one per job.",
                .note = "open, with a warning"},
    SettingInfo{.name = "TDIST_JOB_TOKEN_FILE", .type = SettingType::Path, .group = "util",
                .meaning = "A file readable by its owner only that holds the job token, where TDIST_JOB_TOKEN is "
                           "unset."},
    SettingInfo{.name = "TDIST_BIND_ALL", .type = SettingType::Bool, .group = "util",
                .meaning = "1: listeners bind every interface instead of the job's (MASTER_ADDR's, "
                           "TDIST_SOCKET_IFNAME's, loopback for a local job).",
                .default_number = 0},

    // Logging and checks.
    SettingInfo{.name = "TDIST_DEBUG", .type = SettingType::Choice, .group = "util",
                .meaning = "INFO logs more; DETAIL also makes every rank check, before each collective, that all "
                           "called it with the same arguments.",
                .default_text = "OFF", .choices = "OFF, INFO, DETAIL", .torch_name = "TORCH_DISTRIBUTED_DEBUG"},
    SettingInfo{.name = "TDIST_LOG_LEVEL", .type = SettingType::Choice, .group = "util",
                .meaning = "The least severe log lines written to stderr (torch's WARNING and FATAL, and its 0 to 3 "
                           "for INFO to FATAL, are accepted too).",
                .default_text = "WARN", .choices = "ERROR, WARN, INFO, DEBUG",
                .aliases = "WARNING=WARN,FATAL=ERROR,DETAIL=DEBUG,0=INFO,1=WARN,2=ERROR,3=ERROR",
                .torch_name = "TORCH_CPP_LOG_LEVEL"},
    SettingInfo{.name = "TDIST_FLIGHT_RECORDER_ENTRIES", .type = SettingType::Int, .group = "trace",
                .meaning = "Operations each group's flight recorder keeps (0 turns it off, but TDIST_TRACE keeps 64 "
                           "for its timeline).",
                .default_number = 2000, .min = 0, .max = 1 << 20, .torch_name = "TORCH_FR_BUFFER_SIZE"},
    SettingInfo{.name = "TDIST_FLIGHT_RECORDER_DIR", .type = SettingType::Path, .group = "trace",
                .meaning = "Folder of the flight recorder dumps (tdist_fr_<rank>.json), written when an operation "
                           "fails or times out, when SIGTERM stops the rank, on SIGUSR1 and by "
                           "dump_flight_recorder(); made (0700) at init if missing. Unset: no dumps on failure, and "
                           "SIGUSR1 dumps to TMPDIR/tdist-flight-recorder-<uid>."},
    SettingInfo{.name = "TORCH_FR_DUMP_TEMP_FILE", .type = SettingType::PathPrefix, .group = "trace",
                .meaning = "torch's name: dumps go to <prefix><rank>.json instead (it wins over "
                           "TDIST_FLIGHT_RECORDER_DIR)."},
    SettingInfo{.name = "TDIST_TRACE", .type = SettingType::Path, .group = "trace",
                .meaning = "Folder where each rank writes its timeline, tdist_trace_<rank>.jsonl, one line per "
                           "finished operation and per step of a hierarchical one (inside a host, among hosts) "
                           "(merge with tdist-trace --timeline); made (0700) at init if missing."},
    SettingInfo{.name = "TMPDIR", .type = SettingType::Path, .group = "trace",
                .meaning = "The system's folder for temporary files: a SIGUSR1 dump without "
                           "TDIST_FLIGHT_RECORDER_DIR goes to its tdist-flight-recorder-<uid> (made 0700), and "
                           "tdistrun's log folder is made in it.",
                .default_text = "/tmp"},

    // Store (rank 0's TCPStore server).
    SettingInfo{.name = "TDIST_STORE_MAX_BYTES", .type = SettingType::Bytes, .group = "store",
                .meaning = "Keys and values the store holds; a request past it gets an error, the server lives on.",
                .default_number = 2 * kGiB, .min = 1},
    SettingInfo{.name = "TDIST_STORE_MAX_ANSWER_BYTES", .type = SettingType::Bytes, .group = "store",
                .meaning = "The largest answer to one get or multi_get.", .default_number = 1 * kGiB, .min = 1},
    SettingInfo{.name = "TDIST_STORE_MAX_BUFFERED_BYTES", .type = SettingType::Bytes, .group = "store",
                .meaning = "Answers written but not yet read by their clients, all together.",
                .default_number = 2 * kGiB, .min = 1},
    SettingInfo{.name = "TDIST_STORE_MAX_CONNECTIONS", .type = SettingType::Int, .group = "store",
                .meaning = "Open connections (never more than half the descriptor limit); the oldest "
                           "unauthenticated one goes first.",
                .default_number = 4096, .min = 1},
    SettingInfo{.name = "TDIST_STORE_HANDSHAKE_MS", .type = SettingType::Millis, .group = "store",
                .meaning = "Time a new connection has to say hello and authenticate.", .default_number = 5000,
                .min = 1},
    SettingInfo{.name = "TDIST_STORE_IDLE_TIMEOUT_S", .type = SettingType::Seconds, .group = "store",
                .meaning = "Closes an authenticated connection with nothing pending after this long.",
                .default_number = 0, .note = "never", .min = 0},
    SettingInfo{.name = "TDIST_STORE_TORCH_CLIENTS", .type = SettingType::Choice, .group = "store",
                .meaning = "Which torch.distributed clients (torch's protocol, which cannot prove the job token) a "
                           "store with a job token serves: LOCAL those connecting from this machine, ALL any, REFUSE "
                           "none. A store without a token serves every client.",
                .default_text = "LOCAL", .choices = "LOCAL, ALL, REFUSE"},

    // Groups.
    SettingInfo{.name = "TDIST_TIMEOUT", .type = SettingType::FractionalSeconds, .group = "process_group",
                .meaning = "The default timeout of init_process_group and of new groups (new_group, new_subgroups, "
                           "split_group): how long an operation waits for its peers before it fails. A timeout "
                           "passed to the call wins over it.",
                .default_number = 1800, .note = "30 minutes, torch's", .max = 1000000000},
    SettingInfo{.name = "TDIST_JOIN_RUNNING_JOB", .type = SettingType::Int, .group = "process_group",
                .meaning = "n > 0: init_process_group joins a job that is already running instead of starting "
                           "one with the other ranks: it waits until the members call admit_new_ranks, then has "
                           "the default group of them all; it is the n-th replacement of its RANK (tdistrun "
                           "--on-failure shrink-and-replace sets it for the workers it starts in place of dead "
                           "ones; by hand, 1). 0: start with the others.",
                .default_number = 0, .min = 0, .max = 1000000},
    SettingInfo{.name = "TDIST_FAILURE_DETECTION_TIMEOUT", .type = SettingType::FractionalSeconds,
                .group = "process_group",
                .meaning = "How long failed_ranks waits for a rank of a failed group that neither says it is alive "
                           "nor is proven dead (its connection ended without a word, its process is gone from "
                           "the host, or tdistrun reaped it) before the survivors count it as failed. Make it "
                           "longer than the longest time a live rank spends between two operations.",
                .default_number = 10, .max = 1000000000},

    // Transport.
    SettingInfo{.name = "TDIST_SOCKET_IFNAME", .type = SettingType::List, .group = "transport",
                .meaning = "Interfaces whose addresses the mesh announces and binds. With several, each rank "
                           "listens on each, and every pair's connections (at least one per interface) are spread "
                           "over them round-robin; every rank must list as many.",
                .note = "every interface that is up", .torch_name = "GLOO_SOCKET_IFNAME"},
    SettingInfo{.name = "TDIST_SOCKETS_PER_PEER", .type = SettingType::Int, .group = "transport",
                .meaning = "Connections per pair of ranks over TCP; a large message streams over all of them.",
                .default_number = 1, .min = 1, .max = 16},
    SettingInfo{.name = "TDIST_PEER_SILENCE_TIMEOUT", .type = SettingType::FractionalSeconds, .group = "transport",
                .meaning = "How long a connection to a peer on another host may go without any answer from that "
                           "host (TCP keepalive probes, data not acknowledged) before it is lost and the "
                           "operations waiting on the peer fail: finds a host that lost power or a pulled cable "
                           "in this time, where otherwise only the group timeout would. A stopped process's host "
                           "still answers: the group timeout finds that one.",
                .note = "the kernel's: hours for an idle connection, about 15 minutes for unacknowledged data",
                .max = 86400},
    SettingInfo{.name = "TDIST_TCP_RENDEZVOUS_BYTES", .type = SettingType::Bytes, .group = "transport",
                .meaning = "Socket messages larger than this wait for their receive (rendezvous); 0: every message "
                           "does.",
                .default_number = 512 * kKiB, .min = 0},
    SettingInfo{.name = "TDIST_SPIN_US", .type = SettingType::Micros, .group = "transport",
                .meaning = "How long a waiting thread polls the sockets and rings before it blocks.",
                .default_number = 250, .min = 0},
    SettingInfo{.name = "TDIST_SHM", .type = SettingType::Bool, .group = "transport",
                .meaning = "0: no shared memory between ranks of a host (no rings, no shared-memory collectives).",
                .default_number = 1},
    SettingInfo{.name = "TDIST_TRANSPORTS", .type = SettingType::List, .group = "transport",
                .meaning = "The ways to reach a peer, in order of preference: each peer's messages go over the "
                           "first that reaches it (shm: shared-memory rings, peers on this host only; tcp: the "
                           "socket, any peer). A peer that none reaches fails the set-up, naming it.",
                .default_text = "shm,tcp"},
    SettingInfo{.name = "TDIST_HOST_ID", .type = SettingType::Text, .group = "transport",
                .meaning = "This process's host as the ranks see it (NCCL_HOSTID's role): ranks with one id count as "
                           "one host; unset: hostname, boot id and network namespace. For tests that emulate hosts "
                           "on one machine."},
    SettingInfo{.name = "TDIST_TCP_SLICE_BYTES", .type = SettingType::Bytes, .group = "transport",
                .meaning = "The largest frame of a large message's data on a peer's socket (0: one frame), so that "
                           "the peer's own announcements pass between frames and both directions stream at once. "
                           "Set, it applies to every socket (on loopback frames cost 1.5-2.5x from 1 MiB).",
                .note = "512 KiB to peers on other hosts, else 0", .min = 0},
    SettingInfo{.name = "TDIST_TCP_NOTSENT_LOWAT", .type = SettingType::Bytes, .group = "transport",
                .meaning = "TCP_NOTSENT_LOWAT of the sockets that carry data (0: the kernel's): how much may wait "
                           "unsent in the kernel ahead of an announcement. Set, it applies to every socket.",
                .note = "128 KiB to peers on other hosts, else 0", .min = 0},
    SettingInfo{.name = "TDIST_SHM_RING_BYTES", .type = SettingType::Bytes, .group = "transport",
                .meaning = "Each direction's ring between two ranks of a host.", .default_number = 512 * kKiB,
                .min = 4 * kKiB, .max = 1 * kGiB},
    SettingInfo{.name = "TDIST_SHM_P2P_SINGLE_COPY_BYTES", .type = SettingType::Bytes, .group = "transport",
                .meaning = "Messages between two ranks of a host of at least this size go in one copy, the receiver "
                           "reading one half from the sender's memory while the sender writes the other (cross-memory "
                           "attach), instead of twice through the ring; 0: never.",
                .default_number = 64 * kKiB, .min = 0},
    SettingInfo{.name = "TDIST_SHARE_CONNECTIONS", .type = SettingType::Bool, .group = "transport",
                .meaning = "1: every group talks over the default group's connections and threads (a group's "
                           "abort or failure fails it alone; a lost peer or a timeout fails every group that talks "
                           "to that peer); 0: each group connects anew.",
                .default_number = 1},

    // Devices.
    SettingInfo{.name = "TDIST_EMULATE_CUDA", .type = SettingType::Int, .group = "device",
                .meaning = "N > 0: N CUDA devices emulated in host memory replace the CUDA runtime (a stream "
                           "runs each step when it is called, once the host words it waits on are set; IPC handles "
                           "are memfds). For testing the data paths of CUDA tensors on machines without a GPU; "
                           "never for real work.",
                .default_number = 0, .min = 0},
    SettingInfo{.name = "TDIST_CUDA_WAIT", .type = SettingType::Choice, .group = "backends",
                .meaning = "How Work.wait() on an operation of the tdist backend on CUDA tensors orders the "
                           "caller's stream: AUTO makes the stream wait on a word in pinned host memory that the "
                           "operation sets when done (the host does not block), where the device can; HOST blocks "
                           "the host until the operation is done, then orders the stream after it. Read when a "
                           "group first uses a device.",
                .default_text = "AUTO", .choices = "AUTO, HOST"},
    SettingInfo{.name = "TDIST_CUDA_PATH", .type = SettingType::Choice, .group = "backends",
                .meaning = "How the tdist backend moves CUDA tensors among ranks of one host: IPC maps the ranks' "
                           "device buffers into each other (all_reduce, broadcast, all_gather, reduce_scatter), "
                           "STAGED copies through pinned host memory and runs the CPU collective; AUTO takes IPC "
                           "from 32 KiB. Groups spanning hosts and the other operations always stage. Read when a "
                           "group is created.",
                .default_text = "AUTO", .choices = "AUTO, STAGED, IPC"},

    // The nccl backend (NCCL reads its own NCCL_* variables; tdist passes them through untouched).
    SettingInfo{.name = "TDIST_NCCL_LIBRARY", .type = SettingType::Path, .group = "backends",
                .meaning = "The NCCL library the nccl backend loads, and the only one it tries; unset: libnccl.so.2 "
                           "through the loader's search path, else /usr/local/cuda/lib/libnccl.so.2."},
    SettingInfo{.name = "TDIST_NCCL_BLOCKING_WAIT", .type = SettingType::Bool, .group = "backends",
                .meaning = "1: Work.wait() of an nccl operation also blocks the calling thread until the operation "
                           "is done on the device, and fails at its timeout; 0: it only orders the caller's current "
                           "stream after it (the watchdog still fails operations at their timeout).",
                .default_number = 0, .torch_name = "TORCH_NCCL_BLOCKING_WAIT"},

    SettingInfo{.name = "TDIST_ASYNC_DEFER_BYTES", .type = SettingType::Bytes, .group = "backends",
                .meaning = "An async collective on CPU tensors of at most this size does not wake its group's "
                           "progress thread: waiting for it runs it on the waiting thread, and the progress thread "
                           "starts it within TDIST_ASYNC_DEFER_US if nothing else does first (polling it, a "
                           "blocking call, a larger async call). 0: every async collective wakes the thread.",
                .default_number = 256 * kKiB, .min = 0},
    SettingInfo{.name = "TDIST_ASYNC_DEFER_US", .type = SettingType::Micros, .group = "backends",
                .meaning = "The longest an async collective deferred by TDIST_ASYNC_DEFER_BYTES waits before the "
                           "group's progress thread starts it; the thread then looks at its queue this often, for "
                           "20 such periods after the last deferred call. 0: nothing is deferred.",
                .default_number = 500, .min = 0, .max = 60000000},

    // Collectives.
    SettingInfo{.name = "TDIST_SHM_SLOT_BYTES", .type = SettingType::Bytes, .group = "engines",
                .meaning = "Each rank's slot in a group's shared-memory segment; larger data goes in chunks.",
                .default_number = 512 * kKiB, .min = 1},
    SettingInfo{.name = "TDIST_SHM_SPIN_US", .type = SettingType::Micros, .group = "engines",
                .meaning = "How long a rank polls for the others in a shared-memory round before it sleeps.",
                .default_number = 50, .min = 0},
    SettingInfo{.name = "TDIST_SHM_ONE_ROUND_BYTES", .type = SettingType::Bytes, .group = "engines",
                .meaning = "Up to this size a shared-memory reduction folds everything in one round.",
                .default_number = 8 * kKiB, .min = 0},
    SettingInfo{.name = "TDIST_SHM_TWO_RANK_ALL_REDUCE", .type = SettingType::Choice, .group = "engines",
                .meaning = "How a shared-memory all_reduce larger than a slot (TDIST_SHM_SLOT_BYTES) runs on 2 ranks "
                           "with a core each: IN_PLACE, each rank folds what the other streamed to memory into its "
                           "own tensor (fast where the two cores share no cache); SHARES, each folds half and "
                           "copies the other half (fast where they share one); AUTO times both on rank 0 and runs "
                           "the faster per size, trying the other now and then. Rank 0's setting decides for the "
                           "group.",
                .default_text = "AUTO", .choices = "AUTO, SHARES, IN_PLACE"},
    SettingInfo{.name = "TDIST_SHM_LARGE_BLOCKS", .type = SettingType::Choice, .group = "engines",
                .meaning = "How shared-memory all_gathers and all_to_alls move blocks of a slot and more "
                           "(TDIST_SHM_SLOT_BYTES) when every rank has a core: ONE_COPY, each rank reads "
                           "them from their owners' memory (fast where the ranks' cores share no cache); SEGMENT, "
                           "through the segment (fast where they share one); AUTO times both on rank 0 and runs "
                           "the faster per size, trying the other now and then. Rank 0's setting decides for the "
                           "group.",
                .default_text = "AUTO", .choices = "AUTO, ONE_COPY, SEGMENT"},
    SettingInfo{.name = "TDIST_SHM_SINGLE_COPY_BYTES", .type = SettingType::Bytes, .group = "engines",
                .meaning = "Shared-memory all-gathers whose blocks average at least this size, and all-to-alls "
                           "for their blocks of at least this size (with more ranks than cores: for what follows a "
                           "block's first piece when some block spans more than two pieces and that rest is at "
                           "least this size), read them straight from their owners' memory (process_vm_readv): one "
                           "copy instead of two. 0: never. A group uses the smallest of its ranks' values; where "
                           "the kernel refuses the reads, it finds out at its first such call and copies through "
                           "its segment from then on.",
                .default_number = 32 * kKiB, .min = 0},
    SettingInfo{.name = "TDIST_SHM_SINGLE_COPY_MAX_BYTES", .type = SettingType::Bytes, .group = "engines",
                .meaning = "With more ranks on the machine than cores, one copy (TDIST_SHM_SINGLE_COPY_BYTES) only "
                           "below this size (the same block or rest); larger ones go through the segment, where two "
                           "copies that stay in the caches beat the kernel's one on the machine measured "
                           "(docs/tuning_log.md: One copy). With a core for each rank there is no limit. 0: no "
                           "limit. A group uses the smallest of its ranks' limits.",
                .default_number = 256 * kKiB, .min = 0},
    SettingInfo{.name = "TDIST_TEST_SHM_SINGLE_COPY_FAIL", .type = SettingType::Bool, .group = "engines",
                .meaning = "For tests only: this rank's reads of another rank's memory fail as if the kernel "
                           "refused them (the group then copies through its segment, and messages to and from the "
                           "ranks of its host go through the rings).",
                .default_number = 0},
    SettingInfo{.name = "TDIST_TEST_SHM_CREATE_PAUSE_MS", .type = SettingType::Millis, .group = "engines",
                .meaning = "For tests and bench/shm_leftovers.py only: the rank that creates a group's shared-memory "
                           "segment waits this long after creating it, before it tells the others its name (the "
                           "window in which a creator killed with SIGKILL leaves the name in /dev/shm).",
                .default_number = 0, .min = 0, .max = 600000},
    SettingInfo{.name = "TDIST_BULK_COPY_BYTES", .type = SettingType::Bytes, .group = "engines",
                .meaning = "Copies from this size on use streaming stores; 0 or less: never.",
                .note = "a quarter of the last-level cache, at least 1 MiB"},
    SettingInfo{.name = "TDIST_HOME_CPU", .type = SettingType::Bool, .group = "engines",
                .meaning = "Keeps each rank's waits on a home CPU chosen from LOCAL_RANK (under mpirun, the MPI "
                           "launcher's local rank); 0: leave placement to the kernel.",
                .default_number = 1},
    SettingInfo{.name = "TDIST_HIERARCHICAL", .type = SettingType::Bool, .group = "engines",
                .meaning = "0: a group that spans hosts runs its collectives over the transport alone, flat, "
                           "instead of in steps inside each host and among hosts.",
                .default_number = 1},
    SettingInfo{.name = "TDIST_ALGO_SEGMENT_BYTES", .type = SettingType::Bytes, .group = "engines",
                .meaning = "Segment size of the pipelined algorithms (ring, chain).",
                .note = "per algorithm, 256 KiB to 4 MiB", .min = 1},
    SettingInfo{.name = "TDIST_ALGO_BROADCAST", .type = SettingType::Text, .group = "engines",
                .meaning = "Forces broadcast's algorithm by name, or `shm` for the shared-memory engine.",
                .note = "the selector's choice"},
    SettingInfo{.name = "TDIST_ALGO_ALL_REDUCE", .type = SettingType::Text, .group = "engines",
                .meaning = "The same for all_reduce."},
    SettingInfo{.name = "TDIST_ALGO_BARRIER", .type = SettingType::Text, .group = "engines",
                .meaning = "The same for barrier."},
    SettingInfo{.name = "TDIST_ALGO_REDUCE", .type = SettingType::Text, .group = "engines",
                .meaning = "The same for reduce."},
    SettingInfo{.name = "TDIST_ALGO_ALL_GATHER", .type = SettingType::Text, .group = "engines",
                .meaning = "The same for all_gather."},
    SettingInfo{.name = "TDIST_ALGO_GATHER", .type = SettingType::Text, .group = "engines",
                .meaning = "The same for gather."},
    SettingInfo{.name = "TDIST_ALGO_SCATTER", .type = SettingType::Text, .group = "engines",
                .meaning = "The same for scatter."},
    SettingInfo{.name = "TDIST_ALGO_REDUCE_SCATTER", .type = SettingType::Text, .group = "engines",
                .meaning = "The same for reduce_scatter."},
    SettingInfo{.name = "TDIST_ALGO_ALL_TO_ALL", .type = SettingType::Text, .group = "engines",
                .meaning = "The same for all_to_all."},

    // The tools (tdistrun, the Python module's launcher).
    SettingInfo{.name = "TDIST_RUN_PREFIX", .type = SettingType::Bool, .group = "tools",
                .meaning = "0: tdistrun passes the workers' output through without the `[rank3]: ` in front of each "
                           "line, as --no-prefix does.",
                .default_number = 1},
    SettingInfo{.name = "TDIST_ON_FAILURE", .type = SettingType::Choice, .group = "tools",
                .meaning = "What tdistrun does when a worker exits non-zero or is killed, as --on-failure: restart "
                           "stops every worker and starts a new round (up to --max-restarts; torchrun's); shrink "
                           "lets the others run on, writing `exited/<rank>` in their store; shrink-and-replace "
                           "also starts a replacement (TDIST_JOIN_RUNNING_JOB=1) that joins them when they call "
                           "admit_new_ranks, up to --max-restarts replacements.",
                .default_text = "restart", .choices = "restart, shrink, shrink-and-replace"},
    SettingInfo{.name = "TDIST_RUN_BINARY", .type = SettingType::Path, .group = "tools",
                .meaning = "The tdistrun program that `python -m tdist.run` starts, before this build's, the "
                           "installed one and PATH's."},
    // torchrun's variables that tdistrun reads as torchrun does (besides PET_<OPTION>, the environment form of
    // each of its options: docs/launcher.md).
    SettingInfo{.name = "PYTHON_EXEC", .type = SettingType::Path, .group = "tools",
                .meaning = "The Python interpreter that tdistrun (as torchrun) runs a Python PROGRAM with.",
                .note = "the Python tdist was built for, else python3 next to tdistrun, else PATH's"},
    SettingInfo{.name = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", .type = SettingType::Seconds, .group = "tools",
                .meaning = "Seconds tdistrun waits after passing a signal to its workers before it sends SIGKILL, "
                           "where neither --kill-timeout nor --shutdown-timeout is given.",
                .note = "5 s (torchrun's: 30 s)", .min = 0, .max = 1000000},
    SettingInfo{.name = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", .type = SettingType::Text, .group = "tools",
                .meaning = "The prefix of each worker line on tdistrun's console, where --log-line-prefix-template "
                           "is not given (torchrun's macros: `${role_name}`, `${rank}`, `${local_rank}`, "
                           "`${hostname}`).",
                .note = "`[rank${rank}]: `"},
    SettingInfo{.name = "SLURM_NODEID", .type = SettingType::Int, .group = "tools",
                .meaning = "In a Slurm job, tdistrun's node rank where --node-rank, --rdzv-backend and "
                           "--rdzv-endpoint are not given."},
    SettingInfo{.name = "SLURM_JOB_NUM_NODES", .type = SettingType::Int, .group = "tools",
                .meaning = "In a Slurm job, tdistrun's node count where --nnodes is not given (SLURM_NNODES where "
                           "it is unset)."},
    SettingInfo{.name = "SLURM_NNODES", .type = SettingType::Int, .group = "tools",
                .meaning = "Slurm's older name of SLURM_JOB_NUM_NODES."},
    SettingInfo{.name = "CUDA_VISIBLE_DEVICES", .type = SettingType::Text, .group = "tools",
                .meaning = "With --virtual-local-rank, tdistrun gives each worker the entry of its local rank as its "
                           "own CUDA_VISIBLE_DEVICES (as torchrun)."},
    SettingInfo{.name = "HIP_VISIBLE_DEVICES", .type = SettingType::Text, .group = "tools",
                .meaning = "Read before CUDA_VISIBLE_DEVICES where set, for --virtual-local-rank; each worker then "
                           "gets both set to its entry (as torchrun)."},
};

}  // namespace tdist
