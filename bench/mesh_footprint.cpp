// Sockets, threads and resident memory of rank 0 before and after a 2x2x2
// DeviceMesh with all its subgroups: the mesh's three dimensions, and
// new_subgroups of 2 and 4 ranks, each group used by one all_reduce (so every
// connection it needs is up). Run by bench/footprint.sh under tdistrun with 8 ranks.
#include <cstdio>
#include <string>

#include <tdist/tdist.h>

#include "common/process_counts.h"  // tests/common: built with -I tests

namespace {

struct Footprint {
  int sockets = tdist::process_counts::sockets();
  int threads = tdist::process_counts::threads();
  long rss = tdist::process_counts::resident_kib();
};

}  // namespace

int main() {
  tdist::init_process_group({.backend = "tdist"});
  if (tdist::get_world_size() != 8) {
    std::fprintf(stderr, "mesh_footprint: run it with 8 ranks\n");
    return 2;
  }
  const Footprint before;
  auto mesh = tdist::init_device_mesh("cpu", {2, 2, 2}, {"a", "b", "c"});
  std::vector<tdist::Group> groups = mesh->get_all_groups();
  for (int size : {2, 4}) groups.push_back(tdist::new_subgroups(size).first);
  for (auto& g : groups) {
    std::vector<float> v(4, 1.0f);
    tdist::all_reduce(v, tdist::ReduceOp::SUM, g);
  }
  tdist::barrier();
  const Footprint after;
  if (tdist::get_rank() == 0)
    std::printf("rank 0: default group only: %d sockets, %d threads, %ld KiB resident; "
                "with a 2x2x2 mesh and its subgroups (%zu groups): %d sockets, %d threads, %ld KiB resident\n",
                before.sockets, before.threads, before.rss, groups.size(), after.sockets, after.threads, after.rss);
  tdist::destroy_process_group();
}
