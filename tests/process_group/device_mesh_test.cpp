// DeviceMesh across forked processes: per-dimension groups hold exactly the
// row-major rows/columns through each rank, collectives over them reduce over
// exactly those ranks, slicing reuses the groups, and bad arguments are
// DistValueErrors raised before anyone waits.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "backends/process_world.h"
#include "tdist/device_mesh.h"
#include "util/socket.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kTimeout{20000};

void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

std::string list(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string list(const std::vector<int64_t>& v) { return list(std::vector<int>(v.begin(), v.end())); }

// Runs `fn` and requires it to throw E whose message contains every part.
template <typename E, typename F>
void require_throws(F&& fn, const std::vector<std::string>& parts, const std::string& what) {
  try {
    fn();
  } catch (const E& e) {
    for (const auto& p : parts)
      require(contains(e.what(), p), what + ": message lacks '" + p + "': " + e.what());
    return;
  } catch (const std::exception& e) {
    throw std::runtime_error(what + ": wrong exception type: " + e.what());
  }
  throw std::runtime_error(what + ": did not throw");
}

// Row-major coordinate of flat index i, computed here independently of the library.
std::vector<int64_t> coordinate_of(int64_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = i % shape[d];
    i /= shape[d];
  }
  return c;
}

// Checks every property of `m` on this rank against the layout it claims
// (m.mesh(), m.shape()), and runs one all_reduce per dimension: each rank adds
// 2^rank, so the sum is the bit set of exactly the ranks that took part.
void check_mesh(const DeviceMesh& m, const std::string& label) {
  const int rank = get_rank();
  const auto& shape = m.shape();
  const auto& mesh = m.mesh();
  require(m.ndim() == static_cast<int>(shape.size()), label + ": ndim");
  int64_t count = 1;
  for (int64_t s : shape) count *= s;
  require(m.size() == count && static_cast<int64_t>(mesh.size()) == count, label + ": size");
  require(m.get_rank() == rank, label + ": get_rank");
  int64_t position = -1;
  for (int64_t i = 0; i < count; ++i)
    if (mesh[i] == rank) position = i;
  require(position >= 0, label + ": rank " + std::to_string(rank) + " is not in the mesh");
  const auto coord = coordinate_of(position, shape);
  require(m.get_coordinate() == coord,
          label + ": get_coordinate " + list(m.get_coordinate()) + ", expected " + list(coord));
  auto groups = m.get_all_groups();
  require(static_cast<int>(groups.size()) == m.ndim(), label + ": get_all_groups size");
  for (int d = 0; d < m.ndim(); ++d) {
    const std::string where = label + " dim " + std::to_string(d) + " on rank " + std::to_string(rank);
    std::vector<int> expected;
    for (int64_t i = 0; i < count; ++i) {
      auto c = coordinate_of(i, shape);
      bool same = true;
      for (int k = 0; k < m.ndim(); ++k) same = same && (k == d || c[k] == coord[k]);
      if (same) expected.push_back(static_cast<int>(mesh[i]));
    }
    std::sort(expected.begin(), expected.end());
    Group g = m.get_group(d);
    require(g != nullptr && g == groups[d], where + ": get_group vs get_all_groups");
    require(get_process_group_ranks(g) == expected,
            where + ": group ranks " + list(get_process_group_ranks(g)) + ", expected " + list(expected));
    require(m.size(d) == shape[d], where + ": size(dim)");
    require(m.get_local_rank(d) == get_rank(g), where + ": get_local_rank is not the group rank");
    require(m.get_group(d - m.ndim()) == g, where + ": negative dim");
    if (!m.mesh_dim_names().empty()) {
      const auto& name = m.mesh_dim_names()[d];
      require(m.get_group(name) == g, where + ": get_group(name)");
      require(m.get_local_rank(name) == m.get_local_rank(d), where + ": get_local_rank(name)");
    }
    std::vector<int64_t> v(3, int64_t{1} << rank);
    all_reduce(v, ReduceOp::SUM, g);
    int64_t bits = 0;
    for (int r : expected) bits |= int64_t{1} << r;
    require(v[0] == bits && v[2] == bits,
            where + ": all_reduce gave " + std::to_string(v[0]) + ", expected " + std::to_string(bits));
  }
}

// For a mesh from init_device_mesh (ranks increase along every dimension) the
// local rank is also the coordinate.
void check_row_major(const DeviceMesh& m, const std::vector<int64_t>& shape, const std::vector<std::string>& names,
                     const std::string& label) {
  require(m.device_type() == "cpu", label + ": device_type");
  require(m.shape() == shape, label + ": shape " + list(m.shape()));
  require(m.mesh_dim_names() == names, label + ": names");
  for (size_t i = 0; i < m.mesh().size(); ++i) require(m.mesh()[i] == static_cast<int64_t>(i), label + ": mesh");
  check_mesh(m, label);
  for (int d = 0; d < m.ndim(); ++d)
    require(m.get_local_rank(d) == m.get_coordinate()[d], label + ": local rank != coordinate");
}

