#include "timeline_source.h"

#include "fields.h"
#include "json.h"
#include "line_reader.h"

namespace ttrace {

namespace {

constexpr size_t kSkippedShown = 5;

JsonLimits line_limits() {
  JsonLimits l;
  l.max_depth = 16;
  l.max_string_bytes = kMaxTraceLine;
  l.max_values = 1u << 16;
  return l;
}

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

class TraceFile : public TimelineSource {
 public:
  TraceFile(const std::string& path, int expected_rank) : path_(path) {
    LineReader reader(path, kMaxTraceLine);
    std::string line;
    bool too_long = false;
    if (!reader.next(line, too_long)) throw InputError(path + ": empty: no header line");
    if (too_long) throw InputError(path + ":1: the header line is longer than 1 MiB");
    JsonValue header;
    try {
      header = parse_json(line, line_limits(), 1);
    } catch (const JsonError& e) {
      throw InputError(path + ":1:" + std::to_string(e.column()) + ": the header line does not parse: " + e.what());
    }
    const Fields f(header, path, "the header line");
    if (f.has("op")) f.fail("is an operation, not the header (version, rank, clock_offset_us)");
    const int64_t version = f.integer("version", 0, kMaxTime);
    if (version != 1) f.fail("'version' is " + std::to_string(version) + "; this tdist-trace reads version 1");
    info_.rank = static_cast<int>(f.integer("rank", 0, kMaxRanks - 1));
    info_.world_size = f.integer_or("world_size", 0, 1, kMaxRanks);
    info_.host = f.text_or("host", "");
    info_.pid = f.integer_or("pid", 0, 0, kMaxTime);
    info_.clock_offset_us = f.integer_or("clock_offset_us", 0, -kMaxClockOffset, kMaxClockOffset);
    if (expected_rank >= 0 && info_.rank != expected_rank)
      f.fail("'rank' is " + std::to_string(info_.rank) + " but the file name says " + std::to_string(expected_rank));
  }

  const RankInfo& info() const override { return info_; }
  const std::string& path() const override { return path_; }
  const std::vector<std::string>& skipped() const override { return skipped_; }
  size_t skipped_count() const override { return skipped_count_; }

  void for_each(const std::function<void(const TimelineOp&)>& on_op,
                const std::function<void(const Step&)>& on_step) override {
    skipped_.clear();
    skipped_count_ = 0;
    LineReader reader(path_, kMaxTraceLine);
    std::string line;
    bool too_long = false;
    reader.next(line, too_long);  // the header, read by the constructor
    Entry entry;
    std::string group;
    Step step;
    while (reader.next(line, too_long)) {
      const int n = reader.line_number();
      if (too_long) {
        skip(n, "longer than 1 MiB");
        continue;
      }
      if (blank(line)) continue;
      bool is_step = false;
      try {
        const JsonValue v = parse_json(line, line_limits(), n);
        // A step line carries an "op" too: "step" alone tells it from an operation line.
        is_step = v.is_object() && v.find("step") != nullptr && !v.find("step")->is_null();
        const Fields f(v, path_, is_step ? "the step" : "the operation");
        if (is_step) {
          step = Step{};
          read_step(f, v, step);
        } else {
          group = f.text("group");
          if (group.empty()) f.fail("'group' is empty");
          entry = Entry{};
          read_entry(f, v, entry);
        }
      } catch (const JsonError& e) {
        skip(n, std::string(reader.last_unterminated() ? "the last line is cut short: " : "") + e.what());
        continue;
      } catch (const InputError& e) {
        skipped_count_++;
        if (skipped_.size() < kSkippedShown) skipped_.push_back(e.what());
        continue;
      }
      if (is_step) {
        if (on_step) on_step(step);
        continue;
      }
      TimelineOp op;
      op.group = &group;
      op.entry = &entry;
      op.end_us = entry.ended_us;
      on_op(op);
    }
  }

 private:
  void skip(int line, const std::string& why) {
    skipped_count_++;
    if (skipped_.size() < kSkippedShown) skipped_.push_back(path_ + ":" + std::to_string(line) + ": " + why);
  }

  std::string path_;
  RankInfo info_;
  std::vector<std::string> skipped_;
  size_t skipped_count_ = 0;
};

class DumpFile : public TimelineSource {
 public:
  explicit DumpFile(Dump dump) : dump_(std::move(dump)) {}
  const RankInfo& info() const override { return dump_.info; }
  const std::string& path() const override { return dump_.path; }
  const std::vector<std::string>& skipped() const override { return none_; }
  size_t skipped_count() const override { return 0; }

  void for_each(const std::function<void(const TimelineOp&)>& on_op,
                const std::function<void(const Step&)>& /*on_step*/) override {
    for (const GroupRecord& g : dump_.groups) {
      for (const Entry& e : g.entries) {
        TimelineOp op;
        op.group = &g.name;
        op.entry = &e;
        op.end_us = e.ended_us;
        if (e.ended_us == 0 && (e.state == State::kStarted || e.state == State::kQueued)) {  // still running
          op.unfinished = true;
          op.end_us = dump_.dump_time_us;
        }
        on_op(op);
      }
    }
  }

 private:
  Dump dump_;
  std::vector<std::string> none_;
};

}  // namespace

std::unique_ptr<TimelineSource> open_trace_file(const std::string& path, int expected_rank) {
  return std::make_unique<TraceFile>(path, expected_rank);
}

std::unique_ptr<TimelineSource> dump_source(Dump dump) { return std::make_unique<DumpFile>(std::move(dump)); }

}  // namespace ttrace
