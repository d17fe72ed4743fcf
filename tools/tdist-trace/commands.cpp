#include "commands.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "analysis.h"
#include "dump_reader.h"
#include "input_files.h"
#include "report.h"
#include "text.h"
#include "timeline.h"

namespace ttrace {

namespace {

void error_line(std::FILE* err, const std::string& what) {
  std::fprintf(err, "tdist-trace: %s\n", printable(what, 2000).c_str());
}

// The dump of file.rank, or an InputError naming the file.
Dump read_rank_dump(const RankFile& file) {
  Dump d = read_dump(file.path);
  if (d.info.rank != file.rank)
    throw InputError(file.path + ": the dump is rank " + std::to_string(d.info.rank) + "'s, but its name says rank " +
                     std::to_string(file.rank));
  return d;
}

}  // namespace

int analyse_command(const Options& options, std::FILE* out, std::FILE* err) {
  const FileSet set = options.files(kAnalysisPrefix);
  AnalysisInput input;
  input.pattern = set.pattern(".json");
  input.slow_ms = options.slow_ms;
  std::vector<RankFile> files;
  try {
    files = find_rank_files(set, ".json");
  } catch (const InputError& e) {
    error_line(err, e.what());
    return 2;
  }
  if (files.empty()) {
    error_line(err, "no flight recorder dumps " + input.pattern +
                        " (tdist writes them to TDIST_FLIGHT_RECORDER_DIR; torch's TORCH_FR_DUMP_TEMP_FILE is --prefix)");
    return 2;
  }
  for (const RankFile& f : files) {
    try {
      input.dumps.push_back(read_rank_dump(f));
    } catch (const InputError& e) {
      error_line(err, e.what());
      input.unreadable.emplace_back(f.rank, e.what());
    }
  }
  const Report report = analyse(input);
  const std::string text = options.json ? report_json(report) : report_text(report);
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
  if (!input.unreadable.empty()) return 2;
  return report.problems() > 0 ? 1 : 0;
}

int timeline_command(const Options& options, std::FILE* out, std::FILE* err) {
  std::vector<std::unique_ptr<TimelineSource>> sources;
  bool bad_input = false;
  std::string what = "timeline files";
  try {
    // The timeline files; without them, the flight recorder dumps.
    const FileSet traces = options.files(kTimelinePrefix);
    for (const RankFile& f : find_rank_files(traces, ".jsonl")) {
      try {
        sources.push_back(open_trace_file(f.path, f.rank));
      } catch (const InputError& e) {
        error_line(err, std::string(e.what()) + " (file left out)");
        bad_input = true;
      }
    }
    if (sources.empty() && !bad_input) {
      const FileSet dumps = options.files(kAnalysisPrefix);
      const std::vector<RankFile> files = find_rank_files(dumps, ".json");
      if (files.empty()) {
        error_line(err, "no timeline files " + traces.pattern(".jsonl") + " (written with TDIST_TRACE=DIR) and no flight recorder dumps " +
                            dumps.pattern(".json"));
        return 2;
      }
      what = "flight recorder dumps";
      for (const RankFile& f : files) {
        try {
          sources.push_back(dump_source(read_rank_dump(f)));
        } catch (const InputError& e) {
          error_line(err, std::string(e.what()) + " (file left out)");
          bad_input = true;
        }
      }
    }
  } catch (const InputError& e) {
    error_line(err, e.what());
    return 2;
  }
  if (sources.empty()) {
    error_line(err, "nothing to merge");
    return 2;
  }

  const bool to_stdout = options.output == "-";
  const std::string tmp = options.output + ".tmp." + std::to_string(getpid());
  std::FILE* file = to_stdout ? out : std::fopen(tmp.c_str(), "wb");
  if (file == nullptr) {
    error_line(err, "cannot write " + tmp + ": " + std::strerror(errno));
    return 2;
  }
  TimelineOptions topts;
  topts.queued_slices = options.queued;
  TimelineStats stats;
  try {
    stats = write_timeline(sources, file, topts);
  } catch (const InputError& e) {
    error_line(err, e.what());
    if (!to_stdout) {
      std::fclose(file);
      std::remove(tmp.c_str());
    }
    return 2;
  }
  if (to_stdout) {
    std::fflush(out);
  } else if (std::fclose(file) != 0 || std::rename(tmp.c_str(), options.output.c_str()) != 0) {
    error_line(err, "cannot write " + options.output + ": " + std::strerror(errno));
    std::remove(tmp.c_str());
    return 2;
  }

  for (const auto& src : sources)
    for (const std::string& s : src->skipped()) error_line(err, "skipped " + s);
  std::FILE* talk = to_stdout ? err : out;
  const std::string steps =
      stats.steps > 0 ? " and " + std::to_string(stats.steps) + (stats.steps == 1 ? " step" : " steps") : "";
  std::fprintf(talk, "tdist-trace: merged %zu operations%s of %zu rank%s (%zu group%s) from the %s into %s",
               stats.operations, steps.c_str(), stats.ranks, stats.ranks == 1 ? "" : "s", stats.groups,
               stats.groups == 1 ? "" : "s", what.c_str(), to_stdout ? "standard output" : options.output.c_str());
  if (stats.skipped_lines > 0)
    std::fprintf(talk, "; skipped %zu line%s that did not parse", stats.skipped_lines, stats.skipped_lines == 1 ? "" : "s");
  std::fprintf(talk, ".\nOpen it in https://ui.perfetto.dev or chrome://tracing.\n");
  return bad_input ? 2 : 0;
}

}  // namespace ttrace
