#include "options.h"

#include <cstdlib>

namespace ttrace {

FileSet Options::files(const std::string& default_prefix) const {
  if (dir.empty()) return FileSet::from_path_prefix(prefix);
  return {dir, prefix.empty() ? default_prefix : prefix};
}

namespace {

Options usage_error(std::string why) {
  Options o;
  o.mode = Mode::kUsageError;
  o.error = std::move(why) + " (tdist-trace --help shows the usage)";
  return o;
}

}  // namespace

Options parse_options(const std::vector<std::string>& args) {
  Options o;
  bool timeline = false;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::string value;
    bool has_value = false;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
      has_value = true;
    }
    auto take = [&]() -> bool {  // the option's value: after '=', or the next word
      if (has_value) return true;
      if (i + 1 >= args.size()) return false;
      value = args[++i];
      return true;
    };
    auto flag_only = [&] { return !has_value; };
    if (arg == "-h" || arg == "--help") {
      o.mode = Mode::kHelp;
      return o;
    } else if (arg == "--version") {
      o.mode = Mode::kVersion;
      return o;
    } else if (arg == "--json" && flag_only()) {
      o.json = true;
    } else if (arg == "--timeline" && flag_only()) {
      timeline = true;
    } else if (arg == "--queued" && flag_only()) {
      o.queued = true;
    } else if (arg == "--prefix") {
      if (!take() || value.empty()) return usage_error("--prefix needs a value");
      o.prefix = value;
    } else if (arg == "-o" || arg == "--output") {
      if (!take() || value.empty()) return usage_error(arg + " needs a file name");
      o.output = value;
    } else if (arg == "--slow-ms") {
      if (!take()) return usage_error("--slow-ms needs a number");
      char* end = nullptr;
      o.slow_ms = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(o.slow_ms >= 0) || o.slow_ms > 1e9)
        return usage_error("--slow-ms wants milliseconds (a number >= 0), not '" + value + "'");
    } else if (arg == "--") {
      positional.insert(positional.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usage_error("unknown option '" + args[i] + "'");
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() > 1) return usage_error("one folder only, not '" + positional[1] + "' too");
  if (!positional.empty()) o.dir = positional[0];
  if (o.dir.empty() && o.prefix.empty()) return usage_error("which folder? give DIR (or --prefix PATH_PREFIX)");
  if (!o.dir.empty() && o.prefix.find('/') != std::string::npos)
    return usage_error("with DIR, --prefix is the start of the file names, without '/'");
  if (timeline) {
    o.mode = Mode::kTimeline;
    if (o.output.empty()) return usage_error("--timeline needs -o FILE (or -o - for standard output)");
    if (o.json) return usage_error("--json is for the analysis, not --timeline");
  } else {
    if (!o.output.empty()) return usage_error("-o is for --timeline");
    if (o.queued) return usage_error("--queued is for --timeline");
  }
  return o;
}

std::string help_text() {
  return R"(usage: tdist-trace [options] DIR
       tdist-trace [options] --prefix PATH_PREFIX
       tdist-trace --timeline DIR -o FILE [--queued]

Reads every rank's flight recorder dump, DIR/tdist_fr_<rank>.json (what tdist
writes to TDIST_FLIGHT_RECORDER_DIR when an operation fails or times out, on
SIGUSR1, or on tdist::dump_flight_recorder()), and says what went wrong, group
by group, the most important first:
  - the first collective on which the members disagree (op, dtype, shapes,
    root, reduce_op), with the ranks on each side;
  - ranks that never entered a collective the others entered (a hang);
  - ranks whose dumps are missing (they left, were killed, or did not dump);
  - failed operations and their errors;
  - a rank that entered last most of the time (the others waited for it).
Exit status: 0 nothing wrong, 1 a problem found, 2 bad input or usage (a dump
that cannot be read is named on standard error; the others are still analysed).

Options:
  --prefix P     the files' name prefix instead of tdist_fr_: with DIR, the
                 files are DIR/P<rank>.json; without, P is a path prefix, as
                 TORCH_FR_DUMP_TEMP_FILE is (P<rank>.json).
  --json         the findings as JSON on standard output.
  --slow-ms MS   a rank that entered last most of the time is a problem when
                 the others waited for it this long (median) [1].
  --timeline     merge the ranks' timeline files, DIR/tdist_trace_<rank>.jsonl
                 (written with TDIST_TRACE=DIR), into one Chrome trace event
                 file for Perfetto (ui.perfetto.dev) or chrome://tracing: one
                 track per rank, one row per group, clocks aligned to rank 0's.
                 Without timeline files, the flight recorder dumps in DIR are
                 merged instead (operations still running show as unfinished).
                 Lines that do not parse (a rank killed mid-write) are skipped.
  -o FILE        where --timeline writes ("-": standard output).
  --queued       --timeline: also the time each operation waited in its
                 group's queue, as slices on a row "GROUP queue".
  -h, --help     this text.
  --version      the version.

Formats: docs/trace_format.md; the tool: docs/tdist-trace.md.
)";
}

}  // namespace ttrace
