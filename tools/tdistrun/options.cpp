#include "options.h"

#include <dirent.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>

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
    {"role", Kind::kValue, "PET_ROLE"},
    {"use-env", Kind::kOptBool, nullptr},
    {"pass-local-rank", Kind::kFlag, nullptr},
    {"no-prefix", Kind::kFlag, nullptr},
    {"kill-timeout", Kind::kValue, nullptr},
    {"no-python", Kind::kFlag, "PET_NO_PYTHON"},
    {"help", Kind::kFlag, nullptr},
    {"version", Kind::kFlag, nullptr},
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

ParseResult usage_error(std::string message) {
  ParseResult r;
  r.action = Action::kUsageError;
  r.error = std::move(message);
  return r;
}

std::string invalid(const Setting& s, const std::string& expected) {
  return "invalid value '" + s.value + "' for " + s.shown + ": expected " + expected;
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
    *error = "unknown option '--" + typed + "'";
  } else {
    *error = "ambiguous option '--" + typed + "' could be";
    for (size_t i = 0; i < matches.size(); ++i) *error += std::string(i ? ", --" : " --") + matches[i]->name;
  }
  return nullptr;
}

}  // namespace

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

  if (has("nproc-per-node")) {
    const Setting& s = set["nproc-per-node"];
    if (s.value == "auto" || s.value == "cpu") {
      opt.nproc_per_node = online_cpus();
    } else if (s.value == "gpu") {
      opt.nproc_per_node = nvidia_gpus();
      if (opt.nproc_per_node == 0) return usage_error(s.shown + " gpu: no NVIDIA GPUs found (/proc/driver/nvidia/gpus)");
    } else {
      auto v = parse_int(s.value);
      if (!v || *v < 1 || *v > 1'000'000) return usage_error(invalid(s, "a positive integer, 'auto' or 'cpu' (one per online CPU), or 'gpu'"));
      opt.nproc_per_node = static_cast<int>(*v);
    }
  }
  if (has("nnodes")) {
    const Setting& s = set["nnodes"];
    std::string text = s.value;
    if (auto colon = text.find(':'); colon != std::string::npos) {
      // torchrun's elastic MIN:MAX; only a fixed size (MIN == MAX) is supported.
      auto lo = parse_int(text.substr(0, colon));
      auto hi = parse_int(text.substr(colon + 1));
      if (!lo || !hi || *lo != *hi) {
        return usage_error(invalid(s, "a positive integer (elastic MIN:MAX ranges are not supported; N:N is)"));
      }
      text = text.substr(0, colon);
    }
    auto v = parse_int(text);
    if (!v || *v < 1 || *v > 1'000'000) return usage_error(invalid(s, "a positive integer"));
    opt.nnodes = static_cast<int>(*v);
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
  if (has("kill-timeout")) {
    const Setting& s = set["kill-timeout"];
    char* end = nullptr;
    double v = std::strtod(s.value.c_str(), &end);
    if (s.value.empty() || end != s.value.c_str() + s.value.size() || !std::isfinite(v) || v < 0 || v > 1e6) {
      return usage_error(invalid(s, "a number of seconds >= 0"));
    }
    opt.kill_timeout_s = v;
  }
  if (has("use-env")) {
    const Setting& s = set["use-env"];
    auto v = parse_bool(s.value);
    if (!v) return usage_error(invalid(s, "true/false (or 1/0)"));
    opt.pass_local_rank = !*v;
  }
  if (has("pass-local-rank")) opt.pass_local_rank = true;
  if (has("no-prefix")) opt.prefix_output = false;
  if (auto v = env("TDIST_RUN_PREFIX")) {
    auto b = parse_bool(*v);
    if (!b) return usage_error("invalid value '" + *v + "' for TDIST_RUN_PREFIX: expected 1/0 (or true/false)");
    if (!*b && !has("no-prefix")) opt.prefix_output = false;
  }
  if (has("standalone")) {
    const Setting& s = set["standalone"];
    auto v = parse_bool(s.value);
    if (!v) return usage_error(invalid(s, "1 or 0"));
    opt.standalone = *v;
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
  if (opt.node_rank >= opt.nnodes) {
    std::string rank_name = has("node-rank") ? set["node-rank"].shown : "--node-rank";
    std::string nodes_name = has("nnodes") ? set["nnodes"].shown : "--nnodes";
    return usage_error(rank_name + " " + std::to_string(opt.node_rank) + " is out of range: it must be less than " +
                       nodes_name + " " + std::to_string(opt.nnodes));
  }
  if (opt.master_port == 0 && opt.nnodes > 1) {
    return usage_error(set["master-port"].shown +
                       " 0 picks a free port on this node only; with more than one node every node needs the same explicit port");
  }
  if (static_cast<long long>(opt.nnodes) * opt.nproc_per_node > 2'147'483'647LL) {
    return usage_error("--nnodes * --nproc-per-node is too large");
  }
  if (program_index >= args.size()) {
    return usage_error("missing PROGRAM: name the program to run after the options (see tdistrun --help)");
  }
  opt.program = args[program_index];
  opt.program_args.assign(args.begin() + static_cast<std::ptrdiff_t>(program_index) + 1, args.end());
  return ParseResult{Action::kRun, std::move(opt), {}};
}

}  // namespace tdistrun
