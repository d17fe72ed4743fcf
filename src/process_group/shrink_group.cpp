// failed_ranks and shrink_group: the survivors of a failed group agree on who
// is gone and go on in a new group without them, with no launcher and no
// restart (docs/fault_tolerance.md).
#include <algorithm>
#include <set>

#include "tdist/distributed.h"
#include "tdist/errors.h"
#include "process_group/membership.h"
#include "process_group/world.h"
#include "util/deadline.h"
#include "util/error_context.h"
#include "util/settings.h"

namespace tdist {

namespace {

// torch's checks, in torch's words where it has them; the sorted list.
std::vector<int> checked_exclusions(const std::vector<int>& ranks_to_exclude, const ProcessGroup& target) {
  const int size = target.size();
  if (ranks_to_exclude.empty())
    throw DistValueError("shrink_group: ranks_to_exclude cannot be empty; name at least one rank to exclude, "
                         "e.g. [failed_rank] (failed_ranks() lists them)");
  std::set<int> seen;
  for (size_t i = 0; i < ranks_to_exclude.size(); ++i) {
    const int r = ranks_to_exclude[i];
    if (r < 0 || r >= size)
      throw DistValueError("shrink_group: rank " + std::to_string(r) + " at index " + std::to_string(i) +
                           " is out of bounds for group " + target.group_name() + " of size " +
                           std::to_string(size) + "; valid ranks are in [0, " + std::to_string(size - 1) + "]");
    if (!seen.insert(r).second)
      throw DistValueError("shrink_group: duplicate rank " + std::to_string(r) + " in ranks_to_exclude at index " +
                           std::to_string(i) + "; each rank can be excluded once");
  }
  if (static_cast<int>(seen.size()) >= size)
    throw DistValueError("shrink_group: cannot exclude all " + std::to_string(size) + " ranks of group " +
                         target.group_name() + "; at least one rank must remain");
  if (seen.count(target.rank()))
    throw DistError("shrink_group: rank " + std::to_string(target.rank()) + " of group " + target.group_name() +
                    " is in ranks_to_exclude [" + ranks_text({seen.begin(), seen.end()}) +
                    "]: only the survivors call shrink_group; an excluded rank should end its process");
  return {seen.begin(), seen.end()};
}

}  // namespace

std::vector<int> failed_ranks(const Group& group, std::chrono::milliseconds silence) {
  Group g = resolve_group(group, "failed_ranks");
  if (!g->is_member())
    throw DistValueError("failed_ranks: this process is not a member of group " + g->group_name());
  if (silence == kUnsetTimeout) silence = settings::get<"TDIST_FAILURE_DETECTION_TIMEOUT">();
  if (silence.count() < 0) throw DistValueError("failed_ranks: silence must not be negative");
  return g->failed_ranks(silence);
}

Group shrink_group(const std::vector<int>& ranks_to_exclude, const Group& group, int shrink_flags) {
  if (shrink_flags != kShrinkDefault && shrink_flags != kShrinkAbort)
    throw DistValueError("shrink_group: invalid shrink_flags " + std::to_string(shrink_flags) +
                         ": must be SHRINK_DEFAULT (0) or SHRINK_ABORT (1)");
  Group target = resolve_group(group, "shrink_group");
  if (!target->is_member())
    throw DistValueError("shrink_group: this process is not a member of group " + target->group_name());
  const std::vector<int> excluded = checked_exclusions(ranks_to_exclude, *target);
  if (!target->supports_shrinking())
    throw DistValueError("shrink_group: the backend '" + target->backend_name() + "' of group " +
                         target->group_name() + " cannot shrink (the tdist backend can)");
  const std::string label = "rank " + std::to_string(target->global_rank(target->rank())) + " in group " +
                            target->group_name();
  if (shrink_flags & kShrinkAbort)
    target->abort(std::make_exception_ptr(DistBackendError(label + ": aborted by shrink_group(SHRINK_ABORT)")));

  bool is_default;
  int attempt;
  {
    std::lock_guard<std::mutex> lock(world().mu);
    is_default = target == world().default_group;
    attempt = world().shrink_attempts[target.get()]++;
  }
  std::vector<int> remaining;
  for (int r = 0; r < target->size(); ++r)
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) remaining.push_back(r);
  const int new_rank = static_cast<int>(std::find(remaining.begin(), remaining.end(), target->rank()) -
                                        remaining.begin());
  const int new_size = static_cast<int>(remaining.size());

  ProcessGroupOptions options;
  options.backend = target->backend_name();
  options.timeout = target->timeout();
  options.group_name = target->group_name() + ":shrunk" + std::to_string(attempt);
  options.group_desc = is_default ? "default:shrunken" : target->group_desc() + ":shrunk";
  options.device_id = target->device_id();
  options.death_records = target->death_records();
  // A survivor that dies while the group forms is found by the old group's
  // proof (its process gone), not only at the timeout. Weak: the new group
  // must not keep the old one alive.
  options.members_gone = [old = std::weak_ptr<ProcessGroup>(target), remaining](const std::vector<int>& ranks) {
    std::vector<int> out;
    auto g = old.lock();
    if (!g) return out;
    std::vector<int> old_ranks;
    for (int r : ranks) old_ranks.push_back(remaining.at(static_cast<size_t>(r)));
    for (int dead : g->ranks_proven_dead(old_ranks))
      out.push_back(static_cast<int>(std::find(remaining.begin(), remaining.end(), dead) - remaining.begin()));
    return out;
  };
  for (int r : remaining) {
    options.launch_ranks.push_back(target->launch_ranks().at(r));
    if (!is_default) options.global_ranks.push_back(target->global_rank(r));
  }
  // The survivors that pass another list meet under other keys, and their
  // attempt is abandoned at the timeout naming the ranks missing from it.
  auto keys = std::make_shared<PrefixStore>(
      "shrink/" + target->group_name() + "/" + std::to_string(attempt) + "/without " + ranks_text(excluded),
      target->store());
  const Deadline deadline = Deadline::after(target->timeout());
  std::string why;
  Group shrunk = form_changed_group(keys, new_rank, new_size, options, deadline, why);
  if (!shrunk) {
    target->shrink_abandoned();
    throw DistBackendError(label + ": shrink_group without ranks [" + ranks_text(excluded) + "] was " + why +
                           "; call failed_ranks() again and shrink with its answer");
  }

  if (is_default) {
    install_default_group(shrunk, keys);
    return shrunk;
  }
  std::vector<Group> victims;
  {
    std::lock_guard<std::mutex> lock(world().mu);
    world().shrink_attempts.erase(target.get());
    // A group made by new_group is replaced in the list; one made outside it
    // (the PyTorch plugin's) stays its owner's, and so does its successor.
    auto& gs = world().groups;
    if (auto it = std::find(gs.begin(), gs.end(), target); it != gs.end()) {
      *it = shrunk;
      ++world().pg_count;
    }
    victims.push_back(target);
  }
  for (auto& g : victims) g->shutdown();
  return shrunk;
}

}  // namespace tdist
