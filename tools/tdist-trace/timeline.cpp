#include "timeline.h"

#include <algorithm>
#include <set>

#include "json_write.h"
#include "text.h"
#include "timeline_lanes.h"

namespace ttrace {

namespace {

class EventWriter {
 public:
  explicit EventWriter(std::FILE* out) : out_(out) {}
  void event(const std::string& json) {
    buf_ += first_ ? "\n" : ",\n";
    first_ = false;
    buf_ += json;
    ++count_;
    if (buf_.size() > (1 << 16)) flush();
  }
  void raw(const std::string& s) {
    buf_ += s;
    flush();
  }
  void flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), out_) != buf_.size())
      throw InputError("cannot write the merged trace (disk full?)");
    buf_.clear();
  }
  size_t count() const { return count_; }

 private:
  std::FILE* out_;
  std::string buf_;
  bool first_ = true;
  size_t count_ = 0;
};

std::string str(const std::string& s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

std::string metadata(const char* name, int pid, int64_t tid, const std::string& arg_name, const std::string& arg_json) {
  std::string e = "{\"name\":\"" + std::string(name) + "\",\"ph\":\"M\",\"pid\":" + std::to_string(pid);
  if (tid >= 0) e += ",\"tid\":" + std::to_string(tid);
  return e + ",\"args\":{\"" + arg_name + "\":" + arg_json + "}}";
}

std::string args_of(const Entry& e, bool unfinished) {
  std::string a = "{\"seq\":" + std::to_string(e.seq) + ",\"bytes\":" + std::to_string(e.bytes);
  auto text = [&](const char* key, const std::string& v) {
    if (!v.empty()) a += ",\"" + std::string(key) + "\":" + str(v);
  };
  text("dtype", e.dtype);
  if (!e.shapes.empty()) a += ",\"shapes\":" + str(shapes_text(e.shapes));
  if (!e.out_shapes.empty()) a += ",\"out_shapes\":" + str(shapes_text(e.out_shapes));
  text("engine", e.engine);
  text("algorithm", e.algorithm);
  if (e.root >= 0) a += ",\"root\":" + std::to_string(e.root);
  if (e.peer >= 0) a += ",\"peer\":" + std::to_string(e.peer);
  text("reduce_op", e.reduce_op);
  a += ",\"state\":" + str(unfinished ? std::string("unfinished at dump") : std::string(state_name(e.state)));
  if (e.queued_us != 0 && e.started_us >= e.queued_us)
    a += ",\"queued_wait_us\":" + std::to_string(e.started_us - e.queued_us);
  text("error", e.error);
  return a + "}";
}

std::string step_args(const Step& s) {
  std::string a = "{\"seq\":" + std::to_string(s.seq) + ",\"part\":" + std::to_string(s.part) +
                  ",\"bytes\":" + std::to_string(s.bytes);
  if (!s.engine.empty()) a += ",\"engine\":" + str(s.engine);
  if (!s.state.empty()) a += ",\"state\":" + str(s.state);
  if (!s.error.empty()) a += ",\"error\":" + str(s.error);
  return a + "}";
}

std::string slice(const std::string& name, const char* cat, int pid, int64_t tid, int64_t ts, int64_t dur,
                  const std::string& args, const char* cname) {
  std::string e = "{\"name\":" + str(name) + ",\"cat\":\"" + cat + "\",\"ph\":\"X\",\"pid\":" + std::to_string(pid) +
                  ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + std::to_string(ts) +
                  ",\"dur\":" + std::to_string(std::max<int64_t>(dur, 0));
  if (cname != nullptr) e += ",\"cname\":\"" + std::string(cname) + "\"";
  return e + ",\"args\":" + args + "}";
}

}  // namespace

