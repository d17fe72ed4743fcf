// Argument helpers shared by the operation bindings.
#pragma once

#include <optional>
#include <string>

#include <tdist/distributed.h>

#include "common.h"

namespace tdist_py {

// torch's GroupMember.NON_GROUP_MEMBER: what new_group returns to a rank
// outside the group (the Python package's GroupMember.NON_GROUP_MEMBER).
inline constexpr int kNonGroupMember = -100;

// A group argument: None (the default group), a ProcessGroup, or
// GroupMember.NON_GROUP_MEMBER. `non_member` is torch's _rank_not_in_group:
// NON_GROUP_MEMBER, or a handle of a group this process is not in; the call
// then warns and returns None without doing anything.
struct GroupArg {
  tdist::Group group;
  bool non_member = false;
  operator const tdist::Group&() const { return group; }  // NOLINT: the C++ functions take a Group
};

// Warns as torch's _warn_not_in_group ("Running all_reduce on global rank 3
// which does not belong to the given group.") and returns None.
py::object not_in_group(const char* op);

// The Python value of a group made for this rank: NON_GROUP_MEMBER when the
// rank is not in it, else the handle.
py::object group_or_non_member(const tdist::Group& group);

// torch's src=/group_src= (dst=/group_dst=) pair as a tdist::PeerRank:
// exactly one of them, or neither when `any_ok` (any source).
tdist::PeerRank peer_rank(std::optional<int> global, std::optional<int> in_group, const std::string& op,
                          const char* global_name, const char* group_name, bool any_ok);

// A timeout argument: None (nullopt), datetime.timedelta, or seconds (int or float).
std::optional<std::chrono::milliseconds> to_timeout(py::handle obj, const char* what);

// The default group's timeout when none was given.
std::chrono::milliseconds timeout_or_default(const std::optional<std::chrono::milliseconds>& timeout);

}  // namespace tdist_py

namespace pybind11::detail {

template <>
struct type_caster<tdist_py::GroupArg> {
  PYBIND11_TYPE_CASTER(tdist_py::GroupArg, const_name("ProcessGroup | None"));

  bool load(handle src, bool convert) {
    if (src.is_none()) {
      value = {};
      return true;
    }
    if (PyLong_Check(src.ptr()) && !PyBool_Check(src.ptr())) {
      int overflow = 0;
      const long v = PyLong_AsLongAndOverflow(src.ptr(), &overflow);
      if (overflow || v != tdist_py::kNonGroupMember) return false;
      value = {nullptr, true};
      return true;
    }
    copyable_holder_caster<tdist::ProcessGroup, std::shared_ptr<tdist::ProcessGroup>> holder;
    if (!holder.load(src, convert)) return false;
    tdist::Group g = static_cast<std::shared_ptr<tdist::ProcessGroup>>(holder);
    const bool outside = g && !g->is_member();
    value = {std::move(g), outside};
    return true;
  }

  static handle cast(const tdist_py::GroupArg& src, return_value_policy, handle) {
    if (src.non_member && !src.group) return py::int_(tdist_py::kNonGroupMember).release();
    return make_caster<std::shared_ptr<tdist::ProcessGroup>>::cast(src.group, return_value_policy::automatic, {});
  }
};

}  // namespace pybind11::detail
