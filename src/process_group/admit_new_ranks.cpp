// Regrow: processes that join a running job (replacements for dead ranks)
// and the members that admit them form a new default group, without
// restarting the members (docs/fault_tolerance.md).
//
// The joiners and the members meet in the job's root store (the launcher's,
// or the one init_process_group made), under "tdist/join/" and "tdist/grow/":
// a joiner does not know the members' group names, only the store.
//   joiner:  queue_push(join/queue, "<launch rank>:<nonce>"), then waits for join/<nonce>
//   rank 0:  pops the queue, takes a number (grow/count), broadcasts the list
//            to the members, and writes each joiner its place in join/<nonce>
//   all:     form the new group under grow/<number> (form_changed_group)
#include <algorithm>
#include <cstdio>

#include "tdist/distributed.h"
#include "tdist/errors.h"
#include "process_group/membership.h"
#include "process_group/world.h"
#include "util/job_token.h"

namespace tdist {

namespace {

constexpr const char* kQueue = "tdist/join/queue";

std::string join_key(const std::string& nonce) { return "tdist/join/" + nonce; }

std::shared_ptr<Store> grow_keys(const std::shared_ptr<Store>& root, long long number) {
  return std::make_shared<PrefixStore>("tdist/grow/" + std::to_string(number), root);
}

bool digits(const std::string& s, size_t max_len = 9) {
  return !s.empty() && s.size() <= max_len && s.find_first_not_of("0123456789") == std::string::npos;
}

struct Joiner {
  int launch_rank;
  std::string nonce;
};

// "<launch rank>:<nonce>" as a joiner pushed it; false for anything else.
bool parse_joiner(const std::string& item, Joiner& out) {
  const size_t colon = item.find(':');
  if (colon == std::string::npos || !digits(item.substr(0, colon))) return false;
  out.launch_rank = std::stoi(item.substr(0, colon));
  out.nonce = item.substr(colon + 1);
  return out.nonce.size() == 32 && out.nonce.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// What rank 0 tells a joiner: its place and the group's settings.
struct Admission {
  long long number = 0;
  int rank = 0, size = 0;
  std::string group_name, backend;
  long long timeout_ms = 0;
  std::vector<int> launch_ranks;
};

std::string encode(const Admission& a) {
  std::string launch;
  for (size_t i = 0; i < a.launch_ranks.size(); ++i) launch += (i ? "," : "") + std::to_string(a.launch_ranks[i]);
  return std::to_string(a.number) + "\n" + std::to_string(a.rank) + "\n" + std::to_string(a.size) + "\n" +
         a.group_name + "\n" + a.backend + "\n" + std::to_string(a.timeout_ms) + "\n" + launch;
}

Admission decode(const std::string& value) {
  std::vector<std::string> f;
  size_t i = 0;
  while (f.size() < 6) {
    const size_t nl = value.find('\n', i);
    if (nl == std::string::npos) break;
    f.push_back(value.substr(i, nl - i));
    i = nl + 1;
  }
  f.push_back(value.substr(std::min(i, value.size())));
  const auto bad = [&] {
    return DistError("init_process_group(join_running_job): the store holds a malformed admission '" +
                     value.substr(0, 80) + "'");
  };
  if (f.size() != 7 || !digits(f[0], 15) || !digits(f[1]) || !digits(f[2]) || !digits(f[5], 15)) throw bad();
  Admission a;
  a.number = std::stoll(f[0]);
  a.rank = std::stoi(f[1]);
  a.size = std::stoi(f[2]);
  a.group_name = f[3];
  a.backend = f[4];
  a.timeout_ms = std::stoll(f[5]);
  size_t j = 0;
  while (j <= f[6].size() && !f[6].empty()) {
    size_t comma = f[6].find(',', j);
    if (comma == std::string::npos) comma = f[6].size();
    const std::string item = f[6].substr(j, comma - j);
    if (!digits(item)) throw bad();
    a.launch_ranks.push_back(std::stoi(item));
    j = comma + 1;
  }
  if (a.rank >= a.size || static_cast<int>(a.launch_ranks.size()) != a.size) throw bad();
  return a;
}

ProcessGroupOptions options_of(const Admission& a, const std::shared_ptr<Store>& death_records) {
  ProcessGroupOptions o;
  o.backend = a.backend;
  o.timeout = std::chrono::milliseconds(a.timeout_ms);
  o.group_name = a.group_name;
  o.group_desc = "default:grown";
  o.launch_ranks = a.launch_ranks;
  o.death_records = death_records;
  return o;
}

}  // namespace

int admit_new_ranks() {
  Group g = resolve_group(nullptr, "admit_new_ranks");
  std::shared_ptr<Store> root;
  {
    std::lock_guard<std::mutex> lock(world().mu);
    root = world().store;
  }
  if (!root) throw DistError("admit_new_ranks: the default group has no store that a new process could reach");
  std::vector<std::string> list(1);
  if (g->rank() == 0) {
    std::string joiners;
    while (root->queue_len(kQueue) > 0) {
      Joiner j;
      const std::string item = root->queue_pop(kQueue, false);
      if (parse_joiner(item, j)) joiners += item + ";";
    }
    if (!joiners.empty()) list[0] = std::to_string(root->add("tdist/grow/count", 1)) + "|" + joiners;
  }
  broadcast_object_list(list, 0, nullptr);
  if (list[0].empty()) return 0;

  const size_t bar = list[0].find('|');
  Admission a;
  a.number = std::stoll(list[0].substr(0, bar));
  std::vector<Joiner> joiners;
  for (size_t i = bar + 1; i < list[0].size();) {
    const size_t semi = list[0].find(';', i);
    if (semi == std::string::npos) break;  // rank 0 ends every entry with ';'
    Joiner j;
    if (parse_joiner(list[0].substr(i, semi - i), j)) joiners.push_back(j);
    i = semi + 1;
  }
  a.size = g->size() + static_cast<int>(joiners.size());
  a.group_name = "default_pg:grown" + std::to_string(a.number);
  a.backend = g->backend_name();
  a.timeout_ms = g->timeout().count();
  a.launch_ranks = g->launch_ranks();
  for (const Joiner& j : joiners) a.launch_ranks.push_back(j.launch_rank);
  if (g->rank() == 0) {
    for (size_t i = 0; i < joiners.size(); ++i) {
      Admission theirs = a;
      theirs.rank = g->size() + static_cast<int>(i);
      root->set(join_key(joiners[i].nonce), encode(theirs));
    }
  }
  ProcessGroupOptions options = options_of(a, g->death_records());
  options.device_id = g->device_id();
  auto keys = grow_keys(root, a.number);
  std::string why;
  Group grown = form_changed_group(keys, g->rank(), a.size, options, Deadline::after(g->timeout()), why);
  if (!grown)
    throw DistBackendError("rank " + std::to_string(g->rank()) + ": admit_new_ranks of " +
                           std::to_string(joiners.size()) + " new ranks was " + why +
                           "; the default group is as it was");
  install_default_group(grown, keys);
  std::lock_guard<std::mutex> lock(world().mu);
  world().joined_running_job = false;
  return static_cast<int>(joiners.size());
}

bool joined_running_job() {
  std::lock_guard<std::mutex> lock(world().mu);
  return world().joined_running_job;
}

void join_running_job(const std::shared_ptr<Store>& root, int launch_rank, std::chrono::milliseconds timeout,
                      const std::optional<Device>& device_id, const std::shared_ptr<Store>& death_records) {
  const auth::Nonce n = auth::random_nonce();
  char hex[65];
  for (size_t i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", static_cast<unsigned>(n[i]));
  const std::string nonce(hex, 32);
  root->queue_push(kQueue, std::to_string(launch_rank) + ":" + nonce);
  try {
    root->wait({join_key(nonce)}, timeout);
  } catch (const DistError& e) {
    throw DistError("init_process_group(join_running_job): launch rank " + std::to_string(launch_rank) +
                    " waited " + std::to_string(timeout.count()) +
                    " ms for the running job to admit it; its members admit new ranks when they call "
                    "admit_new_ranks() (" + e.what() + ")");
  }
  const Admission a = decode(root->get(join_key(nonce)));
  ProcessGroupOptions options = options_of(a, death_records);
  options.device_id = device_id;
  auto keys = grow_keys(root, a.number);
  std::string why;
  Group grown = form_changed_group(keys, a.rank, a.size, options, Deadline::after(options.timeout), why);
  if (!grown)
    throw DistBackendError("init_process_group(join_running_job): launch rank " + std::to_string(launch_rank) +
                           " could not join the running job: " + why);
  install_default_group(grown, keys);
  std::lock_guard<std::mutex> lock(world().mu);
  world().joined_running_job = true;
}

}  // namespace tdist