TimelineStats write_timeline(std::vector<std::unique_ptr<TimelineSource>>& sources, std::FILE* out,
                             const TimelineOptions& options) {
  TimelineStats stats;
  // Pass 1: the earliest time on rank 0's clock, and the lanes in order of appearance.
  int64_t origin = INT64_MAX;
  LaneLayout lanes;
  for (auto& src : sources) {
    const int64_t offset = src->info().clock_offset_us;
    src->for_each(
        [&](const TimelineOp& op) {
          const Entry& e = *op.entry;
          const int64_t t = options.queued_slices && e.queued_us != 0 ? e.queued_us : e.entered_us();
          if (t != 0) origin = std::min(origin, t - offset);
          lanes.note_group(*op.group);
        },
        [&](const Step& s) {
          if (s.started_us == 0) return;  // not drawn
          origin = std::min(origin, s.started_us - offset);
          lanes.note_step_thread(s.group, s.thread);
        });
  }
  if (origin == INT64_MAX) origin = 0;
  lanes.number();
  stats.time_origin_us = origin;

  // Pass 2: the events.
  EventWriter w(out);
  w.raw("{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"tool\":\"tdist-trace\",\"time_origin_us\":" +
        std::to_string(origin) +
        ",\"clock\":\"microseconds of rank 0's CLOCK_REALTIME minus time_origin_us; each rank's clock_offset_us "
        "subtracted\"},\n\"traceEvents\":[");
  std::set<int> ranks_seen;
  for (auto& src : sources) {
    const RankInfo& info = src->info();
    const int pid = info.rank;
    if (ranks_seen.insert(pid).second) {
      const std::string name = "rank " + std::to_string(info.rank) + (info.host.empty() ? "" : " (" + info.host + ")");
      w.event(metadata("process_name", pid, -1, "name", str(name)));
      w.event(metadata("process_sort_index", pid, -1, "sort_index", std::to_string(info.rank)));
    }
    std::set<int64_t> threads;
    auto named = [&](int64_t tid, const std::string& name) {
      if (threads.insert(tid).second) {
        w.event(metadata("thread_name", pid, tid, "name", str(name)));
        w.event(metadata("thread_sort_index", pid, tid, "sort_index", std::to_string(tid)));
      }
      return tid;
    };
    auto lane = [&](const std::string& group, OpLane l) {
      const char* suffix = l == OpLane::kCollectives ? "" : l == OpLane::kP2p ? " p2p" : " queue";
      return named(lanes.op_lane(group, l), group + suffix);
    };
    const int64_t offset = info.clock_offset_us;
    auto on_op = [&](const TimelineOp& op) {
      const Entry& e = *op.entry;
      // The operation's own slice: from its start (a failed one that never started: from its
      // issue) to its end, or to the dump for one still running then.
      const int64_t start = e.started_us != 0 ? e.started_us : e.state == State::kFailed ? e.queued_us : 0;
      int64_t queue_end = e.started_us;
      if (queue_end == 0 && e.state == State::kQueued && op.unfinished) queue_end = op.end_us;
      const bool queue_slice = options.queued_slices && e.queued_us != 0 && queue_end > e.queued_us;
      if (start == 0 && !queue_slice) return;
      ++stats.operations;
      const std::string label = e.op + " #" + std::to_string(e.seq);
      if (start != 0) {
        std::string name = label;
        const char* cname = nullptr;
        if (op.unfinished) {
          name += " (unfinished)";
          cname = "bad";
        } else if (e.state == State::kFailed) {
          name += " (failed)";
          cname = "terrible";
        }
        const int64_t end = op.end_us != 0 ? op.end_us : start;
        const int64_t tid = lane(*op.group, e.p2p ? OpLane::kP2p : OpLane::kCollectives);
        w.event(slice(name, e.p2p ? "p2p" : "collective", pid, tid, start - offset - origin, end - start,
                      args_of(e, op.unfinished), cname));
      }
      if (queue_slice)
        w.event(slice(label + " queued", "queued", pid, lane(*op.group, OpLane::kQueue), e.queued_us - offset - origin,
                      queue_end - e.queued_us, "{\"seq\":" + std::to_string(e.seq) + "}", nullptr));
    };
    auto on_step = [&](const Step& s) {
      if (s.started_us == 0) return;
      ++stats.steps;
      const std::string lane_name =
          s.group + " steps" + (s.thread == 0 ? std::string() : " (thread " + std::to_string(s.thread) + ")");
      const int64_t tid = named(lanes.step_lane(s.group, s.thread), lane_name);
      const bool failed = s.state == "failed";
      const std::string name = (s.op.empty() ? s.where : s.op + ", " + s.where) + (failed ? " (failed)" : "");
      const int64_t end = s.ended_us != 0 ? s.ended_us : s.started_us;
      w.event(slice(name, "step", pid, tid, s.started_us - offset - origin, end - s.started_us, step_args(s),
                    failed ? "terrible" : nullptr));
    };
    src->for_each(on_op, on_step);
    stats.skipped_lines += src->skipped_count();
  }
  w.raw("\n]}\n");
  w.flush();
  stats.ranks = ranks_seen.size();
  stats.groups = lanes.groups();
  stats.events = w.count();
  return stats;
}

}  // namespace ttrace
