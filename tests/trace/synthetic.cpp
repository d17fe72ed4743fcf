#include "synthetic.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace trace_test {

namespace {

std::string q(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string shapes_list(const std::vector<Shape>& list) {
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) {
    out += i > 0 ? ",[" : "[";
    for (size_t d = 0; d < list[i].size(); ++d) out += (d > 0 ? "," : "") + std::to_string(list[i][d]);
    out += "]";
  }
  return out + "]";
}

std::string ints(const std::vector<int>& list) {
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) out += (i > 0 ? "," : "") + std::to_string(list[i]);
  return out + "]";
}

void fill_group(SDump& d, SGroup& g, int group_rank, const std::vector<int>& members, int ops) {
  g.group_rank = group_rank;
  for (int64_t seq = 1; seq <= ops; ++seq) {
    SEntry e;
    e.seq = seq;
    if (g.name != "default_pg" || seq % 5 == 0) {
      e.op = "broadcast";
      e.root = 0;
      e.reduce_op = "";
      e.algorithm = "binomial";
    }
    const int64_t entry = true_entry(d.rank, seq);
    int64_t last = 0;
    for (int m : members) last = std::max(last, true_entry(m, seq));
    e.queued_us = entry - 5 + d.clock_offset_us;
    e.started_us = entry + d.clock_offset_us;
    e.ended_us = last + 60 + 3 * d.rank + d.clock_offset_us;
    g.entries.push_back(e);
  }
}

}  // namespace

std::string SEntry::fields_json() const {
  std::ostringstream o;
  o << "\"seq\": " << seq << ", \"op\": " << q(op) << ", \"p2p\": " << (p2p ? "true" : "false")
    << ", \"dtype\": " << q(dtype) << ", \"shapes\": " << shapes_list(shapes) << ", \"out_shapes\": " << shapes_list(out_shapes)
    << ", \"bytes\": " << bytes << ", \"root\": " << root << ", \"peer\": " << peer << ", \"reduce_op\": " << q(reduce_op)
    << ", \"engine\": " << q(engine) << ", \"algorithm\": " << q(algorithm) << ", \"state\": " << q(state)
    << ", \"queued_us\": " << queued_us << ", \"started_us\": " << started_us << ", \"ended_us\": " << ended_us
    << ", \"error\": " << q(error);
  return o.str();
}

std::string SStep::json() const {
  std::ostringstream o;
  o << "{\"step\": " << q(step) << ", \"group\": " << q(group) << ", \"seq\": " << seq << ", \"part\": " << part
    << ", \"op\": " << q(op) << ", \"engine\": " << q(engine) << ", \"bytes\": " << bytes << ", \"thread\": " << thread
    << ", \"state\": " << q(state);
  if (!error.empty()) o << ", \"error\": " << q(error);
  o << ", \"started_us\": " << started_us << ", \"ended_us\": " << ended_us << "}";
  return o.str();
}

SEntry* SGroup::at(int64_t seq) {
  for (SEntry& e : entries)
    if (!e.p2p && e.seq == seq) return &e;
  return nullptr;
}

SGroup& SDump::group(const std::string& name) {
  for (SGroup& g : groups)
    if (g.name == name) return g;
  throw std::runtime_error("no group " + name);
}

std::string SDump::json() const {
  std::ostringstream o;
  o << "{\n  \"version\": 1,\n  \"rank\": " << rank << ", \"world_size\": " << world_size << ", \"host\": " << q(host)
    << ", \"pid\": " << pid << ",\n  \"reason\": " << q(reason) << ",\n  \"detail\": " << q(detail)
    << ",\n  \"dump_time_us\": " << dump_time_us << ",\n  \"clock_offset_us\": " << clock_offset_us
    << ",\n  \"groups\": [";
  for (size_t i = 0; i < groups.size(); ++i) {
    const SGroup& g = groups[i];
    o << (i > 0 ? ",\n" : "\n") << "    {\n      \"name\": " << q(g.name) << ", \"desc\": " << q(g.name)
      << ", \"backend\": \"tdist\",\n      \"ranks\": " << ints(g.ranks) << ",\n      \"group_rank\": " << g.group_rank
      << ", \"capacity\": " << g.capacity << ", \"dropped\": " << g.dropped << ",\n      \"entries\": [";
    for (size_t k = 0; k < g.entries.size(); ++k)
      o << (k > 0 ? ",\n" : "\n") << "        {" << g.entries[k].fields_json() << "}";
    o << "\n      ]\n    }";
  }
  o << "\n  ]\n}\n";
  return o.str();
}

