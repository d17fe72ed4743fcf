#include "init/rendezvous.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "tdist/errors.h"
#include "backends/mpi_launch.h"
#include "init/slurm.h"
#include "backends/backend_registry.h"
#include "process_group/backend_spec.h"
#include "transport/tcp/tcp_addresses.h"
#include "util/deadline.h"
#include "util/settings.h"
#include "util/job_token.h"

namespace tdist {

namespace {

struct Url {
  std::string scheme, rest;
  std::map<std::string, std::string> query;
};

Url parse_url(const std::string& text) {
  Url u;
  auto sep = text.find("://");
  if (sep == std::string::npos)
    throw DistValueError("init_method '" + text + "' is not a URL (env://, tcp://host:port, file:///path)");
  u.scheme = text.substr(0, sep);
  std::string rest = text.substr(sep + 3);
  auto q = rest.find('?');
  if (q != std::string::npos) {
    std::string query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    size_t pos = 0;
    while (pos <= query.size()) {
      auto amp = query.find('&', pos);
      std::string item = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
      auto eq = item.find('=');
      if (!item.empty()) u.query[item.substr(0, eq)] = eq == std::string::npos ? "" : item.substr(eq + 1);
      if (amp == std::string::npos) break;
      pos = amp + 1;
    }
  }
  u.rest = rest;
  return u;
}

int parse_int(const std::string& text, const std::string& what) {
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw DistValueError(what + " '" + text + "' is not an integer");
  return v;
}

// A launcher's variable and its value (util/settings.h read it).
struct EnvValue {
  const char* name;
  std::optional<long long> value;
};

// rank/world_size: the argument, else the URL query, else the environment.
int pick(int given, const Url& url, const char* key, std::initializer_list<EnvValue> env, bool use_env,
         const std::string& method) {
  if (given >= 0) return given;
  auto it = url.query.find(key);
  if (it != url.query.end()) return parse_int(it->second, std::string(key) + " in " + method);
  if (use_env) {
    for (const EnvValue& e : env)
      if (e.value) return static_cast<int>(*e.value);
    std::string names;
    for (const EnvValue& e : env) names += (names.empty() ? "" : ", ") + std::string(e.name);
    throw DistValueError(std::string("init_process_group(env://): ") + key + " is not given and none of the " +
                         "environment variables " + names + " is set");
  }
  throw DistValueError("init_process_group(" + method + "): " + key + " must be given (argument or ?" + key + "=)");
}

template <typename T>
T required_env(std::optional<T> v, const char* name) {
  if (!v)
    throw DistValueError(std::string("init_process_group(env://): environment variable ") + name + " is not set");
  return *v;
}

uint16_t parse_port(const std::string& text, const std::string& what) {
  int p = parse_int(text, what);
  if (p < 0 || p > 65535) throw DistValueError(what + " " + text + " is not a TCP port");
  return static_cast<uint16_t>(p);
}

std::shared_ptr<Store> tcp_store(const std::string& host, uint16_t port, int rank, int world, Millis timeout) {
  TCPStoreOptions o;
  o.world_size = world;
  o.is_master = rank == 0;
  o.timeout = timeout;
  o.wait_for_workers = false;  // join_all_ranks waits, and names who is missing
  return std::make_shared<TCPStore>(host, port, o);
}

// tdistrun and torchrun host the store in the launcher and say so with
// TORCHELASTIC_USE_AGENT_STORE=True (Python's spelling of true).
bool launcher_hosts_store() {
  return settings::get<"TORCHELASTIC_USE_AGENT_STORE">().value_or(false);
}

// Every rank is a client of the launcher's store: tdistrun's (tdist's
// protocol) under this round's prefix (TDIST_AGENT_STORE_PREFIX), or, without
// that prefix, torchrun's agent store, in torch's protocol, under
// "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>" (each restart its own keys).
std::shared_ptr<Store> launcher_store(const std::string& host, uint16_t port, Millis timeout) {
  std::string prefix = settings::get<"TDIST_AGENT_STORE_PREFIX">().value_or("");
  TCPStoreOptions o;
  o.is_master = false;
  o.timeout = timeout;
  o.wait_for_workers = false;
  if (prefix.empty()) {
    o.protocol = StoreProtocol::kTorch;
    prefix = "/worker/attempt_" + std::to_string(settings::get<"TORCHELASTIC_RESTART_COUNT">());
  }
  return std::make_shared<PrefixStore>(prefix, std::make_shared<TCPStore>(host, port, o));
}

void validate(int rank, int world, const std::string& method) {
  if (world < 1) throw DistValueError("init_process_group(" + method + "): world_size must be >= 1, got " + std::to_string(world));
  if (rank < 0 || rank >= world)
    throw DistValueError("init_process_group(" + method + "): rank " + std::to_string(rank) + " is outside [0, " +
                         std::to_string(world) + ")");
}

// A rank or world size given (argument, URL or launcher variable) must be MPI's.
void check_against_mpi(int given, int mpi, const char* what, const std::string& source) {
  if (given >= 0 && given != mpi)
    throw DistValueError("init_process_group: " + source + " says " + what + " " + std::to_string(given) +
                         ", but MPI_COMM_WORLD says " + std::to_string(mpi) +
                         " (the mpi backend's ranks are MPI's: leave " + what + " out, or give MPI's)");
}

// Every backend of the spec takes its world from MPI (the mpi backend): no store.
Rendezvous mpi_only(const InitOptions& options, const Url& url, const std::string& method) {
  MpiWorld w = mpi_world("init_process_group(" + options.backend + ")");
  check_against_mpi(options.rank, w.rank, "rank", "the rank argument");
  check_against_mpi(options.world_size, w.size, "world_size", "the world_size argument");
  if (auto it = url.query.find("rank"); it != url.query.end())
    check_against_mpi(parse_int(it->second, "rank in " + method), w.rank, "rank", method);
  if (auto it = url.query.find("world_size"); it != url.query.end())
    check_against_mpi(parse_int(it->second, "world_size in " + method), w.size, "world_size", method);
  Rendezvous r;
  r.store = std::make_shared<HashStore>();
  r.local_store = true;
  r.rank = w.rank;
  r.world_size = w.size;
  r.where = "MPI_COMM_WORLD";
  r.mpi_hold = w.hold;
  return r;
}

// Started by mpirun or srun without MASTER_ADDR: rank 0 serves the store on
// its first address (TDIST_SOCKET_IFNAME's, else an interface that is up) at
// a port the kernel picks, and tells every rank through MPI; with no job
// token set, it makes one and sends it along (over MPI's own connections),
// so the job is closed to processes MPI did not start.
Rendezvous mpi_bootstrap(const InitOptions& options, const std::string& method) {
  MpiWorld w = mpi_world("init_process_group(" + method + ") under an MPI launcher");
  check_against_mpi(options.rank, w.rank, "rank", "the rank argument");
  check_against_mpi(options.world_size, w.size, "world_size", "the world_size argument");
  if (auto v = settings::get<"RANK">()) check_against_mpi(static_cast<int>(*v), w.rank, "rank", "the environment (RANK)");
  if (auto v = settings::get<"WORLD_SIZE">())
    check_against_mpi(static_cast<int>(*v), w.size, "world_size", "the environment (WORLD_SIZE)");
  Rendezvous r;
  r.rank = w.rank;
  r.world_size = w.size;
  r.mpi_hold = w.hold;
  std::string word;
  std::shared_ptr<TCPStore> server;
  if (w.rank == 0) {
    std::vector<std::vector<std::string>> per_interface;
    auto addresses = tcp_addresses::local_addresses(tcp_addresses::listed_interfaces(), per_interface);
    const std::string host = addresses.empty() ? std::string("127.0.0.1") : addresses.front();
    const bool make_token = !auth::job_token().has_value();
    const std::string token = make_token ? auth::generate_token() : std::string();
    if (make_token) setenv("TDIST_JOB_TOKEN", token.c_str(), 1);
    server = std::dynamic_pointer_cast<TCPStore>(tcp_store(host, 0, 0, w.size, options.timeout));
    word = host + "\n" + std::to_string(server->port()) + "\n" + token;
  }
  word = w.from_rank0(word);
  const auto first = word.find('\n'), second = word.find('\n', first + 1);
  if (first == std::string::npos || second == std::string::npos)
    throw DistBackendError("init_process_group: rank 0's store address did not arrive whole over MPI");
  const std::string host = word.substr(0, first);
  const uint16_t port = parse_port(word.substr(first + 1, second - first - 1), "rank 0's store port");
  const std::string token = word.substr(second + 1);
  if (!token.empty()) setenv("TDIST_JOB_TOKEN", token.c_str(), 1);
  r.store = server ? std::static_pointer_cast<Store>(server) : tcp_store(host, port, w.rank, w.size, options.timeout);
  r.where = "rank 0's store at " + host + ":" + std::to_string(port) + " (found through MPI)";
  return r;
}

}  // namespace

Rendezvous rendezvous(const InitOptions& options) {
  Rendezvous r;
  const bool mpi_only_spec = spec_takes_world_from_mpi(options.backend);
  if (options.store) {
    if (!options.init_method.empty())
      throw DistValueError("init_process_group: init_method and store are mutually exclusive");
    if (options.rank < 0 || options.world_size < 0)
      throw DistValueError("init_process_group: rank and world_size are required with an explicit store");
    validate(options.rank, options.world_size, "store");
    return Rendezvous{options.store, options.rank, options.world_size, "the given store", false, nullptr};
  }
  const std::string method = options.init_method.empty() ? "env://" : options.init_method;
  Url url = parse_url(method);
  if (mpi_only_spec && url.scheme == "env") return mpi_only(options, url, method);
  if (url.scheme == "env" && !settings::get<"MASTER_ADDR">() && started_by_mpi_launcher()) {
    if (built_with_mpi()) return mpi_bootstrap(options, method);
    throw DistValueError("init_process_group(env://): MASTER_ADDR is not set, and this build of tdist has no MPI to "
                         "find rank 0 through under mpirun: set MASTER_ADDR and MASTER_PORT (rank 0's host and a "
                         "free port) for every rank, or rebuild with an MPI library (libopenmpi-dev)");
  }
  if (url.scheme == "env") {
    r.rank = pick(options.rank, url, "rank",
                  {{"RANK", settings::get<"RANK">()}, {"OMPI_COMM_WORLD_RANK", settings::get<"OMPI_COMM_WORLD_RANK">()},
                   {"PMI_RANK", settings::get<"PMI_RANK">()}, {"SLURM_PROCID", settings::get<"SLURM_PROCID">()}},
                  true, method);
    r.world_size = pick(options.world_size, url, "world_size",
                        {{"WORLD_SIZE", settings::get<"WORLD_SIZE">()},
                         {"OMPI_COMM_WORLD_SIZE", settings::get<"OMPI_COMM_WORLD_SIZE">()},
                         {"PMI_SIZE", settings::get<"PMI_SIZE">()}, {"SLURM_NTASKS", settings::get<"SLURM_NTASKS">()}},
                        true, method);
    validate(r.rank, r.world_size, method);
    // In a Slurm job step, rank 0 is on the first host of the job's node
    // list, at a port every task derives from the job id.
    const auto slurm_host = settings::get<"MASTER_ADDR">() ? std::nullopt : slurm::master_host();
    const auto slurm_port = settings::get<"MASTER_PORT">() ? std::nullopt : slurm::master_port();
    std::string host = slurm_host ? *slurm_host : required_env(settings::get<"MASTER_ADDR">(), "MASTER_ADDR");
    // The registry keeps MASTER_PORT to 0 .. 65535.
    uint16_t port = static_cast<uint16_t>(
        slurm_port ? *slurm_port : required_env(settings::get<"MASTER_PORT">(), "MASTER_PORT"));
    const bool agent_store = launcher_hosts_store();
    r.where = "env:// (MASTER_ADDR=" + host + (slurm_host ? " from SLURM_JOB_NODELIST" : "") +
              ", MASTER_PORT=" + std::to_string(port) + (slurm_port ? " from SLURM_JOB_ID" : "") +
              (agent_store ? ", the launcher's store" : "") + ")";
    r.store = agent_store ? launcher_store(host, port, options.timeout)
                          : tcp_store(host, port, r.rank, r.world_size, options.timeout);
  } else if (url.scheme == "tcp") {
    r.rank = pick(options.rank, url, "rank", {}, false, method);
    r.world_size = pick(options.world_size, url, "world_size", {}, false, method);
    validate(r.rank, r.world_size, method);
    std::string hostport = url.rest;
    auto colon = hostport.rfind(':');
    if (colon == std::string::npos || colon + 1 == hostport.size())
      throw DistValueError("init_method '" + method + "' needs a port: tcp://host:port");
    std::string host = hostport.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    uint16_t port = parse_port(hostport.substr(colon + 1), "port in " + method);
    r.where = method;
    r.store = tcp_store(host, port, r.rank, r.world_size, options.timeout);
  } else if (url.scheme == "file") {
    r.rank = pick(options.rank, url, "rank", {}, false, method);
    r.world_size = pick(options.world_size, url, "world_size", {}, false, method);
    validate(r.rank, r.world_size, method);
    if (url.rest.empty() || url.rest.front() != '/')
      throw DistValueError("init_method '" + method + "' needs an absolute path: file:///path/to/file");
    r.where = method;
    r.store = std::make_shared<FileStore>(url.rest, r.world_size, options.timeout);
  } else {
    throw DistValueError("init_method '" + method + "': unknown scheme '" + url.scheme + "' (env, tcp, file)");
  }
  return r;
}

void join_all_ranks(Store& store, const std::string& prefix, int rank, int world_size, Millis timeout,
                    const std::string& where) {
  store.set(prefix + std::to_string(rank), "1");
  std::vector<std::string> keys;
  for (int i = 0; i < world_size; ++i) keys.push_back(prefix + std::to_string(i));
  // Wait in slices and note who is still missing after each, so the error can
  // list them even if the store's host (rank 0) gives up first and takes the
  // store with it.
  Deadline deadline = Deadline::after(timeout);
  const Millis slice = std::max<Millis>(timeout / 4, Millis(200));
  std::vector<int> missing;
  bool counted = false;  // whether `missing` was ever read from the store
  std::string store_error;
  for (;;) {
    try {
      store.wait(keys, std::min<Millis>(slice, deadline.remaining()));
      return;
    } catch (const DistError& e) {
      store_error = e.what();
    }
    try {
      std::vector<int> now;
      for (int i = 0; i < world_size; ++i)
        if (!store.check({keys[i]})) now.push_back(i);
      missing = now;
      counted = true;
    } catch (const DistError& e) {
      store_error = e.what();
      break;  // the store is gone: report what was last seen
    }
    if (deadline.expired()) break;
  }
  if (!counted)
    throw DistError("init_process_group via " + where + ": rank " + std::to_string(rank) +
                    " lost the store before it could see which of the " + std::to_string(world_size) +
                    " ranks arrived: " + store_error);
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + std::to_string(missing[i]);
  throw DistError("init_process_group via " + where + ": rank " + std::to_string(rank) + " waited up to " +
                  format_ms(timeout) + " but " + std::to_string(missing.size()) + " of " +
                  std::to_string(world_size) + " ranks did not arrive: [" + list + "] (last store error: " +
                  store_error + ")");
}

}  // namespace tdist
