#include "output.h"

#include <cmath>
#include <cstdarg>
#include <cstring>

namespace tbench {

namespace {

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

std::string time_str(double us) {
  if (us >= 10000.0) return fmt("%7.0f", us);
  if (us >= 100.0) return fmt("%7.1f", us);
  return fmt("%7.2f", us);
}

std::string wrong_str(int64_t w) { return w < 0 ? "N/A" : std::to_string(w); }

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      o += '\\';
      o += ch;
    } else if (c < 0x20) {
      o += fmt("\\u%04x", c);
    } else {
      o += ch;
    }
  }
  return o;
}

// A setting whose value is a secret (the job token: whoever has it may join
// the job) shows only that it is set: benchmark output is pasted into bug
// reports and kept with results.
bool secret_name(const std::string& name) {
  for (const char* tail : {"TOKEN", "SECRET", "PASSWORD"})
    if (name.size() >= std::strlen(tail) && name.compare(name.size() - std::strlen(tail), std::string::npos, tail) == 0)
      return true;
  return false;
}

// "NAME=value" as shown: secrets as "NAME=<set>".
std::string shown_setting(const std::string& kv) {
  const size_t eq = kv.find('=');
  return eq != std::string::npos && secret_name(kv.substr(0, eq)) ? kv.substr(0, eq) + "=<set>" : kv;
}

std::string redop_of(const Record& r) { return r.reducing ? std::string(op_name(r.op)) : "none"; }

std::string sizes_line(const Options& o) {
  std::string range;
  if (!o.sizes.empty()) {
    range = "sizes:";
    for (size_t i = 0; i < o.sizes.size(); ++i)
      range += fmt("%s%llu", i ? "," : " ", static_cast<unsigned long long>(o.sizes[i]));
  } else {
    std::string step = o.step_factor > 1.0 ? fmt("%g(factor)", o.step_factor)
                                           : fmt("%llu(bytes)", static_cast<unsigned long long>(o.step_bytes));
    range = fmt("minBytes %llu maxBytes %llu step: %s", static_cast<unsigned long long>(o.min_bytes),
                static_cast<unsigned long long>(o.max_bytes), step.c_str());
  }
  return range + fmt(" warmup iters: %d iters: %d cap: %llu bytes/loop validation: %d", o.warmup, o.iters,
                     static_cast<unsigned long long>(o.cap_bytes), o.check ? 1 : 0);
}

class NullReporter final : public Reporter {
 public:
  void begin(const RunInfo&) override {}
  void section(Coll, Dt, const std::string&) override {}
  void row(const Record&) override {}
  void note(const std::string&) override {}
  void end(double, int64_t, bool) override {}
};

class TableReporter final : public Reporter {
 public:
  explicit TableReporter(std::FILE* out) : out_(out) {}

  void begin(const RunInfo& info) override {
    info_ = info;
    p("# %s (%s): nRanks %d %s\n", info.program.c_str(), info.library.c_str(), info.world_size,
      sizes_line(info.options).c_str());
    p("#\n# Ranks\n");
    for (size_t r = 0; r < info.ranks.size(); ++r) p("#  Rank %2zu %s\n", r, info.ranks[r].c_str());
    p("#\n# Settings:%s\n", info.settings.empty() ? " (none set)" : "");
    for (const auto& s : info.settings) p("#   %s\n", shown_setting(s).c_str());
    for (const auto& n : info.notes) p("# %s\n", n.c_str());
    std::fflush(out_);
  }

