#include "options.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string_view>
#include <vector>

#include "init/slurm.h"
#include "signals.h"
#include "util/settings.h"
#include "tdist/errors.h"

namespace tdistrun {
namespace {

enum class Kind {
  kValue,     // --opt V or --opt=V
  kFlag,      // --opt (no value)
  kOptBool,   // --opt, or --opt=true/false/1/0
};

struct OptionDef {
  const char* name;  // canonical, dashed, without "--"
  Kind kind;
  const char* pet;   // torchrun's PET_<DEST> environment default, or nullptr
};

constexpr OptionDef kOptions[] = {
    {"nproc-per-node", Kind::kValue, "PET_NPROC_PER_NODE"},
    {"nnodes", Kind::kValue, "PET_NNODES"},
    {"node-rank", Kind::kValue, "PET_NODE_RANK"},
    {"master-addr", Kind::kValue, "PET_MASTER_ADDR"},
    {"master-port", Kind::kValue, "PET_MASTER_PORT"},
    {"standalone", Kind::kFlag, "PET_STANDALONE"},
    {"rdzv-id", Kind::kValue, "PET_RDZV_ID"},
    {"rdzv-backend", Kind::kValue, "PET_RDZV_BACKEND"},
    {"rdzv-endpoint", Kind::kValue, "PET_RDZV_ENDPOINT"},
    {"rdzv-conf", Kind::kValue, "PET_RDZV_CONF"},
    {"max-restarts", Kind::kValue, "PET_MAX_RESTARTS"},
    {"on-failure", Kind::kValue, nullptr},
    {"monitor-interval", Kind::kValue, "PET_MONITOR_INTERVAL"},
    {"log-dir", Kind::kValue, "PET_LOG_DIR"},
    {"redirects", Kind::kValue, "PET_REDIRECTS"},
    {"tee", Kind::kValue, "PET_TEE"},
    {"local-ranks-filter", Kind::kValue, "PET_LOCAL_RANKS_FILTER"},
    {"role", Kind::kValue, "PET_ROLE"},
    {"use-env", Kind::kOptBool, nullptr},
    {"pass-local-rank", Kind::kFlag, nullptr},
    {"no-prefix", Kind::kFlag, nullptr},
    {"kill-timeout", Kind::kValue, nullptr},
    {"shutdown-timeout", Kind::kValue, "PET_SHUTDOWN_TIMEOUT"},
    {"module", Kind::kFlag, "PET_MODULE"},
    {"no-python", Kind::kFlag, "PET_NO_PYTHON"},
    {"run-path", Kind::kFlag, "PET_RUN_PATH"},
    {"log-line-prefix-template", Kind::kValue, "PET_LOG_LINE_PREFIX_TEMPLATE"},
    {"signals-to-handle", Kind::kValue, "PET_SIGNALS_TO_HANDLE"},
    {"virtual-local-rank", Kind::kFlag, "PET_VIRTUAL_LOCAL_RANK"},
    // torchrun's options that mean nothing here (kNoEffect below says why).
    {"start-method", Kind::kValue, "PET_START_METHOD"},
    {"event-log-handler", Kind::kValue, "PET_EVENT_LOG_HANDLER"},
    {"duplicate-stdout-filters", Kind::kValue, "PET_DUPLICATE_STDOUT_FILTERS"},
    {"duplicate-stderr-filters", Kind::kValue, "PET_DUPLICATE_STDERR_FILTERS"},
    {"local-addr", Kind::kValue, "PET_LOCAL_ADDR"},
    {"logs-specs", Kind::kValue, nullptr},
    {"numa-binding", Kind::kValue, nullptr},
    {"print-completion", Kind::kValue, nullptr},
    {"help", Kind::kFlag, nullptr},
    {"version", Kind::kFlag, nullptr},
};

// What each of torchrun's options without a meaning here would have done, and
// why tdistrun does without it: the one line printed when one is given.
struct NoEffect {
  const char* name;
  const char* choices;  // the values torchrun accepts ("a|b|c"), or nullptr for any non-empty one
  const char* why;
};

constexpr NoEffect kNoEffect[] = {
    {"start-method", "spawn|fork|forkserver",
     "tdistrun starts every worker as a new process (fork and exec), which is what spawn does"},
    {"event-log-handler", nullptr, "tdistrun has no torchelastic event handlers; its own lines go to stderr"},
    {"duplicate-stdout-filters", nullptr,
     "tdistrun copies no filtered lines to a file; --log-dir with --tee keeps every line"},
    {"duplicate-stderr-filters", nullptr,
     "tdistrun copies no filtered lines to a file; --log-dir with --tee keeps every line"},
    {"local-addr", nullptr,
     "the workers reach the rendezvous store at --rdzv-endpoint (or --master-addr) and pick their own interface "
     "(TDIST_SOCKET_IFNAME)"},
    {"logs-specs", nullptr, "torchrun.logs_specs entry points are Python plugins of torchrun; --log-dir gives "
                            "torchrun's default layout"},
    {"numa-binding", "node|socket|exclusive|core-complex",
     "tdistrun does not bind workers to CPUs; start PROGRAM through numactl with --no-python to do so"},
    {"print-completion", "bash|zsh|tcsh", "tdistrun has no shell completion script"},
};

// A value as given, with the spelling to name in messages.
struct Setting {
  std::string value;
  std::string shown;  // "--nproc_per_node" or "PET_NNODES"
};

std::string normalize(std::string s) {
  for (char& c : s) {
    if (c == '_') c = '-';
  }
  return s;
}

std::optional<long long> parse_int(const std::string& s) {
  if (s.empty()) return std::nullopt;
  long long v = 0;
  const char* first = s.data();
  if (*first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  return std::nullopt;
}

// torchrun's Std: "3", or per local rank "0:1,1:2".
std::optional<StdChoice> parse_std_choice(const std::string& text) {
  auto one = [](const std::string& v) -> std::optional<int> {
    auto n = parse_int(v);
    if (!n || *n < 0 || *n > 3) return std::nullopt;
    return static_cast<int>(*n);
  };
  StdChoice c;
  if (text.find(':') == std::string::npos) {
    auto v = one(text);
    if (!v) return std::nullopt;
    c.all = *v;
    return c;
  }
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t colon = item.find(':');
    if (colon == std::string::npos) return std::nullopt;
    auto rank = parse_int(item.substr(0, colon));
    auto v = one(item.substr(colon + 1));
    if (!rank || *rank < 0 || *rank > 1'000'000 || !v) return std::nullopt;
    c.per_rank.emplace_back(static_cast<int>(*rank), *v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return c;
}

std::optional<double> parse_seconds(const std::string& text, double max = 1e7) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < 0 || v > max) return std::nullopt;
  return v;
}

// "host:port", "host" (torchrun's default port), "[v6]:port".
bool parse_endpoint(const std::string& text, std::string* host, int* port) {
  std::string h = text;
  std::string p;
  if (h.starts_with("[")) {
    size_t close = h.find(']');
    if (close == std::string::npos) return false;
    if (close + 1 < h.size()) {
      if (h[close + 1] != ':') return false;
      p = h.substr(close + 2);
    }
    h = h.substr(1, close - 1);
  } else if (size_t colon = h.rfind(':'); colon != std::string::npos && h.find(':') == colon) {
    p = h.substr(colon + 1);
    h.resize(colon);
  }
  if (h.empty()) return false;
  *host = h;
  *port = kDefaultRendezvousPort;
  if (!p.empty()) {
    auto v = parse_int(p);
    if (!v || *v < 0 || *v > 65535) return false;
    *port = static_cast<int>(*v);
  }
  return true;
}

// --rdzv-conf "join_timeout=900,last_call_timeout=10": "" on success, else the error.
std::string parse_rdzv_conf(const std::string& text, RendezvousOptions& r) {
  // torch's keys that mean nothing here (its store and keep-alive tuning) are accepted.
  static const char* kIgnored[] = {"read_timeout", "timeout", "heartbeat_timeout", "keep_alive_interval",
                                   "keep_alive_max_attempt", "store_type", "use_libuv", "is_host"};
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() : comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos) return "'" + item + "' is not KEY=VALUE";
    const std::string key = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    double* target = key == "join_timeout"        ? &r.join_timeout_s
                     : key == "last_call_timeout" ? &r.last_call_timeout_s
                     : key == "close_timeout"     ? &r.close_timeout_s
                                                  : nullptr;
    if (target == nullptr) {
      bool ignored = false;
      for (const char* k : kIgnored) ignored = ignored || key == k;
      if (ignored) continue;
      return "unknown key '" + key + "' (known: join_timeout, last_call_timeout, close_timeout, in seconds)";
    }
    auto v = parse_seconds(value);
    if (!v) return "'" + item + "': expected a number of seconds";
    *target = *v;
  }
  return "";
}