std::string SDump::trace_jsonl() const {
  std::ostringstream o;
  o << "{\"version\": 1, \"rank\": " << rank << ", \"world_size\": " << world_size << ", \"host\": " << q(host)
    << ", \"pid\": " << pid << ", \"clock_offset_us\": " << clock_offset_us << "}\n";
  std::vector<bool> written(steps.size(), false);
  for (const SGroup& g : groups) {
    for (const SEntry& e : g.entries) {
      if (e.state != "completed" && e.state != "failed") continue;
      for (size_t i = 0; i < steps.size(); ++i) {
        if (written[i] || e.p2p || steps[i].group != g.name || steps[i].seq != e.seq % (int64_t{1} << 20)) continue;
        o << steps[i].json() << "\n";
        written[i] = true;
      }
      o << "{\"group\": " << q(g.name) << ", " << e.fields_json() << "}\n";
    }
  }
  for (size_t i = 0; i < steps.size(); ++i)
    if (!written[i]) o << steps[i].json() << "\n";
  return o.str();
}

int64_t clock_offset(int rank) { return rank == 0 ? 0 : ((rank * 37) % 7 - 3) * 1000; }

int64_t true_entry(int rank, int64_t seq) { return kT0 + (seq - 1) * kStep + (rank * 7919 + seq * 104729) % 91; }

SJob healthy_job(int world_size, int ops) {
  SJob job;
  std::vector<int> all;
  for (int r = 0; r < world_size; ++r) all.push_back(r);
  for (int r = 0; r < world_size; ++r) {
    SDump d;
    d.rank = r;
    d.world_size = world_size;
    d.host = r < (world_size + 1) / 2 ? "node0" : "node1";
    d.pid = 4000 + r;
    d.clock_offset_us = clock_offset(r);
    d.dump_time_us = kT0 + (ops + 1) * kStep + 100 * r + d.clock_offset_us;
    SGroup g;
    g.name = "default_pg";
    g.ranks = all;
    fill_group(d, g, r, all, ops);
    d.groups.push_back(g);
    job.dumps.push_back(d);
  }
  return job;
}

void add_group(SJob& job, const std::string& name, const std::vector<int>& members, int ops) {
  for (size_t i = 0; i < members.size(); ++i) {
    SDump& d = job.rank(members[i]);
    SGroup g;
    g.name = name;
    g.ranks = members;
    fill_group(d, g, static_cast<int>(i), members, ops);
    d.groups.push_back(g);
  }
}

void make_slow(SJob& job, int rank, int64_t late_us) {
  for (SDump& d : job.dumps) {
    for (SEntry& e : d.group().entries) {
      if (d.rank == rank) {
        e.queued_us += late_us;
        e.started_us += late_us;
      }
      e.ended_us += late_us;
    }
  }
}

void make_hang(SJob& job, int64_t seq, int stuck) {
  const int64_t timeout_dump = true_entry(0, seq) + 30000000;
  for (SDump& d : job.dumps) {
    auto& entries = d.group().entries;
    const int64_t keep = d.rank == stuck ? seq - 1 : seq;
    entries.erase(std::remove_if(entries.begin(), entries.end(), [&](const SEntry& e) { return e.seq > keep; }),
                  entries.end());
    if (d.rank == stuck) {
      d.reason = "signal";
      d.detail = "";
      d.dump_time_us = timeout_dump + 1000000 + d.clock_offset_us;
      continue;
    }
    SEntry& e = *d.group().at(seq);
    e.state = "started";
    e.ended_us = 0;
    d.reason = "timeout";
    d.detail = "rank " + std::to_string(d.rank) + " in group default_pg: " + e.op + " #" + std::to_string(seq) +
               " timed out after 30000 ms";
    d.dump_time_us = timeout_dump + d.clock_offset_us;
  }
}

void make_failure(SJob& job, int64_t seq, const std::string& error) {
  for (SDump& d : job.dumps) {
    auto& entries = d.group().entries;
    entries.erase(std::remove_if(entries.begin(), entries.end(), [&](const SEntry& e) { return e.seq > seq; }),
                  entries.end());
    SEntry& e = *d.group().at(seq);
    e.state = "failed";
    e.ended_us = e.started_us + 1000;
    e.error = error;
    d.reason = "failure";
    d.detail = error;
    d.dump_time_us = e.ended_us + 10;
  }
}