void run_world(int n, const std::function<void(int)>& body) {
  Shared<PortBoard> board;
  auto results = run_in_processes(n, [&](int rank) {
    init_process_world(*board, rank, n, kTimeout);
    body(rank);
    destroy_process_group();
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(DeviceMesh, OneDimensionalMeshOfFour) {
  run_world(4, [](int rank) {
    auto mesh = init_device_mesh("cpu", {4});
    check_row_major(*mesh, {4}, {}, "1-D");
    require(mesh->get_group() == mesh->get_group(0), "get_group()");
    require(mesh->get_local_rank() == rank, "get_local_rank()");
    require(mesh->str() == "DeviceMesh('cpu', [0, 1, 2, 3])", "str: " + mesh->str());
    require_throws<DistValueError>([&] { mesh->get_group(1); }, {"dimension 1", "out of range"}, "dim 1 of 1-D");
    require_throws<DistValueError>([&] { mesh->get_group("tp"); }, {"'tp'", "no mesh_dim_names"}, "name w/o names");
    require_throws<DistValueError>([&] { (*mesh)["tp"]; }, {"cannot slice", "no mesh_dim_names"}, "slice w/o names");
  });
}

TEST(DeviceMesh, TwoByTwoNamed) {
  run_world(4, [](int rank) {
    auto mesh = init_device_mesh("cpu", {2, 2}, {"dp", "tp"});
    check_row_major(*mesh, {2, 2}, {"dp", "tp"}, "2x2");
    require(mesh->str() == "DeviceMesh('cpu', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))", "str: " + mesh->str());
    require_throws<DistValueError>([&] { mesh->get_group(); }, {"2 dimensions"}, "get_group() on 2-D");
    require_throws<DistValueError>([&] { mesh->get_local_rank(); }, {"2 dimensions"}, "get_local_rank() on 2-D");
    require_throws<DistValueError>([&] { mesh->get_group("pp"); }, {"'pp'", "('dp', 'tp')"}, "unknown name");
    require_throws<DistValueError>([&] { mesh->get_local_rank("pp"); }, {"'pp'"}, "unknown name (local rank)");

    DeviceMesh tp = (*mesh)["tp"];
    require(tp.shape() == std::vector<int64_t>{2} && tp.mesh_dim_names() == std::vector<std::string>{"tp"},
            "mesh[tp] layout: " + tp.str());
    require(tp.get_group() == mesh->get_group("tp"), "mesh[tp] made a new group instead of reusing the parent's");
    check_mesh(tp, "mesh[tp]");
    std::vector<int64_t> row{rank / 2 * 2, rank / 2 * 2 + 1};
    require(tp.mesh() == row, "mesh[tp] ranks " + list(tp.mesh()));
    DeviceMesh dp = (*mesh)["dp"];
    require(dp.mesh() == std::vector<int64_t>{rank % 2, rank % 2 + 2}, "mesh[dp] ranks " + list(dp.mesh()));
    require(dp.get_group() == mesh->get_group("dp"), "mesh[dp] group");
    check_mesh(dp, "mesh[dp]");

    DeviceMesh both = (*mesh)[{"dp", "tp"}];
    require(both == *mesh && both.get_group("tp") == mesh->get_group("tp"), "mesh[{dp,tp}] is the mesh itself");
    check_mesh(both, "mesh[{dp,tp}]");
    require_throws<DistValueError>([&] { (*mesh)[{"tp", "dp"}]; }, {"mesh order"}, "slice out of order");
    require_throws<DistValueError>([&] { (*mesh)[{"tp", "tp"}]; }, {"'tp' is named twice"}, "slice repeated");
    require_throws<DistValueError>([&] { (*mesh)["pp"]; }, {"'pp'", "does not exist"}, "slice unknown");

    // The same layout rebuilt from the existing groups, without new ones.
    DeviceMesh again = DeviceMesh::from_group(mesh->get_all_groups(), "cpu", mesh->mesh(), {2, 2}, {"dp", "tp"});
    require(again == *mesh && again.get_group(1) == mesh->get_group(1), "from_group(groups)");
    DeviceMesh row_mesh = DeviceMesh::from_group(mesh->get_group("tp"), "cpu", {"tp"});
    require(row_mesh == tp, "from_group(group): " + row_mesh.str());
    require_throws<DistValueError>(
        [&] {
          DeviceMesh::from_group(std::vector<Group>{mesh->get_group(1), mesh->get_group(0)}, "cpu", mesh->mesh(),
                                 {2, 2});
        },
        {"dimension 0", "holds ranks"}, "from_group with swapped groups");
  });
}

TEST(DeviceMesh, TwoByThreeNamed) {
  run_world(6, [](int rank) {
    auto mesh = init_device_mesh("cpu", {2, 3}, {"dp", "tp"});
    check_row_major(*mesh, {2, 3}, {"dp", "tp"}, "2x3");
    require(get_process_group_ranks(mesh->get_group("tp")).size() == 3, "tp group size");
    DeviceMesh tp = (*mesh)["tp"];
    require(tp.mesh() == std::vector<int64_t>{rank / 3 * 3, rank / 3 * 3 + 1, rank / 3 * 3 + 2},
            "mesh[tp] ranks " + list(tp.mesh()));
    require(tp.get_local_rank() == rank % 3, "mesh[tp] local rank");
    check_mesh(tp, "mesh[tp]");
    DeviceMesh dp = (*mesh)["dp"];
    require(dp.mesh() == std::vector<int64_t>{rank % 3, rank % 3 + 3}, "mesh[dp] ranks " + list(dp.mesh()));
    require(dp.get_local_rank() == rank / 3, "mesh[dp] local rank");
    check_mesh(dp, "mesh[dp]");
    check_mesh((*mesh)[{"dp", "tp"}], "mesh[{dp,tp}]");
  });
}

TEST(DeviceMesh, ThreeDimensionsOnEightRanks) {
  run_world(8, [](int rank) {
    auto mesh = init_device_mesh("cpu", {2, 2, 2}, {"pp", "dp", "tp"});
    check_row_major(*mesh, {2, 2, 2}, {"pp", "dp", "tp"}, "2x2x2");
    require(mesh->get_coordinate() == std::vector<int64_t>{rank / 4, rank / 2 % 2, rank % 2}, "coordinate");
    // Two of three dimensions: a 2-D mesh with the third coordinate fixed.
    DeviceMesh dp_tp = (*mesh)[{"dp", "tp"}];
    int64_t base = rank / 4 * 4;
    require(dp_tp.mesh() == std::vector<int64_t>{base, base + 1, base + 2, base + 3}, "dp,tp ranks " + list(dp_tp.mesh()));
    require(dp_tp.shape() == std::vector<int64_t>{2, 2}, "dp,tp shape");
    require(dp_tp.get_group("dp") == mesh->get_group("dp") && dp_tp.get_group("tp") == mesh->get_group("tp"),
            "dp,tp groups are not the parent's");
    check_mesh(dp_tp, "mesh[{dp,tp}]");
    // Not adjacent: pp and tp, dp fixed.
    DeviceMesh pp_tp = (*mesh)[{"pp", "tp"}];
    int64_t dp = rank / 2 % 2;
    require(pp_tp.mesh() == std::vector<int64_t>{dp * 2, dp * 2 + 1, 4 + dp * 2, 4 + dp * 2 + 1},
            "pp,tp ranks " + list(pp_tp.mesh()));
    check_mesh(pp_tp, "mesh[{pp,tp}]");
    // A slice of a slice.
    DeviceMesh tp = dp_tp["tp"];
    require(tp == (*mesh)["tp"] && tp.get_group() == mesh->get_group(2), "slice of a slice");
    check_mesh(tp, "mesh[{dp,tp}][tp]");
    check_mesh((*mesh)["pp"], "mesh[pp]");
  });
}

TEST(DeviceMesh, DimensionsOfSizeOne) {
  run_world(4, [](int) {
    auto wide = init_device_mesh("cpu", {1, 4}, {"a", "b"});
    check_row_major(*wide, {1, 4}, {"a", "b"}, "1x4");
    require(wide->get_group("b") == group_world(), "a dimension spanning the world is the default group");
    auto tall = init_device_mesh("cpu", {4, 1});
    check_row_major(*tall, {4, 1}, {}, "4x1");
    require(get_process_group_ranks(tall->get_group(1)) == std::vector<int>{get_rank()}, "size-1 group");
  });
}

TEST(DeviceMesh, ExplicitMeshPermutedAndPartial) {
  run_world(4, [](int rank) {
    // Ranks need not increase: the groups are the rows/columns of this layout.
    DeviceMesh permuted("cpu", {3, 2, 1, 0}, {2, 2}, {"x", "y"});
    check_mesh(permuted, "permuted");
    require(permuted.str() == "DeviceMesh('cpu', [[3, 2], [1, 0]], mesh_dim_names=('x', 'y'))", permuted.str());
    DeviceMesh y = permuted["y"];
    require(y.mesh() == (rank >= 2 ? std::vector<int64_t>{3, 2} : std::vector<int64_t>{1, 0}), "permuted[y] " + y.str());
    check_mesh(y, "permuted[y]");

    // A mesh over part of the world: the others are not in it.
    DeviceMesh half("cpu", {0, 2}, {2});
    if (rank % 2 == 0) {
      check_mesh(half, "half");
    } else {
      require(half.get_coordinate().empty(), "a rank outside the mesh has a coordinate");
      require(half.get_all_groups().empty(), "a rank outside the mesh has groups");
      require_throws<DistError>([&] { half.get_group(); }, {"rank " + std::to_string(rank), "not in the mesh"},
                                "get_group outside the mesh");
    }
    require_throws<DistValueError>([] { DeviceMesh("cpu", {0, 1, 2}, {2, 2}); }, {"(2, 2)", "holds 4", "lists 3"},
                                   "mesh/shape mismatch");
    require_throws<DistValueError>([] { DeviceMesh("cpu", {0, 0}, {2}); }, {"rank 0 more than once"}, "repeated rank");
    require_throws<DistValueError>([] { DeviceMesh("cpu", {0, 7}, {2}); }, {"rank 7", "world size 4"}, "outside");
    // Still usable after all that.
    std::vector<int> v(1, 1);
    all_reduce(v);
    require(v[0] == 4, "default group after errors");
  });
}

TEST(DeviceMesh, InitializesTheDefaultGroupFromTheEnvironment) {
  Fd fd = listen_tcp("127.0.0.1", 0);
  const int port = local_port(fd.get());
  fd = Fd();
  auto results = run_in_processes(4, [&](int rank) {
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE"}) unsetenv(v);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", "4", 1);
    require(!is_initialized(), "initialized before init_device_mesh");
    auto mesh = init_device_mesh("cpu", {2, 2}, {"dp", "tp"});
    require(is_initialized() && get_world_size() == 4, "init_device_mesh did not initialize the default group");
    check_row_major(*mesh, {2, 2}, {"dp", "tp"}, "env 2x2");
    destroy_process_group();
  });
  EXPECT_EQ(describe_failures(results), "");
}

TEST(DeviceMesh, ShapeMustCoverTheWorld) {
  run_world(4, [](int) {
    require_throws<DistValueError>([] { init_device_mesh("cpu", {2, 3}, {"dp", "tp"}); },
                                   {"init_device_mesh", "(2, 3)", "6 ranks", "world size is 4"}, "2x3 on 4");
    require_throws<DistValueError>([] { init_device_mesh("cpu", {2}); }, {"(2,)", "world size is 4"}, "2 on 4");
    // The failed calls made no groups: a good mesh right after works.
    check_row_major(*init_device_mesh("cpu", {2, 2}), {2, 2}, {}, "2x2 after errors");
  });
}

// These are all checked before the default group is needed: no process group here.
TEST(DeviceMesh, ArgumentErrorsComeBeforeAnyRendezvous) {
  ASSERT_FALSE(is_initialized());
  require_throws<DistValueError>([] { init_device_mesh("xpu", {4}); }, {"unsupported device type 'xpu'", "'cpu'"},
                                 "xpu");
  require_throws<DistValueError>([] { init_device_mesh("cuda:0", {4}); }, {"'cuda:0'", "index", "'cuda'"}, "cuda:0");
  if (!is_backend_available("nccl"))
    require_throws<DistValueError>([] { init_device_mesh("cuda", {4}); }, {"'cuda'", "nccl"}, "cuda w/o nccl");
  require_throws<DistValueError>([] { init_device_mesh("cpu", {2, 2}, {"dp", "dp"}); },
                                 {"('dp', 'dp')", "'dp' more than once"}, "duplicate names");
  require_throws<DistValueError>([] { init_device_mesh("cpu", {2, 2}, {"dp"}); }, {"1 name", "2-D", "(2, 2)"},
                                 "too few names");
  require_throws<DistValueError>([] { init_device_mesh("cpu", {4}, {"a", "b"}); }, {"2 names", "1-D"},
                                 "too many names");
  require_throws<DistValueError>([] { init_device_mesh("cpu", {2, 0}); }, {"dimension 1", "size 0"}, "zero dim");
  require_throws<DistValueError>([] { init_device_mesh("cpu", {}); }, {"empty"}, "empty shape");
  require_throws<DistError>([] { DeviceMesh("cpu", {0}, {1}); }, {"not initialized"}, "no default group");
  EXPECT_FALSE(is_initialized());
}

}  // namespace
}  // namespace tdist::testing
