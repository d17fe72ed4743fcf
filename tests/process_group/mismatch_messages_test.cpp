// What a user's mistake gets: ranks that call one collective with different
// sizes or dtypes, over TCP and over shared memory, and a reduce op that
// means nothing for the dtype. Each error must say what differs, in the
// words of the call (operation and sequence number, dtype, elements, ranks),
// never a raw message tag.
#include <atomic>
#include <regex>

#include "common/scoped_env.h"
#include "process_group/process_util.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;

// A message tag is a 64-bit number; nothing else in these errors is that long.
bool shows_a_raw_tag(const std::string& m) { return std::regex_search(m, std::regex("[0-9]{10,}")); }

// The DistError a call throws ("" when it succeeds).
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const DistError& e) {
    return e.what();
  }
  return "";
}

// Over TCP a size mismatch is found by the receiving transport, which knew
// the message only by its tag: the error decodes it.
TEST(MismatchMessages, ASizeMismatchOverTcpNamesTheOperationNotItsTag) {
  ScopedEnv tcp("TDIST_SHM", "0");
  Shared<std::atomic<int>> decoded;
  run_world(2, [&](int me) {
    std::vector<float> ok(4, 1.0f);
    tdist::all_reduce(ok);  // #1
    std::vector<float> v(me == 0 ? 10 : 20, 1.0f);
    const std::string m = error_of([&] { tdist::all_reduce(v); });  // #2
    std::fprintf(stderr, "[rank %d] got: %s\n", me, m.c_str());
    require(!m.empty(), "rank " + std::to_string(me) + ": all_reduce of 10 and 20 elements succeeded");
    require(has(m, "all_reduce #2"), "the error does not name the operation: " + m);
    require(!shows_a_raw_tag(m), "the error shows a raw tag: " + m);
    if (has(m, "size mismatch with")) {
      require(has(m, "in all_reduce #2 (float32, SUM, step "),
              "the mismatch does not name the message's operation: " + m);
      decoded->fetch_add(1);
    }
  });
  EXPECT_GT(decoded->load(), 0) << "no rank reported the size mismatch itself";
}

// Over shared memory every rank publishes its call (operation, sequence
// number, dtype, bytes): a rank that sees another's differ says how.
TEST(MismatchMessages, ADtypeMismatchOverSharedMemorySaysWhatDiffers) {
  ScopedEnv shm("TDIST_SHM", "1");
  run_world(2, [&](int me) {
    std::vector<float> ok(4, 1.0f);
    tdist::all_reduce(ok);  // #1
    std::vector<float> f(4096, 1.0f);
    std::vector<int32_t> i(4096, 1);
    const std::string m = error_of([&] {
      if (me == 1)
        tdist::all_reduce(f);  // #2
      else
        tdist::all_reduce(i);
    });
    std::fprintf(stderr, "[rank %d] got: %s\n", me, m.c_str());
    require(!m.empty(), "rank " + std::to_string(me) + ": all_reduce of float32 and int32 succeeded");
    require(!shows_a_raw_tag(m), "the error shows a raw tag: " + m);
    // Whichever rank finds it first says it; the other fails with that
    // rank's verdict, which carries its words.
    const std::string found_by_0 =
        "rank 1 called all_reduce #2 on float32 (4096 elements, SUM) while rank 0 called it on int32 "
        "(4096 elements, SUM)";
    const std::string found_by_1 =
        "rank 0 called all_reduce #2 on int32 (4096 elements, SUM) while rank 1 called it on float32 "
        "(4096 elements, SUM)";
    require(has(m, found_by_0) || has(m, found_by_1),
            "rank " + std::to_string(me) + ": the error does not say what differs: " + m);
  });
}

// BAND on float32 is refused before anything is sent, naming the rank, the
// group and the call; the group goes on (nothing of the call was sent).
TEST(MismatchMessages, AReduceOpTheDtypeLacksIsRefusedNamingRankGroupAndCall) {
  run_world(2, [&](int me) {
    std::vector<float> ok(4, 1.0f);
    tdist::all_reduce(ok);  // #1
    std::vector<float> f(8, 1.0f);
    const std::string m = value_error_of([&] { tdist::all_reduce(f, ReduceOp::BAND); }, "BAND on float32");
    const std::string want = "rank " + std::to_string(me) +
                             " in group default_pg: all_reduce #2: ReduceOp.BAND is not defined for float32 "
                             "(bitwise ops need an integer or bool tensor";
    require(has(m, want), "got: " + m + "\n  expected: " + want);
    Group g = tdist::new_group({0, 1});
    const std::string in_group = value_error_of([&] { tdist::reduce(f, 0, ReduceOp::BXOR, g); }, "BXOR on float32");
    require(has(in_group, "rank " + std::to_string(me) + " in group ") && has(in_group, ": reduce #1: ReduceOp.BXOR"),
            "got: " + in_group);
    require(!has(in_group, "default_pg"), "the subgroup's error names the default group: " + in_group);
    tdist::all_reduce(ok);  // the refused calls sent nothing: #2 again, on every rank
    require(ok[0] == 4.0f, "all_reduce after the refused ones gave " + std::to_string(ok[0]));
  });
}

}  // namespace
}  // namespace tdist::testing
