#include "util/local_placement.h"

#include "util/settings.h"

namespace tdist {

namespace {

// One launcher's pair: nullopt where it set neither variable; else the
// placement, or none where the pair is half set, inconsistent or garbage.
template <settings::Name rank_name, settings::Name size_name>
std::optional<std::optional<LocalPlacement>> said_by() {
  std::optional<long long> rank, size;
  try {
    rank = settings::get<rank_name>();
    size = settings::get<size_name>();
  } catch (...) {
    return std::optional<LocalPlacement>();
  }
  if (!rank && !size) return std::nullopt;
  if (!rank || !size || *rank < 0 || *size < 1 || *rank >= *size) return std::optional<LocalPlacement>();
  return LocalPlacement{*rank, *size};
}

}  // namespace

// The first launcher that set either of its variables decides: a pair is
// never completed from another launcher's.
std::optional<LocalPlacement> local_placement() {
  if (auto p = said_by<"LOCAL_RANK", "LOCAL_WORLD_SIZE">()) return *p;
  if (auto p = said_by<"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE">()) return *p;
  if (auto p = said_by<"MPI_LOCALRANKID", "MPI_LOCALNRANKS">()) return *p;
  return std::nullopt;
}

}  // namespace tdist
