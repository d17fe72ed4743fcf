// What the selector decides for one collective call, once, and what it
// honours: the engine and the algorithm as one value (Decision), and the
// group's TDIST_ALGO_<COLLECTIVE> settings checked when the group is made
// (ForcedAlgorithms).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "algorithms/tags.h"
#include "algorithms/tuning_table.h"
#include "trace/engine_kind.h"

namespace tdist {

// The engine that runs a call and its algorithm there: an index into the
// engine's list for the collective (tuning_table.h: the transport
// algorithms, or the hierarchical engine's paths), or kUndecided where
// nobody decided (a step inside an engine, an algorithm called alone: the
// algorithm then picks by itself, for its own shape). It travels down in the
// CollectiveContext and back to the flight recorder as it is: nothing writes it.
struct Decision {
  static constexpr int8_t kUndecided = -1;
  EngineKind engine = EngineKind::Unknown;
  int8_t algorithm = kUndecided;
  // The algorithm's name for traces ("" when undecided or for the
  // shared-memory engine): static text, so that no call builds a string.
  const char* algorithm_name = "";
  // The transport algorithm this decision runs, if it decided one.
  int8_t transport_algorithm() const { return engine == EngineKind::Transport ? algorithm : kUndecided; }
  // The hierarchical path this decision runs, if it decided one.
  int8_t hierarchical_path() const { return engine == EngineKind::Hierarchical ? algorithm : kUndecided; }
};

// TDIST_ALGO_<COLLECTIVE> of every collective with a table, read and checked
// once, when a group is made: a name that is not one of the collective's
// transport algorithms fails there (DistValueError naming the setting, the
// value and the valid names), not at the collective's first call.
class ForcedAlgorithms {
 public:
  // What a collective's setting forces.
  static constexpr int8_t kNone = -1;  // unset, or "shm": the selector decides
  // Reads and checks every TDIST_ALGO_<COLLECTIVE> of the environment.
  static ForcedAlgorithms from_environment();
  // The forced transport algorithm of `code` (an index into
  // transport_algorithms(code)), or kNone; kNone for an operation without a table.
  int8_t of(OpCode code) const { return has_table(code) ? forced_[collective_index(code)] : kNone; }
  // Checks one collective's setting (the lower-cased value): the index it
  // forces, or kNone for "" and "shm".
  static int8_t parse(OpCode code, const std::string& value);

 private:
  std::array<int8_t, kCollectives> forced_{kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone, kNone};
};

}  // namespace tdist
