#include "dump_reader.h"

#include <set>

#include "fields.h"
#include "input_files.h"
#include "text.h"

namespace ttrace {

namespace {

RankInfo read_rank_info(const Fields& f) {
  RankInfo info;
  info.rank = static_cast<int>(f.integer("rank", 0, kMaxRanks - 1));
  info.world_size = f.integer_or("world_size", 0, 1, kMaxRanks);
  if (info.world_size != 0 && info.rank >= info.world_size)
    f.fail("'rank' " + std::to_string(info.rank) + " is not below 'world_size' " + std::to_string(info.world_size));
  info.host = f.text_or("host", "");
  info.pid = f.integer_or("pid", 0, 0, kMaxTime);
  info.clock_offset_us = f.integer_or("clock_offset_us", 0, -kMaxClockOffset, kMaxClockOffset);
  return info;
}

void check_version(const Fields& f, const JsonValue& root) {
  const JsonValue* v = root.find("version");
  if (v != nullptr && v->is_string())
    f.fail("'version' is the string \"" + printable(v->as_string(), 20) +
               "\": a dump of PyTorch's own flight recorder? tdist-trace reads tdist's dumps (version 1); "
               "torch's analyzer (fr_trace) reads torch's",
           v);
  const int64_t version = f.integer("version", 0, kMaxTime);
  if (version != kDumpVersion)
    f.fail("'version' is " + std::to_string(version) + "; this tdist-trace reads version " +
           std::to_string(kDumpVersion));
}

GroupRecord read_group(const JsonValue& g, const std::string& path, size_t index, const RankInfo& info) {
  const Fields f(g, path, "groups[" + std::to_string(index) + "]");
  GroupRecord group;
  group.line = g.line();
  group.name = f.text("name");
  if (group.name.empty()) f.fail("'name' is empty");
  group.desc = f.text_or("desc", "");
  group.backend = f.text_or("backend", "");
  std::set<int> seen;
  for (const JsonValue& r : f.array("ranks").items()) {
    if (!r.is_int() || r.as_int() < 0 || r.as_int() >= kMaxRanks ||
        (info.world_size != 0 && r.as_int() >= info.world_size))
      f.fail("'ranks' holds something that is not a rank below the world size", &r);
    if (!seen.insert(static_cast<int>(r.as_int())).second)
      f.fail("'ranks' names rank " + std::to_string(r.as_int()) + " twice", &r);
    group.ranks.push_back(static_cast<int>(r.as_int()));
  }
  if (seen.count(info.rank) == 0)
    f.fail("'ranks' does not include this dump's own rank " + std::to_string(info.rank));
  group.group_rank = f.integer_or("group_rank", -1, -1, kMaxRanks - 1);
  group.capacity = f.integer_or("capacity", -1, 0, kMaxTime);
  group.dropped = f.integer_or("dropped", 0, 0, kMaxTime);
  const JsonValue& entries = f.array("entries");
  group.entries.reserve(entries.items().size());
  int64_t last_seq[2] = {-1, -1};  // collectives, p2p
  for (size_t i = 0; i < entries.items().size(); ++i) {
    const JsonValue& e = entries.items()[i];
    const Fields ef(e, path, f.place(".entries[" + std::to_string(i) + "]"));
    Entry entry;
    read_entry(ef, e, entry);
    int64_t& last = last_seq[entry.p2p ? 1 : 0];
    if (entry.seq <= last)
      ef.fail("'seq' " + std::to_string(entry.seq) + " does not increase (the " +
              (entry.p2p ? std::string("point-to-point") : std::string("collective")) + " before it had " +
              std::to_string(last) + ")");
    last = entry.seq;
    group.entries.push_back(std::move(entry));
  }
  return group;
}

}  // namespace

Dump parse_dump(const std::string& path, const std::string& text) {
  JsonValue root;
  try {
    root = parse_json(text);
  } catch (const JsonError& e) {
    throw InputError(path + ":" + std::to_string(e.line()) + ":" + std::to_string(e.column()) + ": " + e.what());
  }
  const Fields f(root, path, "the dump");
  check_version(f, root);
  Dump dump;
  dump.path = path;
  dump.info = read_rank_info(f);
  dump.reason = f.text_or("reason", "");
  dump.detail = f.text_or("detail", "");
  dump.dump_time_us = f.integer_or("dump_time_us", 0, 0, kMaxTime);
  const JsonValue& groups = f.array("groups");
  std::set<std::string> names;
  for (size_t i = 0; i < groups.items().size(); ++i) {
    GroupRecord g = read_group(groups.items()[i], path, i, dump.info);
    if (!names.insert(g.name).second)
      throw InputError(file_line(path, g.line) + "groups[" + std::to_string(i) + "]: the group name \"" + printable(g.name, 80) +
                       "\" appears twice in this dump");
    dump.groups.push_back(std::move(g));
  }
  return dump;
}

Dump read_dump(const std::string& path) {
  return parse_dump(path, read_file_bounded(path, kMaxDumpBytes));
}

}  // namespace ttrace