void add_steps(SJob& job) {
  for (SDump& d : job.dumps) {
    const bool host_leader = d.rank == 0 || job.rank(d.rank - 1).host != d.host;
    for (const SEntry& e : d.group().entries) {
      if (e.op != "all_reduce" || e.state != "completed") continue;
      const int64_t third = (e.ended_us - e.started_us - 4) / 3;
      int64_t t = e.started_us + 2;
      int64_t part = 0;
      auto add = [&](const char* where, const char* op, const char* engine) {
        SStep s;
        s.step = where;
        s.seq = e.seq;
        s.part = part++;
        s.op = op;
        s.engine = engine;
        s.bytes = e.bytes;
        s.started_us = t;
        s.ended_us = t + third;
        d.steps.push_back(s);
      };
      add("inside host", "reduce", "shm");
      t += third;
      if (host_leader) add("among hosts", "all_reduce", "transport");
      t += third;
      add("inside host", "broadcast", "shm");
    }
  }
}

void make_pipelined(SJob& job, int64_t seq) {
  for (SDump& d : job.dumps) {
    const SEntry& e = *d.group().at(seq);
    d.steps.erase(std::remove_if(d.steps.begin(), d.steps.end(), [&](const SStep& s) { return s.seq == seq; }),
                  d.steps.end());
    const int64_t u = (e.ended_us - e.started_us - 4) / 4;
    const int64_t t = e.started_us + 2;
    auto add = [&](int64_t part, int64_t slot, int64_t thread) {
      SStep s;
      s.seq = seq;
      s.part = part;
      s.thread = thread;
      const int64_t kind = part % 3;
      s.step = kind == 1 ? "among hosts" : "inside host";
      s.op = kind == 0 ? "reduce" : kind == 1 ? "all_reduce" : "broadcast";
      s.engine = kind == 1 ? "transport" : "shm";
      s.bytes = e.bytes / 2;
      s.started_us = t + slot * u;
      s.ended_us = t + (slot + 1) * u;
      d.steps.push_back(s);
    };
    add(0, 0, 0);
    add(1, 1, 1);
    add(3, 1, 0);
    add(2, 2, 0);
    add(4, 2, 1);
    add(5, 3, 0);
  }
}

void write_file(const std::string& dir, const std::string& name, const std::string& text) {
  std::ofstream f(dir + "/" + name, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + dir + "/" + name);
}

void SJob::write_dumps(const std::string& dir, const std::string& prefix) const {
  for (const SDump& d : dumps) write_file(dir, prefix + std::to_string(d.rank) + ".json", d.json());
}

void SJob::write_traces(const std::string& dir) const {
  for (const SDump& d : dumps) write_file(dir, "tdist_trace_" + std::to_string(d.rank) + ".jsonl", d.trace_jsonl());
}

bool write_scenario(const std::string& name, const std::string& dir) {
  if (name == "healthy") {
    healthy_job().write_dumps(dir);
  } else if (name == "mismatch_op" || name == "mismatch_shape" || name == "mismatch_root") {
    // Collective #10 is a broadcast from group rank 0; rank 3 calls something else, and every
    // rank is still inside #10 when they time out.
    SJob job = healthy_job(8, 10);
    make_hang(job, 10, -1);
    SEntry& e = *job.rank(3).group().at(10);
    if (name == "mismatch_op") e.op = "all_reduce", e.root = -1, e.reduce_op = "sum";
    if (name == "mismatch_shape") e.shapes = {{1024}}, e.bytes = 4096;
    if (name == "mismatch_root") e.root = 1;
    job.write_dumps(dir);
  } else if (name == "hang") {
    SJob job = healthy_job();
    make_hang(job, 13, 5);
    job.write_dumps(dir);
  } else if (name == "missing") {
    SJob job = healthy_job();
    make_hang(job, 13, -1);
    job.dumps.erase(job.dumps.begin() + 5);
    job.write_dumps(dir);
  } else if (name == "slow") {
    SJob job = healthy_job();
    make_slow(job, 3, 4000);
    job.write_dumps(dir);
  } else if (name == "failed") {
    SJob job = healthy_job();
    make_failure(job, 9, "rank 0 in group default_pg: all_reduce #9 failed: connection to rank 1 at 10.0.0.2:41084 lost: closed by the peer");
    job.write_dumps(dir);
  } else if (name == "subgroups") {
    SJob job = healthy_job();
    add_group(job, "pg1", {0, 2, 4, 6}, 6);
    add_group(job, "pg2", {1, 3, 5, 7}, 6);
    job.write_dumps(dir);
  } else if (name == "timeline") {
    SJob job = healthy_job(4, 12);
    add_group(job, "pg1", {0, 2}, 5);
    job.write_traces(dir);
    std::ofstream(dir + "/tdist_trace_2.jsonl", std::ios::app) << "{\"group\": \"default_pg\", \"seq\": 13, \"op\": \"all_re";
  } else if (name == "steps") {
    SJob job = healthy_job(4, 12);
    add_steps(job);
    make_pipelined(job, 12);
    job.write_traces(dir);
  } else {
    return false;
  }
  return true;
}

}  // namespace trace_test
