// Object collectives on byte strings in forked processes: empty, small and
// 1 MiB objects with zero bytes inside, every root, the default group and a
// non-contiguous subgroup with group-relative ranks.
#include "process_group/process_util.h"

namespace tdist::testing {
namespace {

// Payload kinds: 0 empty, 1 small with zeros inside, 2 1 MiB with zeros inside.
std::string payload(int kind, int salt) {
  switch (kind % 3) {
    case 0: return std::string();
    case 1: {
      std::string s("a\0b\0\0c", 6);
      s += std::to_string(salt);
      s.push_back('\0');
      return s;
    }
    default: {
      std::string s(size_t{1} << 20, '\0');
      for (size_t i = 0; i < s.size(); ++i)
        s[i] = i % 5 == 0 ? '\0' : static_cast<char>((i * 7 + static_cast<size_t>(salt)) % 256);
      return s;
    }
  }
}

void require_object(const std::string& got, const std::string& want, const std::string& what) {
  require(got.size() == want.size(), what + ": " + std::to_string(got.size()) + " bytes, expected " +
                                         std::to_string(want.size()));
  require(got == want, what + ": bytes differ");
}

// Runs every object collective on `g` (nullptr: the default group) whose
// members are `members` (global ranks); `me` is the global rank.
void check_objects(const Group& g, const std::vector<int>& members, int me, bool relative) {
  const int n = static_cast<int>(members.size());
  const int gme = tdist::get_rank(g);
  auto peer = [&](int group_rank) { return relative ? group_src(group_rank) : PeerRank(members[group_rank]); };
  for (int root = 0; root < n; ++root) {
    std::string where = " (root " + std::to_string(root) + (relative ? ", group-relative" : ", global") + ")";
    // broadcast_object_list: a list of every kind.
    std::vector<std::string> want{payload(0, root), payload(1, root), payload(2, root), payload(1, root + 5)};
    std::vector<std::string> list = gme == root ? want : std::vector<std::string>(want.size(), "stale");
    tdist::broadcast_object_list(list, peer(root), g);
    require(list.size() == want.size(), "broadcast_object_list size");
    for (size_t i = 0; i < want.size(); ++i)
      require_object(list[i], want[i], "broadcast_object_list entry " + std::to_string(i) + where);
    // gather_object: rank r sends a payload of kind r + root.
    std::vector<std::string> gathered{"stale"};
    tdist::gather_object(payload(gme + root, gme), gme == root ? &gathered : nullptr, peer(root), g);
    if (gme == root) {
      require(static_cast<int>(gathered.size()) == n, "gather_object list size");
      for (int r = 0; r < n; ++r) require_object(gathered[r], payload(r + root, r), "gather_object from " + std::to_string(r) + where);
    } else {
      require(gathered.size() == 1 && gathered[0] == "stale", "gather_object touched a non-destination list");
    }
    // scatter_object_list: entry r is of kind r + root + 1.
    std::vector<std::string> inputs;
    if (gme == root)
      for (int r = 0; r < n; ++r) inputs.push_back(payload(r + root + 1, r * 3));
    std::vector<std::string> out{"stale"};
    tdist::scatter_object_list(out, inputs, peer(root), g);
    require_object(out[0], payload(gme + root + 1, gme * 3), "scatter_object_list" + where);
  }
  // all_gather_object: every kind among the ranks.
  std::vector<std::string> all{"stale"};
  tdist::all_gather_object(all, payload(gme + 2, gme), g);
  require(static_cast<int>(all.size()) == n, "all_gather_object size");
  for (int r = 0; r < n; ++r) require_object(all[r], payload(r + 2, r), "all_gather_object entry " + std::to_string(r));
  // All objects empty.
  tdist::all_gather_object(all, std::string(), g);
  for (auto& o : all) require(o.empty(), "all_gather_object of empty objects");
  std::vector<std::string> empties(n);
  std::vector<std::string> one{"x"};
  tdist::scatter_object_list(one, gme == 0 ? empties : std::vector<std::string>{}, peer(0), g);
  require(one[0].empty(), "scatter_object_list of empty objects");
  std::vector<std::string> gathered{"stale"};
  tdist::gather_object(std::string(), gme == n - 1 ? &gathered : nullptr, peer(n - 1), g);
  if (gme == n - 1) require(gathered == empties, "gather_object of empty objects");
  std::vector<std::string> bl = gme == 1 % n ? empties : std::vector<std::string>(n, "stale");
  tdist::broadcast_object_list(bl, peer(1 % n), g);
  require(bl == empties, "broadcast_object_list of empty objects");
  std::vector<std::string> none;
  tdist::broadcast_object_list(none, peer(0), g);
  require(none.empty(), "broadcast_object_list of an empty list");
  (void)me;
}

TEST(CollObjects, EveryObjectCollectiveOnTheDefaultGroup) {
  run_world(3, [](int me) {
    check_objects(nullptr, {0, 1, 2}, me, false);
    check_objects(nullptr, {0, 1, 2}, me, true);
    tdist::barrier();
  });
}

TEST(CollObjects, EveryObjectCollectiveOnASubgroup) {
  run_world(4, [](int me) {
    Group g = tdist::new_group({0, 2, 3});
    if (me != 1) {
      check_objects(g, {0, 2, 3}, me, false);
      check_objects(g, {0, 2, 3}, me, true);
    }
    tdist::barrier();
  });
}

TEST(CollObjects, SendAndRecvObjectLists) {
  run_world(3, [](int me) {
    const int n = 3;
    std::vector<std::string> mine{payload(0, me), payload(1, me), payload(2, me)};
    // A ring: send to the right, receive from the left by rank, then from anyone.
    if (me % 2 == 0) {
      tdist::send_object_list(mine, (me + 1) % n);
    }
    std::vector<std::string> got(3, "stale");
    int from = tdist::recv_object_list(got, (me - 1 + n) % n);
    if (me % 2 == 1) tdist::send_object_list(mine, (me + 1) % n);
    require(from == (me - 1 + n) % n, "recv_object_list returned " + std::to_string(from));
    for (int i = 0; i < 3; ++i) require_object(got[i], payload(i, from), "recv_object_list entry " + std::to_string(i));
    // Any source, a single empty object, and user tensors on tag 0 that must not mix with objects.
    tdist::barrier();
    if (me != 0) {
      std::vector<int32_t> t(4, me);
      tdist::send_object_list({payload(1, me * 100)}, 0);
      tdist::send(t, 0);
    } else {
      for (int k = 0; k < 2; ++k) {
        std::vector<std::string> one(1);
        int src = tdist::recv_object_list(one);
        require(src == 1 || src == 2, "any-source recv_object_list returned " + std::to_string(src));
        require_object(one[0], payload(1, src * 100), "any-source object");
      }
      for (int src = 1; src <= 2; ++src) {
        std::vector<int32_t> t(4, -1);
        tdist::recv(t, src);
        for (auto x : t) require(x == src, "tag-0 tensor mixed with objects");
      }
    }
    // Empty lists and empty objects point to point.
    if (me == 1) tdist::send_object_list({std::string(), std::string()}, 2);
    if (me == 2) {
      std::vector<std::string> two{"a", "b"};
      tdist::recv_object_list(two, 1);
      require(two[0].empty() && two[1].empty(), "empty objects");
    }
    tdist::barrier();
  });
}

}  // namespace
}  // namespace tdist::testing
