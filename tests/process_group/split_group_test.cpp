// split_group in forked processes over a TCPStore, as torch's (2.5+): every
// rank of the parent calls it; each gets the group of its list (group ranks
// in sorted order) or nullptr when in none; lists are ranks of the parent;
// invalid lists are value errors on every rank and make nothing; the groups
// work at once, beside the parent and each other.
#include <algorithm>
#include <numeric>

#include "process_group/process_util.h"

namespace tdist::testing {
namespace {

std::vector<int32_t> filled(size_t n, int32_t v) { return std::vector<int32_t>(n, v); }

void require_all(const std::vector<int32_t>& v, int32_t want, const std::string& what) {
  for (size_t i = 0; i < v.size(); ++i)
    require(v[i] == want, what + ": element " + std::to_string(i) + " is " + std::to_string(v[i]) + ", expected " +
                              std::to_string(want));
}

// Sums (rank + 1) over `members` (global ranks) in g, and broadcasts from the last one.
void check_group(const Group& g, const std::vector<int>& members, int me, const std::string& what) {
  require(g != nullptr, what + ": this rank got no group");
  auto it = std::find(members.begin(), members.end(), me);
  require(get_rank(g) == static_cast<int>(it - members.begin()), what + ": get_rank " + std::to_string(get_rank(g)));
  require(get_world_size(g) == static_cast<int>(members.size()), what + ": get_world_size");
  require(get_process_group_ranks(g) == members, what + ": get_process_group_ranks");
  int32_t sum = 0;
  for (int r : members) sum += r + 1;
  auto v = filled(7, me + 1);
  all_reduce(v, ReduceOp::SUM, g);
  require_all(v, sum, what + ": all_reduce");
  auto b = filled(3, me == members.back() ? 1000 + me : -1);
  broadcast(b, members.back(), g);
  require_all(b, 1000 + members.back(), what + ": broadcast from global " + std::to_string(members.back()));
}

class SplitGroup : public ::testing::TestWithParam<int> {};

// The default group split into its even and its odd ranks, the last rank left
// out (except in a world of one); lists given unsorted.
TEST_P(SplitGroup, SplitsTheDefaultGroup) {
  const int n = GetParam();
  run_world(n, [n](int me) {
    std::vector<int> evens, odds;
    for (int r = n - 1; r >= 0; --r) {  // descending: split_group sorts each list
      if (n > 1 && r == n - 1) continue;
      (r % 2 ? odds : evens).push_back(r);
    }
    std::vector<std::vector<int>> lists;
    for (auto* l : {&evens, &odds})
      if (!l->empty()) lists.push_back(*l);
    Group g = split_group(nullptr, lists);
    std::sort(evens.begin(), evens.end());
    std::sort(odds.begin(), odds.end());
    const bool in_none = n > 1 && me == n - 1;
    const auto& mine = me % 2 ? odds : evens;
    if (in_none)
      require(g == nullptr, "the rank in no list got a group");
    else
      check_group(g, mine, me, "split " + std::to_string(me % 2));
    // Async on the split group, interleaved with the default group.
    auto a = filled(5, me), w = filled(5, 1);
    std::shared_ptr<Work> wa;
    if (!in_none) wa = all_reduce(a, ReduceOp::MAX, g, true);
    auto ww = all_reduce(w, ReduceOp::SUM, nullptr, true);
    ww->wait();
    if (wa) wa->wait();
    if (!in_none) require_all(a, mine.back(), "async MAX on the split");
    require_all(w, n, "async SUM on the default group");
    // The same split again: a second, separate set of groups.
    Group again = split_group(nullptr, lists);
    require((again == nullptr) == (g == nullptr), "the second split differs from the first");
    if (g) {
      auto x = filled(2, 1), y = filled(2, 2);
      auto wx = all_reduce(x, ReduceOp::SUM, g, true);
      auto wy = all_reduce(y, ReduceOp::SUM, again, true);
      wy->wait();
      wx->wait();
      require_all(x, get_world_size(g), "first split after the second");
      require_all(y, 2 * get_world_size(again), "second split");
    }
    auto v = filled(3, 1);
    all_reduce(v);
    require_all(v, n, "default group after the splits");
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SplitGroup, ::testing::ValuesIn(world_sizes()), world_name);

// A parent that is not the default group: lists hold its group ranks; a rank
// outside the parent cannot call it.
TEST(SplitGroupOfASubgroup, ListsAreRanksOfTheParent) {
  run_world(5, [](int me) {
    Group parent = new_group({1, 2, 3, 4});
    if (me == 0) {
      std::string m = value_error_of([&] { split_group(parent, {{0, 2}, {3}}); }, "split by a non-member");
      require(has(m, "not a member"), "message: " + m);
    } else {
      Group g = split_group(parent, {{2, 0}, {3}});  // parent ranks 0, 2 = global 1, 3; parent 3 = global 4
      if (me == 2) {
        require(g == nullptr, "global 2 (parent rank 1) is in no list");
      } else if (me == 4) {
        check_group(g, {4}, me, "split {4}");
      } else {
        check_group(g, {1, 3}, me, "split {1, 3}");
      }
      auto v = filled(2, me);
      all_reduce(v, ReduceOp::SUM, parent);
      require_all(v, 10, "parent after its split");
    }
    tdist::barrier();
  });
}

// Overlapping lists, duplicates, ranks outside the parent and empty lists are
// value errors on every rank; nothing is made, so later groups agree.
TEST(SplitGroupErrors, InvalidListsAreValueErrorsOnEveryRank) {
  run_world(3, [](int me) {
    std::string m = value_error_of([] { split_group(nullptr, {{0, 1}, {1, 2}}); }, "overlapping lists");
    require(has(m, "rank 1") && has(m, "overlap"), "message: " + m);
    m = value_error_of([] { split_group(nullptr, {{0, 0}}); }, "a duplicate");
    require(has(m, "twice"), "message: " + m);
    m = value_error_of([] { split_group(nullptr, {{0, 3}}); }, "rank 3 of 3");
    require(has(m, "rank 3") && has(m, "outside"), "message: " + m);
    value_error_of([] { split_group(nullptr, {{0}, {}}); }, "an empty list");
    value_error_of([] { split_group(nullptr, {{-1}}); }, "rank -1");
    // No list at all: every rank is in none (torch's None), after the barrier.
    require(split_group(nullptr, {}) == nullptr, "a group from no lists");
    Group g = split_group(nullptr, {{0, 2}});
    if (me == 1)
      require(g == nullptr, "rank 1 got a group");
    else
      check_group(g, {0, 2}, me, "split after the refused calls");
  });
}

}  // namespace
}  // namespace tdist::testing
