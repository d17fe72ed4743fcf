#include "process_group/membership.h"

#include <algorithm>
#include <thread>

#include "tdist/errors.h"
#include "process_group/world.h"

namespace tdist {

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out;
}

namespace {

// How often a forming group asks whether its missing members died.
constexpr std::chrono::milliseconds kAskEvery{100};

// The end of one attempt to form a changed group (a shrink, a regrow), fixed
// once in the store for every member (compare_set): "formed" once every
// member made its part of the new group, else "abandoned: <why>". A member
// that made its part waits here for the others; one that could not make it,
// or sees that a member died (the launcher's record, or the replaced group's
// proof: options.members_gone), abandons the attempt for all.
std::string settle(Store& store, int rank, int size, const ProcessGroupOptions& options, bool made,
                   const std::string& why_not, Deadline deadline) {
  const std::vector<int>& launch_ranks = options.launch_ranks;
  const std::shared_ptr<Store>& death_records = options.death_records;
  if (!made) return store.compare_set("outcome", "", "abandoned: " + why_not);
  store.set("ready/" + std::to_string(rank), "1");
  std::vector<std::string> ready;
  for (int r = 0; r < size; ++r) ready.push_back("ready/" + std::to_string(r));
  auto pause = std::chrono::milliseconds(1);
  Deadline next_ask = Deadline::after(std::chrono::milliseconds(0));
  while (true) {
    if (store.check({"outcome"})) return store.get("outcome");
    if (store.check(ready)) return store.compare_set("outcome", "", "formed");
    // Whether a missing member died: asked every kAskEvery (one store check
    // per missing member, and the old group's proof).
    if ((death_records || options.members_gone) && next_ask.expired()) {
      next_ask = Deadline::after(kAskEvery);
      std::vector<int> not_ready;
      for (int r = 0; r < size; ++r)
        if (!store.check({ready[r]})) not_ready.push_back(r);
      for (int r : not_ready) {
        const std::string record = "exited/" + std::to_string(launch_ranks[r]);
        if (death_records && death_records->check({record}))
          return store.compare_set("outcome", "",
                                   "abandoned: new rank " + std::to_string(r) + " died while the group formed: " +
                                       death_records->get(record));
      }
      const std::vector<int> gone = options.members_gone && !not_ready.empty() ? options.members_gone(not_ready)
                                                                               : std::vector<int>{};
      if (!gone.empty())
        return store.compare_set("outcome", "",
                                 "abandoned: new ranks " + ranks_text(gone) +
                                     " died while the group formed (their processes are gone)");
    }
    if (deadline.expired()) {
      std::vector<int> missing;
      for (int r = 0; r < size; ++r)
        if (!store.check({ready[r]})) missing.push_back(r);
      return store.compare_set("outcome", "",
                               "abandoned: new ranks " + ranks_text(missing) + " did not make their part within " +
                                   std::to_string(deadline.timeout().count()) + " ms");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace

Group form_changed_group(const std::shared_ptr<Store>& keys, int rank, int size, const ProcessGroupOptions& options,
                         Deadline deadline, std::string& why) {
  Group made;
  std::string why_not;
  try {
    made = std::make_shared<ProcessGroup>(std::make_shared<PrefixStore>("group", keys), rank, size, options);
  } catch (const std::exception& e) {
    why_not = "new rank " + std::to_string(rank) + " could not make its part: " + e.what();
  }
  std::string outcome;
  try {
    outcome = settle(*keys, rank, size, options, made != nullptr, why_not, deadline);
  } catch (const DistError& e) {
    outcome = std::string("abandoned: the store failed: ") + e.what();
  }
  if (outcome == "formed") return made;
  if (made) made->shutdown();
  why = outcome;
  return nullptr;
}

void install_default_group(const Group& g, const std::shared_ptr<Store>& keys) {
  std::vector<Group> victims;
  {
    std::lock_guard<std::mutex> lock(world().mu);
    victims = std::move(world().groups);
    world().groups.clear();
    world().group_counts.clear();
    world().shrink_attempts.clear();
    world().pg_count = 1;
    if (world().default_group) victims.push_back(world().default_group);
    world().default_group = g;
    world().default_version.fetch_add(1, std::memory_order_release);
    world().scoped_store = std::make_shared<PrefixStore>("world", keys);
  }
  for (auto& v : victims) v->shutdown();
}

}  // namespace tdist