  void section(Coll c, Dt d, const std::string& redop) override {
    const bool out = info_.options.places != Places::InOnly;
    const bool in = info_.options.places != Places::OutOnly;
    p("#\n# Collective: %s  type: %s  redop: %s\n#\n", std::string(coll_name(c)).c_str(),
      std::string(dt_name(d)).c_str(), redop.c_str());
    std::string l1 = fmt("#%51s", ""), l2 = fmt("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root"),
                l3 = fmt("#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    auto group = [&](const char* name) {
      l1 += fmt("  %-31s", fmt("%*s", 16 + static_cast<int>(std::string(name).size()) / 2, name).c_str());
      l2 += fmt("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
      l3 += fmt("  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
    };
    if (out) group("out-of-place");
    if (in) group("in-place");
    p("%s\n%s\n%s\n", l1.c_str(), l2.c_str(), l3.c_str());
    std::fflush(out_);
  }

  void row(const Record& r) override {
    std::string line = fmt("%12llu  %12zu  %8s  %6s  %6d", static_cast<unsigned long long>(r.bytes), r.count,
                           std::string(dt_name(r.dt)).c_str(), redop_of(r).c_str(), r.root);
    auto cell = [&](const Cell& c) {
      if (!c.measured) {
        line += fmt("  %7s  %6s  %6s  %6s", "n/a", "n/a", "n/a", "");
      } else {
        line += fmt("  %7s  %6.2f  %6.2f  %6s", time_str(c.time_us).c_str(), c.algbw, c.busbw,
                    wrong_str(c.wrong).c_str());
      }
    };
    if (info_.options.places != Places::InOnly) cell(r.out);
    if (info_.options.places != Places::OutOnly) cell(r.in);
    p("%s\n", line.c_str());
    std::fflush(out_);
  }

  void note(const std::string& line) override {
    p("# %s\n", line.c_str());
    std::fflush(out_);
  }

  void end(double avg_busbw, int64_t wrong, bool checked) override {
    p("#\n");
    if (checked) p("# Wrong elements       : %lld %s\n", static_cast<long long>(wrong), wrong == 0 ? "OK" : "ERROR");
    p("# Avg bus bandwidth    : %g \n#\n", avg_busbw);
    std::fflush(out_);
  }

 private:
  void p(const char* f, ...) __attribute__((format(printf, 2, 3))) {
    va_list ap;
    va_start(ap, f);
    std::vfprintf(out_, f, ap);
    va_end(ap);
  }
  std::FILE* out_;
  RunInfo info_;
};

std::string num(double v) { return fmt("%.6g", v); }

class CsvReporter final : public Reporter {
 public:
  explicit CsvReporter(std::FILE* out) : out_(out) {}
  void begin(const RunInfo& info) override {
    info_ = info;
    std::fprintf(out_,
                 "library,collective,size,count,type,redop,root,world_size,warmup,iters,"
                 "oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong\n");
    std::fflush(out_);
  }
  void section(Coll, Dt, const std::string&) override {}
  void row(const Record& r) override {
    auto cell = [&](const Cell& c) {
      if (!c.measured) return std::string(",,,");
      return num(c.time_us) + "," + num(c.algbw) + "," + num(c.busbw) + "," + (c.wrong < 0 ? "" : std::to_string(c.wrong));
    };
    std::fprintf(out_, "%s,%s,%llu,%zu,%s,%s,%d,%d,%d,%d,%s,%s\n", library_name().c_str(),
                 std::string(coll_name(r.coll)).c_str(), static_cast<unsigned long long>(r.bytes), r.count,
                 std::string(dt_name(r.dt)).c_str(), redop_of(r).c_str(), r.root, info_.world_size, r.warmup, r.iters,
                 cell(r.out).c_str(), cell(r.in).c_str());
    std::fflush(out_);
  }
  void note(const std::string& line) override { std::fprintf(stderr, "# %s\n", line.c_str()); }
  void end(double, int64_t, bool) override {}

 private:
  std::string library_name() const { return info_.library.substr(0, info_.library.find(' ')); }
  std::FILE* out_;
  RunInfo info_;
};

class JsonReporter final : public Reporter {
 public:
  explicit JsonReporter(std::FILE* out) : out_(out) {}
  void begin(const RunInfo& info) override {
    const Options& o = info.options;
    std::string s = "{\"program\":\"" + json_escape(info.program) + "\",\"library\":\"" + json_escape(info.library) +
                    "\",\"world_size\":" + std::to_string(info.world_size) + ",\"ranks\":[";
    for (size_t i = 0; i < info.ranks.size(); ++i) s += (i ? ",\"" : "\"") + json_escape(info.ranks[i]) + "\"";
    s += "],\"settings\":{";
    for (size_t i = 0; i < info.settings.size(); ++i) {
      const std::string kv = shown_setting(info.settings[i]);
      auto eq = kv.find('=');
      s += (i ? ",\"" : "\"") + json_escape(kv.substr(0, eq)) + "\":\"" +
           json_escape(eq == std::string::npos ? "" : kv.substr(eq + 1)) + "\"";
    }
    s += fmt("},\"options\":{\"minbytes\":%llu,\"maxbytes\":%llu,\"stepfactor\":%g,\"warmup_iters\":%d,\"iters\":%d,"
             "\"cap_bytes\":%llu,\"check\":%s},\n\"results\":[",
             static_cast<unsigned long long>(o.min_bytes), static_cast<unsigned long long>(o.max_bytes), o.step_factor,
             o.warmup, o.iters, static_cast<unsigned long long>(o.cap_bytes), o.check ? "true" : "false");
    std::fputs(s.c_str(), out_);
    std::fflush(out_);
  }
  void section(Coll, Dt, const std::string&) override {}
  void row(const Record& r) override {
    auto cell = [&](const Cell& c) {
      if (!c.measured) return std::string("null");
      return "{\"time_us\":" + num(c.time_us) + ",\"algbw\":" + num(c.algbw) + ",\"busbw\":" + num(c.busbw) +
             ",\"wrong\":" + (c.wrong < 0 ? std::string("null") : std::to_string(c.wrong)) + "}";
    };
    std::string s = fmt("%s\n{\"collective\":\"%s\",\"size\":%llu,\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d,"
                        "\"warmup\":%d,\"iters\":%d,",
                        first_ ? "" : ",", std::string(coll_name(r.coll)).c_str(),
                        static_cast<unsigned long long>(r.bytes), r.count, std::string(dt_name(r.dt)).c_str(),
                        redop_of(r).c_str(), r.root, r.warmup, r.iters);
    s += "\"out_of_place\":" + cell(r.out) + ",\"in_place\":" + cell(r.in) + "}";
    first_ = false;
    std::fputs(s.c_str(), out_);
    std::fflush(out_);
  }
  void note(const std::string& line) override { notes_.push_back(line); }
  void end(double avg, int64_t wrong, bool checked) override {
    std::string s = "\n],\"notes\":[";
    for (size_t i = 0; i < notes_.size(); ++i) s += (i ? ",\"" : "\"") + json_escape(notes_[i]) + "\"";
    s += "],\"avg_busbw\":" + num(avg) + ",\"wrong\":" + (checked ? std::to_string(wrong) : std::string("null")) + "}\n";
    std::fputs(s.c_str(), out_);
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  bool first_ = true;
  std::vector<std::string> notes_;
};

}  // namespace

std::unique_ptr<Reporter> make_reporter(Format format, std::FILE* out) {
  if (!out) return std::make_unique<NullReporter>();
  switch (format) {
    case Format::Table: return std::make_unique<TableReporter>(out);
    case Format::Csv: return std::make_unique<CsvReporter>(out);
    case Format::Json: return std::make_unique<JsonReporter>(out);
  }
  return std::make_unique<NullReporter>();
}

void compute_bandwidth(Cell& cell, Coll c, uint64_t bytes, int world_size) {
  const double secs = cell.time_us * 1e-6;
  cell.algbw = secs > 0 ? static_cast<double>(bytes) / 1e9 / secs : 0;
  cell.busbw = cell.algbw * busbw_factor(c, world_size);
}

}  // namespace tbench
