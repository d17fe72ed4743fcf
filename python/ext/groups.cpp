// init_process_group (every init method), destroy_process_group, the world
// queries, ProcessGroup handles and new_group with its rank helpers.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <tdist/distributed.h>
#include <tdist/errors.h>
#include <tdist/spawn.h>

#include "args.h"
#include "common.h"
#include "work.h"

namespace tdist_py {

using ms = std::chrono::milliseconds;

tdist::PeerRank peer_rank(std::optional<int> global, std::optional<int> in_group, const std::string& op,
                          const char* global_name, const char* group_name, bool any_ok) {
  if (global && in_group) {
    throw tdist::DistValueError(op + ": pass either " + global_name + "= or " + group_name + "=, not both");
  }
  if (in_group) return tdist::PeerRank(*in_group, true);
  if (global) return tdist::PeerRank(*global);
  if (any_ok) return tdist::kAnyPeer;
  throw tdist::DistValueError(op + ": " + global_name + "= (a global rank) or " + group_name +
                              "= (a rank in the group) is required");
}

std::optional<ms> to_timeout(py::handle obj, const char* what) {
  if (obj.is_none()) return std::nullopt;
  if (PyFloat_Check(obj.ptr()) || PyLong_Check(obj.ptr())) {
    double seconds = obj.cast<double>();
    if (!(seconds >= 0)) throw tdist::DistValueError(std::string(what) + ": timeout must be >= 0 seconds");
    return ms(static_cast<int64_t>(seconds * 1000.0));
  }
  try {
    return obj.cast<ms>();  // datetime.timedelta
  } catch (const py::cast_error&) {
    throw py::type_error(std::string(what) + ": timeout must be a datetime.timedelta or a number of seconds, not " +
                         std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  }
}

// None: TDIST_TIMEOUT where set, else 30 minutes (resolved by the library).
ms timeout_or_default(const std::optional<ms>& timeout) { return timeout.value_or(tdist::kUnsetTimeout); }

py::object not_in_group(const char* op) {
  int rank = -1;
  try {
    rank = tdist::get_rank();
  } catch (const tdist::DistError&) {
  }
  const std::string message = std::string("Running ") + op + " on global rank " + std::to_string(rank) +
                              " which does not belong to the given group.";
  if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) throw py::error_already_set();
  return py::none();
}

py::object group_or_non_member(const tdist::Group& group) {
  if (!group || !group->is_member()) return py::int_(kNonGroupMember);
  return py::cast(group);
}

namespace {

// The group of the rank helpers: NON_GROUP_MEMBER has no ranks to translate
// (torch: "not registered").
const tdist::Group& registered(const GroupArg& group, const char* op) {
  if (group.non_member && !group.group)
    throw tdist::DistValueError(std::string(op) + ": GroupMember.NON_GROUP_MEMBER is not a group this rank can "
                                "query (new_group returned it because this rank is not a member)");
  return group.group;
}

}  // namespace

void bind_groups(py::module_& m) {
  py::class_<tdist::ProcessGroup, std::shared_ptr<tdist::ProcessGroup>>(m, "ProcessGroup",
      "A process group: made by init_process_group (the default group, group.WORLD), new_group or "
      "split_group. A rank outside a group gets GroupMember.NON_GROUP_MEMBER instead, as in torch.")
      .def("rank", &tdist::ProcessGroup::rank, "This process's rank in the group (-1: not a member).")
      .def("size", &tdist::ProcessGroup::size, "The number of ranks in the group.")
      .def("name", &tdist::ProcessGroup::backend_name, "The backend's name.")
      .def_property_readonly("group_name", &tdist::ProcessGroup::group_name)
      .def_property_readonly("timeout", &tdist::ProcessGroup::timeout)
      .def("is_member", &tdist::ProcessGroup::is_member)
      .def("__repr__", [](const tdist::ProcessGroup& g) {
        return "<tdist.ProcessGroup " + g.group_name() + " rank=" + std::to_string(g.rank()) +
               " size=" + std::to_string(g.size()) + ">";
      });

  m.def("is_available", &tdist::is_available, "True: tdist is always available.");
  m.def("is_gloo_available", &tdist::is_gloo_available, "True: tdist answers to gloo.");
  m.def("get_node_local_rank", &tdist::get_node_local_rank, py::arg("fallback_rank") = py::none(),
        "LOCAL_RANK, else fallback_rank, else DistValueError (torch's get_node_local_rank).");
  py::enum_<tdist::DebugLevel>(m, "DebugLevel", "torch's debug levels (TORCH_DISTRIBUTED_DEBUG / TDIST_DEBUG).")
      .value("OFF", tdist::DebugLevel::OFF)
      .value("INFO", tdist::DebugLevel::INFO)
      .value("DETAIL", tdist::DebugLevel::DETAIL);
  m.def("get_debug_level", &tdist::get_debug_level, "The level TDIST_DEBUG (or TORCH_DISTRIBUTED_DEBUG) sets.");
  m.def("set_debug_level", &tdist::set_debug_level, py::arg("level"),
        "Groups made afterwards check collectives and log at this level (sets TDIST_DEBUG).");
  m.def("set_debug_level_from_env", &tdist::set_debug_level_from_env,
        "Checks the environment's level (it is read on every call).");
  m.def("is_mpi_available", &tdist::is_mpi_available, "Whether this build has the mpi backend.");
  m.def("is_nccl_available", &tdist::is_nccl_available, "Whether an nccl backend is registered.");
  m.def("is_initialized", &tdist::is_initialized, "Whether the default group has been initialized.");
  m.def("_launcher_variables", &tdist::launcher_variables,
        "The launcher's variables that tdist.spawn removes in its children (tdist::launcher_variables).");
  m.def("is_torchelastic_launched", &tdist::is_torchelastic_launched,
        "Whether this process was started by tdistrun/torchrun.");

  m.def("init_process_group",
        [](std::optional<std::string> backend, std::optional<std::string> init_method, py::object timeout,
           int world_size, int rank, std::shared_ptr<tdist::Store> store, std::string group_name,
           py::object /*pg_options*/, py::object /*device_id*/) {
          tdist::InitOptions o;
          if (backend) o.backend = *backend;
          if (init_method) o.init_method = *init_method;
          o.timeout = timeout_or_default(to_timeout(timeout, "init_process_group"));
          o.world_size = world_size;
          o.rank = rank;
          o.store = std::move(store);
          o.group_name = std::move(group_name);
          py::gil_scoped_release nogil;
          tdist::init_process_group(o);
        },
        py::arg("backend") = py::none(), py::arg("init_method") = py::none(), py::arg("timeout") = py::none(),
        py::arg("world_size") = -1, py::arg("rank") = -1, py::arg("store") = py::none(),
        py::arg("group_name") = "", py::arg("pg_options") = py::none(), py::arg("device_id") = py::none(),
        R"(Initializes the default process group; blocks (GIL released) until every rank has joined.

backend: "tdist" (default); "gloo" is an alias so torch programs run unchanged.
init_method: "env://" (default: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), "tcp://host:port",
"file:///path"; or pass store= (a Store) with rank= and world_size= instead.
timeout: datetime.timedelta (or seconds) for every operation of the group (default: TDIST_TIMEOUT
seconds where set, else 30 min).
pg_options and device_id are accepted for torch compatibility and ignored.)");

  m.def("destroy_process_group",
        [](const GroupArg& arg) {
          if (arg.non_member && !arg.group) return;  // as torch: nothing to destroy
          const tdist::Group& group = arg.group;
          {
            py::gil_scoped_release nogil;
            tdist::destroy_process_group(group);
          }
          if (!group) clear_parked();  // every operation has ended
          else prune_parked();
        },
        py::arg("group") = py::none(),
        "Destroys the given group, or with None every group and the default one.");

  m.def("_get_default_group", &tdist::group_world, "The default group (DistError when not initialized).");
  m.def("get_rank",
        [](const GroupArg& group) { return group.non_member ? -1 : tdist::get_rank(group); },
        py::arg("group") = py::none(),
        "This process's rank in group (default: the world); -1 when not a member (NON_GROUP_MEMBER).");
  m.def("get_world_size",
        [](const GroupArg& group) { return group.non_member ? -1 : tdist::get_world_size(group); },
        py::arg("group") = py::none(),
        "The number of ranks in group (default: the world); -1 when this rank is not a member.");
  m.def("get_backend",
        [](const GroupArg& group) {
          if (group.non_member)
            throw tdist::DistValueError("get_backend: Invalid process group specified (this rank is not a member)");
          return tdist::get_backend(group);
        },
        py::arg("group") = py::none(), "The backend's name of group.");

  m.def("new_group",
        [](std::optional<std::vector<int>> ranks, std::optional<ms> timeout, std::optional<std::string> backend,
           py::object /*pg_options*/, bool use_local_synchronization, std::optional<std::string> group_desc,
           py::object /*device_id*/) {
          tdist::Group g;
          {
            py::gil_scoped_release nogil;
            g = tdist::new_group(ranks.value_or(std::vector<int>{}), timeout_or_default(timeout),
                                 backend.value_or(""), use_local_synchronization, group_desc.value_or(""));
          }
          return group_or_non_member(g);
        },
        py::arg("ranks") = py::none(), py::arg("timeout") = py::none(), py::arg("backend") = py::none(),
        py::arg("pg_options") = py::none(), py::arg("use_local_synchronization") = false,
        py::arg("group_desc") = py::none(), py::arg("device_id") = py::none(),
        R"(Creates a group of the given global ranks (None: all). Every rank of the world calls it with the
same ranks in the same order (unless use_local_synchronization: then only the members). A rank
outside the group gets GroupMember.NON_GROUP_MEMBER, as in torch: operations given it return None
and do nothing. group_desc labels the group (ProcessGroup.group_desc; "undefined" without one);
device_id is torch's and accepted for ported code: CPU groups have no device to bind.)");
  m.def("get_pg_count", &tdist::get_pg_count,
        "The number of groups made since init_process_group, the default one included (torch's get_pg_count); "
        "0 before init and after destroy_process_group().");
  m.def("_all_process_groups", &tdist::all_process_groups,
        "The default group and every group made since init_process_group, members or not (torch's _world.pg_map).");

  m.def("get_group_rank",
        [](const GroupArg& group, int global_rank) {
          return tdist::get_group_rank(registered(group, "get_group_rank"), global_rank);
        },
        py::arg("group"), py::arg("global_rank"),
        "The rank in group of a global rank (DistValueError when it is not a member).");
  m.def("get_global_rank",
        [](const GroupArg& group, int group_rank) {
          return tdist::get_global_rank(registered(group, "get_global_rank"), group_rank);
        },
        py::arg("group"), py::arg("group_rank"), "The global rank of a rank in group.");
  m.def("get_process_group_ranks",
        [](const GroupArg& group) {
          return tdist::get_process_group_ranks(registered(group, "get_process_group_ranks"));
        },
        py::arg("group"), "The global ranks of group's members, in group-rank order.");

  m.attr("SHRINK_DEFAULT") = tdist::kShrinkDefault;
  m.attr("SHRINK_ABORT") = tdist::kShrinkAbort;
  m.def("failed_ranks",
        [](const GroupArg& group, std::optional<ms> silence) {
          if (group.non_member) throw tdist::DistValueError("failed_ranks: this rank is not a member of the group");
          py::gil_scoped_release nogil;
          return tdist::failed_ranks(group.group, silence.value_or(tdist::kUnsetTimeout));
        },
        py::arg("group") = py::none(), py::arg("silence") = py::none(),
        R"(The ranks of group (group ranks, sorted; None: the default group) that failed, the same list on
every survivor: call it after an operation of the group raised, then shrink_group(that list).
Empty while the group is healthy. A rank counts as failed when proven dead (its connection ended
without a word, its process is gone from this host, tdistrun reaped it) or when it neither says it
is alive nor is proven dead within silence (a timedelta or seconds; default
TDIST_FAILURE_DETECTION_TIMEOUT, 10 s). Raises DistBackendError on a rank the survivors declared failed.)");
  m.def("shrink_group",
        [](std::vector<int> ranks_to_exclude, const GroupArg& group, int shrink_flags, py::object /*pg_options*/) {
          if (group.non_member) throw tdist::DistValueError("shrink_group: this rank is not a member of the group");
          tdist::Group g;
          {
            py::gil_scoped_release nogil;
            g = tdist::shrink_group(ranks_to_exclude, group.group, shrink_flags);
          }
          prune_parked();
          return g;
        },
        py::arg("ranks_to_exclude"), py::arg("group") = py::none(), py::arg("shrink_flags") = tdist::kShrinkDefault,
        py::arg("pg_options") = py::none(),
        R"(torch's shrink_group: the survivors (the members of group, None: the default group, not in
ranks_to_exclude, which are group ranks) call it with the same list and get a new group of
themselves, in their old order, over new connections, without a restart; group is destroyed.
Shrinking the default group destroys every other group and makes the new one the default: ranks
are renumbered. Every survivor gets the same group, or every survivor gets DistBackendError
(a rank died during the shrink: ask failed_ranks() again and shrink with its answer).
shrink_flags: SHRINK_DEFAULT, or SHRINK_ABORT to fail what the group still has under way first.)");

  m.def("admit_new_ranks",
        [] {
          py::gil_scoped_release nogil;
          return tdist::admit_new_ranks();
        },
        R"(Every member of the default group calls it at the same point (between two steps): the processes
waiting to join the running job (started with TDIST_JOIN_RUNNING_JOB=1, as tdistrun --on-failure
shrink-and-replace starts replacements) and the members form a new default group; the members keep
their ranks, the newcomers come after them. Returns how many joined (0: nothing changed). Every other
group is destroyed, as by shrink_group. The members then send the newcomers their state (broadcast).)");
  m.def("joined_running_job", &tdist::joined_running_job,
        "True in a process that joined a running job (TDIST_JOIN_RUNNING_JOB=1) until it next goes through "
        "admit_new_ranks: it has no state of its own yet; the members send it theirs.");
  m.def("split_group",
        [](const GroupArg& parent_pg, std::optional<std::vector<std::vector<int>>> split_ranks,
           std::optional<ms> timeout, py::object /*pg_options*/, std::optional<std::string> group_desc) -> py::object {
          if (!split_ranks) throw tdist::DistValueError("split_group: split_ranks cannot be None");
          if (parent_pg.non_member)
            throw tdist::DistValueError("split_group: this rank is not a member of the parent group");
          tdist::Group g;
          {
            py::gil_scoped_release nogil;
            g = tdist::split_group(parent_pg.group, *split_ranks, timeout_or_default(timeout), group_desc.value_or(""));
          }
          if (!g) return py::none();  // as torch: in no split
          return py::cast(g);
        },
        py::arg("parent_pg") = py::none(), py::arg("split_ranks") = py::none(), py::arg("timeout") = py::none(),
        py::arg("pg_options") = py::none(), py::arg("group_desc") = py::none(),
        R"(torch's split_group: every rank of parent_pg (None: the default group) calls it with the same
split_ranks, lists of ranks of the parent group (its group ranks; the global ranks when the parent
is the default group). The lists must be non-empty, free of duplicates, disjoint and inside the
parent (DistValueError, a ValueError, on every rank otherwise). Returns the group of this rank's
list, or None when it is in none. The new groups reuse the parent's connections; timeout defaults
to 30 minutes; pg_options and group_desc are accepted for ported code.)");
}

}  // namespace tdist_py