// "0,2,3" -> {0, 2, 3}.
std::optional<std::set<int>> parse_rank_list(const std::string& text) {
  std::set<int> out;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    auto v = parse_int(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!v || *v < 0 || *v > 1'000'000) return std::nullopt;
    out.insert(static_cast<int>(*v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string invalid(const Setting& s, const std::string& expected);

// "" when torchrun would take the value of a no-effect option, else the error.
std::string check_no_effect_value(const NoEffect& ne, const Setting& s) {
  if (ne.choices != nullptr) {
    std::string_view choices(ne.choices);
    std::string listed;
    while (!choices.empty()) {
      const size_t bar = choices.find('|');
      const std::string_view choice = choices.substr(0, bar);
      if (s.value == choice) return "";
      listed += (listed.empty() ? "" : ", ") + std::string(choice);
      choices.remove_prefix(bar == std::string_view::npos ? choices.size() : bar + 1);
    }
    return invalid(s, "one of " + listed);
  }
  if (std::string_view(ne.name) == "logs-specs" && s.value.empty()) return invalid(s, "an entry point name");
  return "";
}

// A variable of tdist's settings registry (util/settings_table.h) that the
// launcher reads, through `env` (tests inject theirs) and checked as the
// registry says: nullopt where unset; DistValueError naming it where wrong.
template <tdist::settings::Name name>
std::optional<std::string> registered(const EnvLookup& env) {
  auto v = env(std::string(name.view()));
  if (!v) return std::nullopt;
  return tdist::parse_setting(tdist::settings::info<name>(), name.text, *v);
}

// "a, b,c" as {"a", "b", "c"}: the items between commas, without the spaces around each.
std::vector<std::string> comma_items(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    out.push_back(std::move(item));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// torchrun's --signals-to-handle: signal names separated by commas (spaces
// around each allowed), each one this system has and a launcher can pass on;
// "" when they are, else the error.
std::string parse_signal_list(const Setting& s, std::vector<int>* out) {
  out->clear();
  for (const std::string& item : comma_items(s.value)) {
    int found = 0;
    for (int sig = 1; sig < NSIG && found == 0; ++sig)
      if (item.starts_with("SIG") && signal_name(sig) == item) found = sig;
    if (found == 0)
      return invalid(s, "signal names separated by commas, e.g. SIGTERM,SIGINT,SIGUSR1 ('" + item + "' is not one)");
    if (found == SIGKILL || found == SIGSTOP)
      return invalid(s, "signals a launcher can catch (" + item + " cannot be caught)");
    if (found == SIGCHLD)
      return invalid(s, "signals to pass to the workers (SIGCHLD is how tdistrun learns that a worker exited)");
    if (std::find(out->begin(), out->end(), found) == out->end()) out->push_back(found);
  }
  return "";
}

// --virtual-local-rank: the launcher's device list (HIP_VISIBLE_DEVICES first,
// as torchrun reads it, else CUDA_VISIBLE_DEVICES), which must name a device
// for every local rank; "" when it does, else the error.
std::string read_visible_devices(const EnvLookup& env, int nproc_per_node, Options* opt) {
  const char* name = "CUDA_VISIBLE_DEVICES";
  auto list = registered<"HIP_VISIBLE_DEVICES">(env);
  if (list) {
    name = "HIP_VISIBLE_DEVICES";
    opt->hip_visible_devices = true;
  } else {
    list = registered<"CUDA_VISIBLE_DEVICES">(env);
  }
  if (!list) return "";
  opt->visible_devices = comma_items(*list);
  if (static_cast<int>(opt->visible_devices.size()) < nproc_per_node)
    return "--virtual-local-rank gives each local rank one entry of " + std::string(name) + "=" + *list + ", but it has " +
           std::to_string(opt->visible_devices.size()) + " for " + std::to_string(nproc_per_node) +
           " local ranks (--nproc-per-node)";
  return "";
}

ParseResult usage_error(std::string message) {
  ParseResult r;
  r.action = Action::kUsageError;
  r.error = std::move(message);
  return r;
}

std::string invalid(const Setting& s, const std::string& expected) {
  return "invalid value '" + s.value + "' for " + s.shown + ": expected " + expected;
}

// Edits (insert, delete, replace, swap two neighbours) from a to b: how far a
// typo is from what was meant.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// "; did you mean --nproc-per-node?" for the options nearest to an unknown
// one (underscores already read as dashes), if any is near enough to be a
// typo of it: a third of the name's letters, at least one and at most three.
std::string did_you_mean(const std::string& normalized) {
  std::vector<const OptionDef*> nearest;
  size_t best = std::min<size_t>(3, std::max<size_t>(1, normalized.size() / 3)) + 1;
  for (const auto& def : kOptions) {
    const size_t d = edit_distance(normalized, def.name);
    if (d < best) {
      nearest.clear();
      best = d;
    }
    if (d == best) nearest.push_back(&def);
  }
  if (nearest.empty()) return "";
  std::string out = "; did you mean";
  for (size_t i = 0; i < nearest.size(); ++i)
    out += std::string(i == 0 ? " --" : i + 1 == nearest.size() ? " or --" : ", --") + nearest[i]->name;
  return out + "?";
}

// Finds the option a user's spelling names: exact, else a unique prefix (as argparse).
const OptionDef* find_option(const std::string& typed, std::string* error) {
  const std::string normalized = normalize(typed);
  for (const auto& def : kOptions) {
    if (normalized == def.name) return &def;
  }
  std::vector<const OptionDef*> matches;
  for (const auto& def : kOptions) {
    if (std::string(def.name).starts_with(normalized)) matches.push_back(&def);
  }
  if (matches.size() == 1) return matches[0];
  if (matches.empty()) {
    *error = "unknown option '--" + typed + "'" + did_you_mean(normalized);
  } else {
    *error = "ambiguous option '--" + typed + "' could be";
    for (size_t i = 0; i < matches.size(); ++i) *error += std::string(i ? ", --" : " --") + matches[i]->name;
  }
  return nullptr;
}

}  // namespace

int StdChoice::of(int local_rank) const {
  for (const auto& [r, v] : per_rank) {
    if (r == local_rank) return v;
  }
  return per_rank.empty() ? all : 0;
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

int online_cpus() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int nvidia_gpus() {
  DIR* dir = opendir("/proc/driver/nvidia/gpus");
  if (dir == nullptr) return 0;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

ParseResult parse_options(const std::vector<std::string>& args, const EnvLookup& env) {
  std::map<std::string, Setting> set;  // canonical name -> last value given

  // torchrun reads a default for each option from PET_<OPTION>; the command line wins.
  for (const auto& def : kOptions) {
    if (def.pet == nullptr) continue;
    if (auto v = env(def.pet)) set[def.name] = Setting{*v, def.pet};
  }

  Options opt;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h") return ParseResult{Action::kHelp, {}, {}};
    if (arg == "-m") {  // torchrun's short form of --module
      set["module"] = Setting{"1", arg};
      continue;
    }
    // torchrun's two short options: -r/--redirects and -t/--tee ("-r 3", "-r3", "-r=3").
    if (arg.size() >= 2 && arg[0] == '-' && (arg[1] == 'r' || arg[1] == 't')) {
      const std::string name = arg[1] == 'r' ? "redirects" : "tee";
      std::string value = arg.substr(2);
      if (value.starts_with("=")) value.erase(0, 1);
      if (value.empty()) {
        if (i + 1 >= args.size()) return usage_error("option " + arg + " needs a value");
        value = args[++i];
      }
      set[name] = Setting{value, arg.substr(0, 2)};
      continue;
    }
    if (!arg.starts_with("--")) {
      if (arg.size() > 1 && arg[0] == '-') {
        return usage_error("unknown option '" + arg + "' (options are spelled --name; see tdistrun --help)");
      }
      break;  // PROGRAM
    }
    std::string body = arg.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = body.find('='); eq != std::string::npos) {
      inline_value = body.substr(eq + 1);
      body.resize(eq);
    }
    std::string error;
    const OptionDef* def = find_option(body, &error);
    if (def == nullptr) return usage_error(error + " (see tdistrun --help)");
    // Name the option as the user spelled it, unless they abbreviated it.
    std::string shown = normalize(body) == def->name ? "--" + body : std::string("--") + def->name;
    const std::string name = def->name;

    switch (def->kind) {
      case Kind::kValue:
        if (inline_value) {
          set[name] = Setting{*inline_value, shown};
        } else if (i + 1 < args.size()) {
          set[name] = Setting{args[++i], shown};
        } else {
          return usage_error("option " + shown + " needs a value");
        }
        break;
      case Kind::kFlag:
        if (inline_value) return usage_error("option " + shown + " takes no value (got '" + *inline_value + "')");
        if (name == "help") return ParseResult{Action::kHelp, {}, {}};
        if (name == "version") return ParseResult{Action::kVersion, {}, {}};
        set[name] = Setting{"1", shown};
        break;
      case Kind::kOptBool:
        set[name] = Setting{inline_value.value_or("1"), shown};
        break;
    }
  }

  // Values are checked before PROGRAM, so "--nnodes prog" names --nnodes, not a missing PROGRAM.
  const size_t program_index = i;

  auto has = [&](const char* n) { return set.count(n) != 0; };

  // torchrun's check_env flags: on when given, or when PET_<NAME> is not 0.
  std::map<std::string, bool> flag_on;
  for (const auto& def : kOptions) {
    if (def.kind != Kind::kFlag || !has(def.name)) continue;
    const Setting& s = set[def.name];
    auto v = parse_bool(s.value);
    if (!v) return usage_error(invalid(s, "1 or 0"));
    flag_on[def.name] = *v;
  }

  for (const auto& ne : kNoEffect) {
    if (!has(ne.name) || (flag_on.count(ne.name) != 0 && !flag_on[ne.name])) continue;
    const Setting& s = set[ne.name];
    if (std::string error = check_no_effect_value(ne, s); !error.empty()) return usage_error(error);
    std::string given = s.shown;
    if (flag_on.count(ne.name) == 0) given += (s.shown.starts_with("-") ? " " : "=") + s.value;
    opt.warnings.push_back(given + " has no effect here: " + ne.why);
  }
  // Like torchrun's --print-completion, it ends the command line's work here.
  if (has("print-completion")) {
    ParseResult r;
    r.action = Action::kNothing;
    r.options.warnings = std::move(opt.warnings);
    return r;
  }

  const bool run_path = flag_on["run-path"];
  const bool module = flag_on["module"];
  const bool no_python = flag_on["no-python"];
  if (run_path) {
    // torchrun: --run-path takes precedence over --no-python, and runs PROGRAM as a path.
    opt.program_kind = ProgramKind::kPythonRunPath;
    if (module) opt.warnings.push_back(set["module"].shown + " is ignored: " + set["run-path"].shown + " runs PROGRAM as a script path");
    if (no_python) opt.warnings.push_back(set["no-python"].shown + " is ignored: " + set["run-path"].shown + " runs PROGRAM with Python");
  } else if (no_python && module) {
    return usage_error(set["no-python"].shown + " and " + set["module"].shown +
                       " cannot be used together: a module is run by Python");
  } else if (no_python) {
    opt.program_kind = ProgramKind::kExecutable;
  } else if (module) {
    opt.program_kind = ProgramKind::kPythonModule;
  }

  try {
    if (has("log-line-prefix-template")) {
      opt.line_prefix_template = set["log-line-prefix-template"].value;
    } else if (auto v = registered<"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE">(env)) {
      opt.line_prefix_template = *v;
    }
  } catch (const tdist::DistValueError& e) {
    return usage_error(e.what());
  }
  if (has("signals-to-handle")) {
    if (std::string error = parse_signal_list(set["signals-to-handle"], &opt.signals_to_handle); !error.empty())
      return usage_error(error);
  }

  if (has("nproc-per-node")) {
    const Setting& s = set["nproc-per-node"];
    if (s.value == "auto") {
      // torchrun's: one per accelerator where there are some, else one per CPU.
      const int gpus = nvidia_gpus();
      opt.nproc_per_node = gpus > 0 ? gpus : online_cpus();
    } else if (s.value == "cpu") {
      opt.nproc_per_node = online_cpus();
    } else if (s.value == "xpu") {
      return usage_error(s.shown + " xpu: tdist has no XPU backend; use a number, auto, cpu or gpu");
    } else if (s.value == "gpu") {
      opt.nproc_per_node = nvidia_gpus();
      if (opt.nproc_per_node == 0) return usage_error(s.shown + " gpu: no NVIDIA GPUs found (/proc/driver/nvidia/gpus)");
    } else {
      auto v = parse_int(s.value);
      if (!v || *v < 1 || *v > 1'000'000) {
        return usage_error(invalid(s, "a positive integer, 'cpu' (one per online CPU), 'gpu' (one per NVIDIA GPU) or "
                                      "'auto' (gpu where there are GPUs, else cpu)"));
      }
      opt.nproc_per_node = static_cast<int>(*v);
    }
  }
  if (has("nnodes")) {
    // N, or torchrun's elastic MIN:MAX (between MIN and MAX nodes form the job).
    const Setting& s = set["nnodes"];
    const size_t colon = s.value.find(':');
    auto lo = parse_int(s.value.substr(0, colon));
    auto hi = colon == std::string::npos ? lo : parse_int(s.value.substr(colon + 1));
    if (!lo || !hi || *lo < 1 || *hi > 1'000'000 || *lo > *hi) {
      return usage_error(invalid(s, "a positive integer N, or MIN:MAX with 1 <= MIN <= MAX"));
    }
    opt.rdzv.min_nodes = static_cast<int>(*lo);
    opt.rdzv.max_nodes = static_cast<int>(*hi);
    opt.nnodes = opt.rdzv.max_nodes;
  }
  if (has("node-rank")) {
    const Setting& s = set["node-rank"];
    auto v = parse_int(s.value);
    if (!v || *v < 0 || *v > 1'000'000) return usage_error(invalid(s, "a non-negative integer"));
    opt.node_rank = static_cast<int>(*v);
  }
  if (has("master-addr")) {
    const Setting& s = set["master-addr"];
    if (s.value.empty()) return usage_error(invalid(s, "a host name or IP address"));
    opt.master_addr = s.value;
  }
  if (has("master-port")) {
    const Setting& s = set["master-port"];
    auto v = parse_int(s.value);
    if (!v || *v < 0 || *v > 65535) return usage_error(invalid(s, "a port number 0..65535 (0 picks a free port)"));
    opt.master_port = static_cast<int>(*v);
  }
  if (has("rdzv-id")) {
    const Setting& s = set["rdzv-id"];
    if (s.value.empty()) return usage_error(invalid(s, "a non-empty job id"));
    opt.rdzv_id = s.value;
  }
  if (has("role")) {
    const Setting& s = set["role"];
    if (s.value.empty()) return usage_error(invalid(s, "a non-empty role name"));
    opt.role = s.value;
  }
  // torchrun's --shutdown-timeout, or its environment form, is --kill-timeout;
  // tdistrun's own spelling wins where both are given.
  if (!has("kill-timeout")) {
    std::optional<Setting> s;
    if (has("shutdown-timeout")) {
      s = set["shutdown-timeout"];
    } else {
      try {
        if (auto v = registered<"TORCH_ELASTIC_SHUTDOWN_TIMEOUT">(env)) s = Setting{*v, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"};
      } catch (const tdist::DistValueError& e) {
        return usage_error(e.what());
      }
    }
    if (s) {
      auto v = parse_seconds(s->value, 1e6);
      if (!v) return usage_error(invalid(*s, "a number of seconds >= 0"));
      opt.kill_timeout_s = *v;
    }
  }
  if (has("kill-timeout")) {
    const Setting& s = set["kill-timeout"];
    char* end = nullptr;
    double v = std::strtod(s.value.c_str(), &end);
    if (s.value.empty() || end != s.value.c_str() + s.value.size() || !std::isfinite(v) || v < 0 || v > 1e6) {
      return usage_error(invalid(s, "a number of seconds >= 0"));
    }
    opt.kill_timeout_s = v;
  }
  if (has("max-restarts")) {
    const Setting& s = set["max-restarts"];
    auto v = parse_int(s.value);
    if (!v || *v < 0 || *v > 1'000'000) return usage_error(invalid(s, "a non-negative integer"));
    opt.max_restarts = static_cast<int>(*v);
  }
  // tdistrun's own option; its environment form is tdist's TDIST_ON_FAILURE.
  if (has("on-failure") || env("TDIST_ON_FAILURE")) {
    std::string value;
    if (has("on-failure")) {
      const Setting& s = set["on-failure"];
      value = s.value;
      if (value != "restart" && value != "shrink" && value != "shrink-and-replace") {
        return usage_error(invalid(s, "restart (stop every worker and start them all again, torchrun's), shrink "
                                      "(the other workers run on) or shrink-and-replace (and a replacement joins "
                                      "them)"));
      }
    } else {
      try {
        value = tdist::parse_setting(tdist::settings::info<"TDIST_ON_FAILURE">(), "TDIST_ON_FAILURE",
                                     *env("TDIST_ON_FAILURE"))
                    .value_or("restart");
      } catch (const tdist::DistValueError& e) {
        return usage_error(e.what());
      }
    }
    opt.on_failure = value == "shrink"               ? OnFailure::kShrink
                     : value == "shrink-and-replace" ? OnFailure::kShrinkAndReplace
                                                     : OnFailure::kRestart;
  }
  if (has("monitor-interval")) {
    const Setting& s = set["monitor-interval"];
    auto v = parse_seconds(s.value, 3600);
    if (!v || *v < 0.01) return usage_error(invalid(s, "a number of seconds, at least 0.01"));
    opt.monitor_interval_s = *v;
  }
  if (has("log-dir")) {
    const Setting& s = set["log-dir"];
    if (s.value.empty()) return usage_error(invalid(s, "a directory"));
    opt.log_dir = s.value;
  }
  for (const char* name : {"redirects", "tee"}) {
    if (!has(name)) continue;
    const Setting& s = set[name];
    auto v = parse_std_choice(s.value);
    if (!v) return usage_error(invalid(s, "0 (none), 1 (stdout), 2 (stderr) or 3 (both), or per local rank as 0:1,1:2"));
    (std::string(name) == "redirects" ? opt.redirects : opt.tee) = *v;
  }
  if (has("local-ranks-filter")) {
    const Setting& s = set["local-ranks-filter"];
    auto v = parse_rank_list(s.value);
    if (!v) return usage_error(invalid(s, "local ranks separated by commas, e.g. 0,2"));
    opt.local_ranks_filter = *v;
  }
  if (has("rdzv-conf")) {
    const Setting& s = set["rdzv-conf"];
    std::string error = parse_rdzv_conf(s.value, opt.rdzv);
    if (!error.empty()) return usage_error("invalid value for " + s.shown + ": " + error);
  }
  if (has("use-env")) {
    const Setting& s = set["use-env"];
    auto v = parse_bool(s.value);
    if (!v) return usage_error(invalid(s, "true/false (or 1/0)"));
    opt.pass_local_rank = !*v;
  }
  if (has("pass-local-rank")) opt.pass_local_rank = true;
  if (has("no-prefix")) opt.prefix_output = false;
  {
    std::optional<std::string> b;  // the registry's spelling of a bool, "1" or "0"
    try {
      b = registered<"TDIST_RUN_PREFIX">(env);
    } catch (const tdist::DistValueError& e) {
      return usage_error(e.what());
    }
    if (b == "0" && !has("no-prefix")) opt.prefix_output = false;
  }
  if (has("standalone")) {
    const Setting& s = set["standalone"];
    auto v = parse_bool(s.value);
    if (!v) return usage_error(invalid(s, "1 or 0"));
    opt.standalone = *v;
  }

  bool node_rank_given = has("node-rank");
  const bool backend_given = has("rdzv-backend");
  if (backend_given) {
    const Setting& s = set["rdzv-backend"];
    if (s.value != "static" && s.value != "c10d") {
      const bool etcd = s.value == "etcd" || s.value == "etcd-v2";
      return usage_error(s.shown + " " + s.value + ": " +
                         (etcd ? "tdistrun has no etcd rendezvous" : "tdistrun has no such rendezvous backend") +
                         "; its backends are c10d (the agents meet in a store one of them hosts at --rdzv-endpoint, "
                         "as torchrun's c10d) and static (--node-rank on every node)");
    }
    opt.rdzv.backend = s.value;
  }
  if (has("rdzv-endpoint")) {
    const Setting& s = set["rdzv-endpoint"];
    std::string host;
    int port = 0;
    if (!parse_endpoint(s.value, &host, &port)) return usage_error(invalid(s, "HOST[:PORT]"));
    if (has("master-addr") || has("master-port")) {
      opt.warnings.push_back(s.shown + " " + s.value + " overrides --master-addr/--master-port");
    }
    opt.master_addr = host;
    opt.master_port = port;
  }
  // Inside a Slurm allocation (sbatch, salloc + srun) the node's place comes from Slurm.
  if (!node_rank_given && !backend_given && !has("rdzv-endpoint") && !opt.standalone && env("SLURM_JOB_ID") &&
      env("SLURM_NODEID")) {
    auto node = parse_int(*env("SLURM_NODEID"));
    auto nodes = parse_int(env("SLURM_JOB_NUM_NODES").value_or(env("SLURM_NNODES").value_or("")));
    auto job = parse_int(*env("SLURM_JOB_ID"));
    if (!node || !nodes || !job || *node < 0 || *nodes < 1 || *node >= *nodes || *nodes > 1'000'000 || *job < 0) {
      return usage_error("this looks like a Slurm job, but SLURM_NODEID, SLURM_JOB_NUM_NODES and SLURM_JOB_ID do not "
                         "give a node rank below the node count; pass --nnodes and --node-rank");
    }
    opt.node_rank = static_cast<int>(*node);
    node_rank_given = true;
    if (!has("nnodes")) opt.nnodes = opt.rdzv.min_nodes = opt.rdzv.max_nodes = static_cast<int>(*nodes);
    if (!has("master-addr")) {
      auto list = env("SLURM_JOB_NODELIST");
      if (!list || list->empty()) list = env("SLURM_NODELIST");
      if (!list || list->empty()) return usage_error("in a Slurm job without SLURM_JOB_NODELIST: pass --master-addr");
      try {
        opt.master_addr = tdist::slurm::expand_nodelist(*list).front();
      } catch (const tdist::DistError& e) {
        return usage_error(e.what());
      }
    }
    if (!has("master-port")) opt.master_port = 20000 + static_cast<int>(*job % 20000);
  }
  opt.rdzv.dynamic = opt.rdzv.backend == "c10d" ||
                     (!backend_given && !node_rank_given && (opt.rdzv.max_nodes > 1 || has("rdzv-endpoint")));
  if (!opt.rdzv.dynamic && opt.rdzv.min_nodes != opt.rdzv.max_nodes) {
    return usage_error(set["nnodes"].shown + " " + set["nnodes"].value +
                       ": a MIN:MAX range needs the c10d rendezvous, which assigns node ranks (leave out --node-rank "
                       "and --rdzv-backend static)");
  }
  if (!opt.rdzv.dynamic && opt.nnodes > 1 && !node_rank_given) {
    return usage_error("--rdzv-backend static with " + std::to_string(opt.nnodes) +
                       " nodes needs --node-rank on every node (or --rdzv-backend c10d to assign them)");
  }
  if (opt.rdzv.dynamic && has("node-rank")) {
    opt.warnings.push_back(set["node-rank"].shown + " is ignored: the c10d rendezvous assigns node ranks");
    opt.node_rank = 0;
  }

  if (opt.standalone) {
    if (opt.nnodes != 1) {
      return usage_error("--standalone runs a single node, but " + set["nnodes"].shown + " is " + std::to_string(opt.nnodes));
    }
    if (has("master-addr")) opt.warnings.push_back("--standalone ignores " + set["master-addr"].shown + " (uses 127.0.0.1)");
    if (has("master-port")) opt.warnings.push_back("--standalone ignores " + set["master-port"].shown + " (picks a free port)");
    opt.master_addr = "127.0.0.1";
    opt.master_port = 0;
  }
  if (!opt.rdzv.dynamic && opt.node_rank >= opt.nnodes) {
    std::string rank_name = has("node-rank") ? set["node-rank"].shown : "--node-rank";
    std::string nodes_name = has("nnodes") ? set["nnodes"].shown : "--nnodes";
    return usage_error(rank_name + " " + std::to_string(opt.node_rank) + " is out of range: it must be less than " +
                       nodes_name + " " + std::to_string(opt.nnodes));
  }
  if (opt.master_port == 0 && opt.nnodes > 1) {
    return usage_error((has("master-port") ? set["master-port"].shown : std::string("--rdzv-endpoint")) +
                       " 0 picks a free port on this node only; with more than one node every node needs the same explicit port");
  }
  if (static_cast<long long>(opt.nnodes) * opt.nproc_per_node > 2'147'483'647LL) {
    return usage_error("--nnodes * --nproc-per-node is too large");
  }
  if (flag_on["virtual-local-rank"]) {
    opt.virtual_local_rank = true;
    if (std::string error = read_visible_devices(env, opt.nproc_per_node, &opt); !error.empty())
      return usage_error(error);
  }
  if (program_index >= args.size()) {
    return usage_error("missing PROGRAM: name the program to run after the options (see tdistrun --help)");
  }
  opt.program = args[program_index];
  opt.program_args.assign(args.begin() + static_cast<std::ptrdiff_t>(program_index) + 1, args.end());
  return ParseResult{Action::kRun, std::move(opt), {}};
}

}  // namespace tdistrun
