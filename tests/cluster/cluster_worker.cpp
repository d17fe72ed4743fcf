// One rank of a job on the emulated cluster (scripts/cluster.sh): started by
// cluster_test.sh in a host's namespace with RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set, the ranks of each host consecutive.
//
//   tdist-cluster-worker matrix HOSTS_CSV   every collective (common/collective_matrix.h) on the
//                                           world, the DeviceMesh (hosts x local) where the hosts
//                                           hold as many ranks each, and subgroups
//   tdist-cluster-worker fault READY_DIR    all_reduces until one fails (the script pulls a link
//                                           or kills a host once every rank has written
//                                           READY_DIR/<rank>); prints the error and exits 3
//
// HOSTS_CSV: the ranks per host, e.g. "1,2,3". Exits 0 when every check
// passes; else prints what failed, naming this rank, and exits 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/tdist_backend.h"
#include "common/collective_matrix.h"
#include "tdist/device_mesh.h"
#include "tdist/tdist.h"

using namespace tdist;
using namespace tdist::testing;

namespace {

std::vector<int> parse_hosts(const std::string& csv) {
  std::vector<int> counts;
  std::stringstream in(csv);
  for (std::string item; std::getline(in, item, ',');) counts.push_back(std::stoi(item));
  return counts;
}

std::string engine_of(const Group& group, OpCode code, size_t bytes) {
  auto& backend = dynamic_cast<TdistBackend&>(group->backend_for(Device{}));
  return backend.engine_name(code, bytes);
}

void expect_engine(const Group& group, const std::string& want, const std::string& where) {
  for (OpCode code : {OpCode::AllReduce, OpCode::Broadcast, OpCode::Reduce, OpCode::Gather})
    for (size_t bytes : {size_t{8}, size_t{8} << 20}) {
      const std::string got = engine_of(group, code, bytes);
      matrix::require(got == want, where + ": a collective of " + std::to_string(bytes) + " bytes picked the " + got +
                                       " engine, expected " + want);
    }
}

void check_group(const Group& group, const std::string& where, bool large = true) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}}) matrix::check_collectives(group, count, where);
  // 8 MiB of float32: every rank count divides it.
  if (large) matrix::check_large(group, size_t{2} << 20, where);
  barrier(group)->wait();
}

void run_matrix(const std::vector<int>& hosts) {
  const int rank = get_rank(), n = get_world_size();
  bool uniform = true;
  for (int c : hosts) uniform = uniform && c == hosts[0];
  const bool several_per_host = std::any_of(hosts.begin(), hosts.end(), [](int c) { return c > 1; });
  if (hosts.size() > 1 && several_per_host) expect_engine(group_world(), "hierarchical", "the world");
  check_group(group_world(), "the world");

  if (uniform && hosts.size() > 1 && hosts[0] > 1) {
    // Hosts x local ranks: the "local" groups share memory, the "host"
    // groups hold one rank per host and run flat over the links.
    const int64_t h = static_cast<int64_t>(hosts.size()), l = hosts[0];
    auto mesh = init_device_mesh("cpu", {h, l}, {"host", "local"});
    expect_engine(mesh->get_group("host"), "transport", "the mesh's host dimension");
    expect_engine(mesh->get_group("local"), "shm", "the mesh's local dimension");
    check_group(mesh->get_group("host"), "the mesh's host dimension");
    check_group(mesh->get_group("local"), "the mesh's local dimension", false);
  }
  // Uneven: the first two ranks (on host 0, or hosts 0 and 1) and the last.
  if (n >= 3) {
    Group some = new_group({0, 1, n - 1});
    if (rank == 0 || rank == 1 || rank == n - 1) check_group(some, "ranks 0, 1 and " + std::to_string(n - 1), false);
  }
  barrier()->wait();
}

// All_reduces until one fails; the error is what the test checks.
int run_until_fault(const std::string& ready_dir) {
  const int rank = get_rank();
  std::vector<float> data(1 << 18, 1.0f);
  for (int k = 0; k < 3; ++k) all_reduce(Tensor(data.data(), data.size()))->wait();
  std::ofstream(ready_dir + "/" + std::to_string(rank)) << "ready\n";
  const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  try {
    while (std::chrono::steady_clock::now() < until) {
      all_reduce(Tensor(data.data(), data.size()))->wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const DistError& e) {
    std::cerr << "rank " << rank << " ERROR " << e.what() << std::endl;
    std::exit(3);  // the group is failed: no orderly teardown to wait for
  }
  std::cerr << "rank " << rank << ": no collective failed in 3 minutes" << std::endl;
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "matrix" && mode != "fault") {
    std::cerr << "usage: tdist-cluster-worker matrix HOSTS_CSV | fault READY_DIR\n";
    return 2;
  }
  InitOptions options;
  if (const char* t = std::getenv("CLUSTER_TIMEOUT_S")) options.timeout = std::chrono::seconds(std::atoi(t));
  const char* rank_text = std::getenv("RANK");
  const std::string rank = rank_text ? rank_text : "?";
  try {
    init_process_group(options);
    if (mode == "fault") return run_until_fault(argc > 2 ? argv[2] : ".");
    run_matrix(parse_hosts(argc > 2 ? argv[2] : "1"));
  } catch (const std::exception& e) {
    std::cerr << "rank " << rank << " FAILED: " << e.what() << std::endl;
    return 1;
  }
  destroy_process_group();
  std::cout << "rank " << rank << " ok" << std::endl;
  return 0;
}
