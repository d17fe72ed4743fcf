#include "util/settings.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <climits>
#include <utility>
#include <vector>

#include "tdist/errors.h"

namespace tdist {

namespace {

// Keep each group together; the order is the order of the documentation.
constexpr std::array kSettings{
    // Set by torchrun, tdistrun or mpirun; read by init_process_group and for placement.
    SettingInfo{"MASTER_ADDR", "text", "unset", nullptr,
                "Host of rank 0's store for `env://`; the mesh's listeners also bind the interface that reaches it.",
                "launch"},
    SettingInfo{"MASTER_PORT", "int", "unset", nullptr, "Port of rank 0's store for `env://`.", "launch"},
    SettingInfo{"RANK", "int", "unset", nullptr, "This process's rank for `env://`.", "launch"},
    SettingInfo{"WORLD_SIZE", "int", "unset", nullptr, "The number of ranks for `env://`.", "launch"},
    SettingInfo{"LOCAL_RANK", "int", "unset", nullptr, "This process's rank on its host: picks its home CPU.",
                "launch"},
    SettingInfo{"LOCAL_WORLD_SIZE", "int", "unset", nullptr,
                "Ranks on this host: more ranks than cores make waiting threads yield sooner.", "launch"},
    SettingInfo{"TORCHELASTIC_RUN_ID", "text", "unset", nullptr, "Set by torchrun: `is_torchelastic_launched()`.",
                "launch"},
    SettingInfo{"TORCHELASTIC_USE_AGENT_STORE", "bool", "unset", nullptr,
                "Set by tdistrun and torchrun: `env://` connects to the launcher's store at "
                "MASTER_ADDR:MASTER_PORT (every rank a client) instead of rank 0 hosting one; torchrun's "
                "(no TDIST_AGENT_STORE_PREFIX) through torch's own client, from Python only.",
                "launch"},
    SettingInfo{"TDIST_AGENT_STORE_PREFIX", "text", "unset", nullptr,
                "Set by tdistrun: the key prefix of this round's workers in its store; it also says that the "
                "store is tdistrun's (tdist's protocol), not torchrun's.",
                "launch"},
    SettingInfo{"TDIST_LAUNCHED", "bool", "unset", nullptr,
                "Set by tdistrun in every worker: the process was started by tdist's launcher (spawn clears "
                "it in its children, which meet among themselves).",
                "launch"},
    SettingInfo{"TORCHELASTIC_RESTART_COUNT", "int", "0", nullptr,
                "Set by tdistrun and torchrun: how many times the workers were restarted.", "launch"},
    SettingInfo{"TORCHELASTIC_ERROR_FILE", "text", "unset", nullptr,
                "Set by tdistrun and torchrun: where an uncaught error is written (torch's JSON), for the "
                "launcher's failure summary.",
                "launch"},
    SettingInfo{"OMPI_COMM_WORLD_RANK", "int", "unset", nullptr, "Rank under Open MPI's mpirun, where RANK is unset.",
                "launch"},
    SettingInfo{"OMPI_COMM_WORLD_SIZE", "int", "unset", nullptr,
                "World size under Open MPI's mpirun, where WORLD_SIZE is unset.", "launch"},
    SettingInfo{"PMI_RANK", "int", "unset", nullptr, "Rank under MPICH/Hydra (PMI), where RANK is unset.", "launch"},
    SettingInfo{"PMI_SIZE", "int", "unset", nullptr, "World size under MPICH/Hydra (PMI), where WORLD_SIZE is unset.",
                "launch"},
    SettingInfo{"PMIX_RANK", "int", "unset", nullptr,
                "Set by PMIx launchers (Open MPI 4+, Slurm's pmix): with OMPI_COMM_WORLD_SIZE, PMI_SIZE and "
                "MPI_LOCALNRANKS, tells that an MPI launcher started the process (docs/mpi.md).",
                "launch"},
    SettingInfo{"MPI_LOCALNRANKS", "int", "unset", nullptr,
                "Set by MPICH's Hydra: an MPI launcher started the process (see PMIX_RANK).", "launch"},
    SettingInfo{"SLURM_PROCID", "int", "unset", nullptr, "Rank in a Slurm job step, where RANK and MPI's are unset.",
                "launch"},
    SettingInfo{"SLURM_NTASKS", "int", "unset", nullptr,
                "World size in a Slurm job step, where WORLD_SIZE and MPI's are unset.", "launch"},
    SettingInfo{"SLURM_JOB_NODELIST", "text", "unset", nullptr,
                "The Slurm job's hosts (e.g. node[01-04,07]): the first is rank 0's host where MASTER_ADDR is "
                "unset.",
                "launch"},
    SettingInfo{"SLURM_NODELIST", "text", "unset", nullptr, "Older name of SLURM_JOB_NODELIST, read where it is unset.",
                "launch"},
    SettingInfo{"SLURM_JOB_ID", "int", "unset", nullptr,
                "The Slurm job's id: where MASTER_PORT is unset, rank 0's store listens on 20000 + SLURM_JOB_ID mod "
                "20000.",
                "launch"},

    // Security.
    SettingInfo{"TDIST_JOB_TOKEN", "text", "unset (open, with a warning)", nullptr,
                "The job's secret: the store refuses clients without it and ranks prove it to each other (HMAC). "
                "tdistrun and spawn set a fresh one per job.",
                "util"},
    SettingInfo{"TDIST_JOB_TOKEN_FILE", "path", "unset", nullptr,
                "A file readable by its owner only that holds the job token, where TDIST_JOB_TOKEN is unset.", "util"},
    SettingInfo{"TDIST_BIND_ALL", "bool", "0", nullptr,
                "1: listeners bind every interface instead of the job's (MASTER_ADDR's, TDIST_SOCKET_IFNAME's, "
                "loopback for a local job).",
                "util"},

    // Logging and checks.
    SettingInfo{"TDIST_DEBUG", "OFF, INFO, DETAIL", "OFF", "TORCH_DISTRIBUTED_DEBUG",
                "INFO logs more; DETAIL also makes every rank check, before each collective, that all called it "
                "with the same arguments.",
                "util"},
    SettingInfo{"TDIST_LOG_LEVEL", "ERROR, WARN, INFO, DEBUG", "WARN", "TORCH_CPP_LOG_LEVEL",
                "The least severe log lines written to stderr (torch's WARNING and FATAL, and its 0 to 3 for INFO "
                "to FATAL, are accepted too).",
                "util", "WARNING=WARN,FATAL=ERROR,DETAIL=DEBUG,0=INFO,1=WARN,2=ERROR,3=ERROR"},
    SettingInfo{"TDIST_FLIGHT_RECORDER_ENTRIES", "int", "2000", "TORCH_FR_BUFFER_SIZE",
                "Operations each group's flight recorder keeps (0 turns it off, but TDIST_TRACE keeps 64 for its timeline; at most 2^20).", "trace"},
    SettingInfo{"TDIST_FLIGHT_RECORDER_DIR", "path", "unset", nullptr,
                "Folder of the flight recorder dumps (tdist_fr_<rank>.json), written when an operation fails "
                "or times out, when SIGTERM stops the rank, on SIGUSR1 and by dump_flight_recorder(); made "
                "(0700) at init if missing. "
                "Unset: no dumps on failure, and SIGUSR1 dumps to TMPDIR/tdist-flight-recorder-<uid>.",
                "trace"},
    SettingInfo{"TORCH_FR_DUMP_TEMP_FILE", "path prefix", "unset", nullptr,
                "torch's name: dumps go to <prefix><rank>.json instead (it wins over TDIST_FLIGHT_RECORDER_DIR).",
                "trace"},
    SettingInfo{"TDIST_TRACE", "path", "unset", nullptr,
                "Folder where each rank writes its timeline, tdist_trace_<rank>.jsonl, one line per finished "
                "operation (merge with tdist-trace --timeline); made (0700) at init if missing.",
                "trace"},
    SettingInfo{"TMPDIR", "path", "/tmp", nullptr,
                "The system's folder for temporary files: a SIGUSR1 dump without TDIST_FLIGHT_RECORDER_DIR goes "
                "to its tdist-flight-recorder-<uid> (made 0700).",
                "trace"},

    // Store (rank 0's TCPStore server).
    SettingInfo{"TDIST_STORE_MAX_BYTES", "bytes", "2 GiB", nullptr,
                "Keys and values the store holds; a request past it gets an error, the server lives on.", "store"},
    SettingInfo{"TDIST_STORE_MAX_ANSWER_BYTES", "bytes", "1 GiB", nullptr,
                "The largest answer to one get or multi_get.", "store"},
    SettingInfo{"TDIST_STORE_MAX_BUFFERED_BYTES", "bytes", "2 GiB", nullptr,
                "Answers written but not yet read by their clients, all together.", "store"},
    SettingInfo{"TDIST_STORE_MAX_CONNECTIONS", "int", "4096", nullptr,
                "Open connections (never more than half the descriptor limit); the oldest unauthenticated one "
                "goes first.",
                "store"},
    SettingInfo{"TDIST_STORE_HANDSHAKE_MS", "ms", "5000", nullptr,
                "Time a new connection has to say hello and authenticate.", "store"},
    SettingInfo{"TDIST_STORE_IDLE_TIMEOUT_S", "s", "0 (never)", nullptr,
                "Closes an authenticated connection with nothing pending after this long.", "store", nullptr, 0},

    // Groups.
    SettingInfo{"TDIST_TIMEOUT", "seconds", "1800 (30 minutes, torch's)", nullptr,
                "The default timeout of init_process_group and of new groups (new_group, new_subgroups, "
                "split_group): how long an operation waits for its peers before it fails. A timeout passed "
                "to the call wins over it. A positive number of seconds (fractions allowed).",
                "process_group"},

    // Transport.
    SettingInfo{"TDIST_SOCKET_IFNAME", "list", "unset (every interface that is up)", "GLOO_SOCKET_IFNAME",
                "Interfaces (comma-separated) whose addresses the mesh announces and binds. With several, "
                "each rank listens on each, and every pair's connections (at least one per interface) are spread "
                "over them round-robin; every rank must list as many.",
                "transport"},
    SettingInfo{"TDIST_SOCKETS_PER_PEER", "int", "1", nullptr,
                "Connections per pair of ranks over TCP (1 to 16); a large message streams over all of them.",
                "transport"},
    SettingInfo{"TDIST_TCP_RENDEZVOUS_BYTES", "bytes", "512 KiB", nullptr,
                "Socket messages larger than this wait for their receive (rendezvous); 0: every message does.",
                "transport", nullptr, 0},
    SettingInfo{"TDIST_SPIN_US", "µs", "250", nullptr,
                "How long a waiting thread polls the sockets and rings before it blocks.", "transport", nullptr, 0},
    SettingInfo{"TDIST_SHM", "bool", "1", nullptr,
                "0: no shared memory between ranks of a host (no rings, no shared-memory collectives).",
                "transport"},
    SettingInfo{"TDIST_TRANSPORTS", "list", "shm,tcp", nullptr,
                "The ways to reach a peer, in order of preference: each peer's messages go over the first "
                "that reaches it (shm: shared-memory rings, peers on this host only; tcp: the socket, any "
                "peer). A peer that none reaches fails the set-up, naming it.",
                "transport"},
    SettingInfo{"TDIST_HOST_ID", "text", "unset", nullptr,
                "This process's host as the ranks see it (NCCL_HOSTID's role): ranks with one id count as one "
                "host; unset: hostname, boot id and network namespace. For tests that emulate hosts on one "
                "machine.",
                "transport"},
    SettingInfo{"TDIST_TCP_SLICE_BYTES", "bytes", "512 KiB to peers on other hosts, else 0", nullptr,
                "The largest frame of a large message's data on a peer's socket (0: one frame), so that the "
                "peer's own announcements pass between frames and both directions stream at once. Set, it "
                "applies to every socket (on loopback frames cost 1.5-2.5x from 1 MiB).",
                "transport", nullptr, 0},
    SettingInfo{"TDIST_TCP_NOTSENT_LOWAT", "bytes", "128 KiB to peers on other hosts, else 0", nullptr,
                "TCP_NOTSENT_LOWAT of the sockets that carry data (0: the kernel's): how much may wait "
                "unsent in the kernel ahead of an announcement. Set, it applies to every socket.",
                "transport", nullptr, 0},
    SettingInfo{"TDIST_SHM_RING_BYTES", "bytes", "512 KiB", nullptr,
                "Each direction's ring between two ranks of a host (4 KiB to 1 GiB).", "transport"},
    SettingInfo{"TDIST_SHARE_CONNECTIONS", "bool", "1", nullptr,
                "1: every group talks over the default group's connections and threads (a failure in one "
                "group then fails them all); 0: each group connects anew and fails alone.",
                "transport"},

    // Devices.
    SettingInfo{"TDIST_EMULATE_CUDA", "int", "0", nullptr,
                "N > 0: N CUDA devices emulated in host memory replace the CUDA runtime (streams run each "
                "step at once, IPC handles are memfds). For testing the data paths of CUDA tensors on "
                "machines without a GPU; never for real work.",
                "device", nullptr, 0},
    SettingInfo{"TDIST_CUDA_PATH", "AUTO, STAGED, IPC", "AUTO", nullptr,
                "How the tdist backend moves CUDA tensors among ranks of one host: IPC maps the ranks' device "
                "buffers into each other (all_reduce, broadcast, all_gather, reduce_scatter), STAGED copies "
                "through pinned host memory and runs the CPU collective; AUTO takes IPC from 32 KiB. Groups "
                "spanning hosts and the other operations always stage. Read when a group is created.",
                "backends"},

    // The nccl backend (NCCL reads its own NCCL_* variables; tdist passes them through untouched).
    SettingInfo{"TDIST_NCCL_LIBRARY", "path", "unset", nullptr,
                "The NCCL library the nccl backend loads, and the only one it tries; unset: libnccl.so.2 "
                "through the loader's search path, else /usr/local/cuda/lib/libnccl.so.2.",
                "backends"},
    SettingInfo{"TDIST_NCCL_BLOCKING_WAIT", "bool", "0", "TORCH_NCCL_BLOCKING_WAIT",
                "1: Work.wait() of an nccl operation also blocks the calling thread until the operation is "
                "done on the device, and fails at its timeout; 0: it only orders the caller's current "
                "stream after it (the watchdog still fails operations at their timeout).",
                "backends"},

    // Collectives.
    SettingInfo{"TDIST_SHM_SLOT_BYTES", "bytes", "256 KiB", nullptr,
                "Each rank's slot in a group's shared-memory segment; larger data goes in chunks.",
                "engines", nullptr, 1},
    SettingInfo{"TDIST_SHM_SPIN_US", "µs", "50", nullptr,
                "How long a rank polls for the others in a shared-memory round before it sleeps.",
                "engines", nullptr, 0},
    SettingInfo{"TDIST_SHM_ONE_ROUND_BYTES", "bytes", "8 KiB", nullptr,
                "Up to this size a shared-memory reduction folds everything in one round.", "engines", nullptr, 0},
    SettingInfo{"TDIST_BULK_COPY_BYTES", "bytes", "a quarter of the last-level cache (at least 1 MiB)", nullptr,
                "Copies from this size on use streaming stores; 0 or less: never.", "engines"},
    SettingInfo{"TDIST_HOME_CPU", "bool", "1", nullptr,
                "Keeps each rank's waits on a home CPU chosen from LOCAL_RANK; 0: leave placement to the kernel.",
                "engines"},
    SettingInfo{"TDIST_HIERARCHICAL", "bool", "1", nullptr,
                "0: a group that spans hosts runs its collectives over the transport alone, flat, instead "
                "of in steps inside each host and among hosts.",
                "engines"},
    SettingInfo{"TDIST_ALGO_SEGMENT_BYTES", "bytes", "per algorithm (256 KiB to 4 MiB)", nullptr,
                "Segment size of the pipelined algorithms (ring, chain).", "engines", nullptr, 1},
    SettingInfo{"TDIST_ALGO_BROADCAST", "text", "unset (the selector's choice)", nullptr,
                "Forces broadcast's algorithm by name, or `shm` for the shared-memory engine.", "engines"},
    SettingInfo{"TDIST_ALGO_ALL_REDUCE", "text", "unset", nullptr, "The same for all_reduce.", "engines"},
    SettingInfo{"TDIST_ALGO_BARRIER", "text", "unset", nullptr, "The same for barrier.", "engines"},
    SettingInfo{"TDIST_ALGO_REDUCE", "text", "unset", nullptr, "The same for reduce.", "engines"},
    SettingInfo{"TDIST_ALGO_ALL_GATHER", "text", "unset", nullptr, "The same for all_gather.", "engines"},
    SettingInfo{"TDIST_ALGO_GATHER", "text", "unset", nullptr, "The same for gather.", "engines"},
    SettingInfo{"TDIST_ALGO_SCATTER", "text", "unset", nullptr, "The same for scatter.", "engines"},
    SettingInfo{"TDIST_ALGO_REDUCE_SCATTER", "text", "unset", nullptr, "The same for reduce_scatter.", "engines"},
    SettingInfo{"TDIST_ALGO_ALL_TO_ALL", "text", "unset", nullptr, "The same for all_to_all.", "engines"},
};

}  // namespace

std::span<const SettingInfo> all_settings() { return kSettings; }

const SettingInfo* find_setting(std::string_view name) {
  for (const SettingInfo& s : kSettings)
    if (name == s.name) return &s;
  return nullptr;
}

std::string settings_markdown() {
  std::string out, group;
  for (const SettingInfo& s : kSettings) {
    if (s.group != group) {
      group = s.group;
      out += (out.empty() ? "" : "\n") + std::string("### ") +
             (group == "launch" ? std::string("Set by the launcher") : "Read by `" + group + "`") + "\n\n";
      out += "| Variable | Type | Default | torch's name | Meaning |\n|---|---|---|---|---|\n";
    }
    out += "| `" + std::string(s.name) + "` | " + s.type + " | " + s.default_value + " | " +
           (s.torch_name ? "`" + std::string(s.torch_name) + "`" : std::string("")) + " | " + s.meaning + " |\n";
  }
  return out;
}

namespace {

enum class Kind { Bool, Number, Decimal, Free, Choice };

Kind kind_of(std::string_view type) {
  if (type == "bool") return Kind::Bool;
  if (type == "int" || type == "bytes" || type == "µs" || type == "ms" || type == "s") return Kind::Number;
  if (type == "seconds") return Kind::Decimal;  // fractions allowed: "0.5"
  if (type == "text" || type == "path" || type == "path prefix" || type == "list") return Kind::Free;
  return Kind::Choice;  // "OFF, INFO, DETAIL"
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// "A, B, C" or "A=B,C=D" as its parts.
std::vector<std::string> split(std::string_view list, char sep) {
  std::vector<std::string> out;
  while (!list.empty()) {
    size_t end = list.find(sep);
    std::string_view part = list.substr(0, end);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    out.emplace_back(part);
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + 1);
  }
  return out;
}

std::string accepted(const SettingInfo& s, Kind kind) {
  switch (kind) {
    case Kind::Bool: return "1 or 0 (or true/false, yes/no, on/off)";
    case Kind::Number: {
      const std::string type = s.type;
      const char* unit = type == "bytes" ? " of bytes" : type == "µs" ? " of microseconds" : type == "ms" ?
                         " of milliseconds" : type == "s" ? " of seconds" : "";
      std::string out = std::string("a whole number") + unit;
      return s.min == LLONG_MIN ? out : out + ", at least " + std::to_string(s.min);
    }
    case Kind::Decimal: return "a positive number of seconds (fractions allowed, e.g. 60 or 0.5)";
    case Kind::Choice: {
      std::string out = std::string("one of ") + s.type;
      if (s.aliases) {
        const char* sep = " (or ";
        for (const std::string& a : split(s.aliases, ',')) out += std::exchange(sep, ", ") + a.substr(0, a.find('='));
        out += ")";
      }
      return out + ", in any case";
    }
    case Kind::Free: break;
  }
  return "any text";
}

}  // namespace

std::optional<std::string> parse_setting(const SettingInfo& setting, const char* read_as, const std::string& value) {
  const Kind kind = kind_of(setting.type);
  if (kind == Kind::Free) return value;
  if (value.empty() && kind != Kind::Number && kind != Kind::Decimal) return std::nullopt;
  const std::string v = upper(value);
  if (kind == Kind::Bool) {
    if (v == "1" || v == "TRUE" || v == "YES" || v == "ON") return "1";
    if (v == "0" || v == "FALSE" || v == "NO" || v == "OFF") return "0";
  } else if (kind == Kind::Number) {
    long long n = 0;
    const char* first = value.data() + (value.size() > 1 && value[0] == '+' ? 1 : 0);
    const char* last = value.data() + value.size();
    auto [end, ec] = std::from_chars(first, last, n);
    if (!value.empty() && ec == std::errc() && end == last && n >= setting.min) return value;
  } else if (kind == Kind::Decimal) {
    char* end = nullptr;
    errno = 0;
    // strtod would skip leading blanks, which no other number here takes.
    const bool blank = value.empty() || std::isspace(static_cast<unsigned char>(value[0]));
    const double d = blank ? 0 : std::strtod(value.c_str(), &end);
    if (!blank && errno == 0 && end == value.c_str() + value.size() && std::isfinite(d) && d > 0)
      return value;
  } else {
    for (const std::string& choice : split(setting.type, ','))
      if (v == choice) return choice;
    if (setting.aliases)
      for (const std::string& alias : split(setting.aliases, ','))
        if (v == alias.substr(0, alias.find('='))) return alias.substr(alias.find('=') + 1);
  }
  const std::string name = read_as;
  const std::string why = name == setting.name ? "" : " (read because " + std::string(setting.name) + " is unset)";
  throw DistValueError("environment variable " + name + "='" + value + "'" + why + " is not valid: expected " +
                       accepted(setting, kind) + ". Fix or unset it (docs/configuration.md lists every setting)");
}

}  // namespace tdist
