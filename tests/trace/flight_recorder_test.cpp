// The flight recorder and the timeline, written by real ranks (forked
// processes over a TCPStore) and read back with tdist-trace's own reader, so
// that what the library writes is what the tool accepts. Then real faults: a
// rank that calls a collective with another shape, a rank that never enters
// one, a rank that leaves; tdist-trace must name each from the dumps the
// failures left behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <atomic>
#include <filesystem>
#include <thread>

#include "tdist/tdist.h"
#include "tdist/trace.h"
#include "common/harness.h"
#include "common/scoped_env.h"
#include "dump_reader.h"
#include "process_group/process_util.h"
#include "trace_test_util.h"

namespace tdist::testing {
namespace {

using std::chrono::milliseconds;
using trace_test::TempDir;

ttrace::Dump read_rank_in(const std::string& dir, int rank) {
  return ttrace::read_dump(dir + "/tdist_fr_" + std::to_string(rank) + ".json");
}
ttrace::Dump read_rank(const TempDir& dir, int rank) { return read_rank_in(dir.path(), rank); }

const ttrace::GroupRecord& default_group(const ttrace::Dump& d) {
  const auto* g = d.group("default_pg");
  if (!g) throw std::runtime_error(d.path + " has no default_pg group");
  return *g;
}

std::vector<float> filled(size_t n, float v) { return std::vector<float>(n, v); }

TEST(FlightRecorder, RecordsEveryOperationWithItsArguments) {
  TempDir dir;
  ScopedEnv where("TDIST_FLIGHT_RECORDER_DIR", dir.path());
  run_world(2, [&](int me) {
    auto a = filled(15, 1.0f);
    tdist::all_reduce(Tensor(a.data(), DType::Float32, {3, 5}), ReduceOp::MAX);
    std::vector<double> b(7, me);
    tdist::broadcast(Tensor(b.data(), DType::Float64, {7}), 1);
    std::vector<int32_t> in(4, me), out(8);
    auto work = tdist::all_gather_into_tensor(Tensor(out.data(), DType::Int32, {8}),
                                              Tensor(in.data(), DType::Int32, {4}), nullptr, /*async_op=*/true);
    work->wait();
    std::vector<int64_t> msg(3, 42);
    if (me == 0)
      tdist::send(Tensor(msg.data(), DType::Int64, {3}), 1);
    else
      tdist::recv(Tensor(msg.data(), DType::Int64, {3}), 0);
    tdist::barrier();
    require(tdist::dump_flight_recorder() == dir.file("tdist_fr_" + std::to_string(me) + ".json"),
            "dump_flight_recorder wrote elsewhere");
  });
  for (int r = 0; r < 2; ++r) {
    const ttrace::Dump d = read_rank(dir, r);
    EXPECT_EQ(d.info.rank, r);
    EXPECT_EQ(d.info.world_size, 2);
    EXPECT_EQ(d.reason, "request");
    const auto& g = default_group(d);
    EXPECT_EQ(g.ranks, (std::vector<int>{0, 1}));
    EXPECT_EQ(g.group_rank, r);
    EXPECT_EQ(g.capacity, 2000);
    EXPECT_EQ(g.dropped, 0);
    ASSERT_EQ(g.entries.size(), 5u) << d.path;
    const auto& e = g.entries;
    EXPECT_EQ(e[0].op, "all_reduce");
    EXPECT_EQ(e[0].seq, 1);
    EXPECT_EQ(e[0].dtype, "float32");
    EXPECT_EQ(e[0].shapes, (std::vector<ttrace::Shape>{{3, 5}}));
    EXPECT_EQ(e[0].bytes, 60);
    EXPECT_EQ(e[0].reduce_op, "max");
    EXPECT_EQ(e[0].engine, "shm");  // both ranks on this host
    EXPECT_EQ(e[1].op, "broadcast");
    EXPECT_EQ(e[1].root, 1);
    EXPECT_EQ(e[1].dtype, "float64");
    EXPECT_EQ(e[2].op, "all_gather_into_tensor");
    EXPECT_EQ(e[2].shapes, (std::vector<ttrace::Shape>{{4}}));
    EXPECT_EQ(e[2].out_shapes, (std::vector<ttrace::Shape>{{8}}));
    EXPECT_EQ(e[2].seq, 3);
    EXPECT_EQ(e[3].op, r == 0 ? "send" : "recv");
    EXPECT_TRUE(e[3].p2p);
    EXPECT_EQ(e[3].seq, 1);  // point-to-point operations count apart
    EXPECT_EQ(e[3].peer, 1 - r);
    EXPECT_EQ(e[4].op, "barrier");
    EXPECT_EQ(e[4].seq, 4);
    // Small blocking operations carry the coarse clock's times (and say so); the others the counter's.
    EXPECT_GT(e[0].time_resolution_us, 0);
    EXPECT_EQ(e[2].time_resolution_us, 0);  // async: it went through the queue
    int64_t previous = 0;  // the last time read with the counter
    for (const auto& x : e) {
      EXPECT_EQ(x.state, ttrace::State::kCompleted) << x.op;
      EXPECT_GT(x.queued_us, 0) << x.op;
      EXPECT_LE(x.queued_us, x.started_us) << x.op;
      // Coarse readings lag by a tick or more (the kernel may update them late): only precise
      // times are compared with each other.
      if (x.time_resolution_us == 0) {
        EXPECT_LE(previous, x.queued_us) << x.op << ": issued before the previous one was issued";
        previous = x.queued_us;
      }
      // Where nobody watches the ends, a completed operation's end is not read (docs/tracing.md).
      EXPECT_EQ(x.ended_us, 0) << x.op;
      EXPECT_LE(x.started_us, d.dump_time_us) << x.op;
    }
  }
}

// An operation with one input and one output keeps both shapes in its slot
// when each has at most one dimension (no allocation per call); any other
// shape goes to the ring's cold part. The dump reads them alike.
TEST(FlightRecorder, InputAndOutputShapesWhereverTheSlotKeepsThem) {
  TempDir dir;
  ScopedEnv where("TDIST_FLIGHT_RECORDER_DIR", dir.path());
  run_world(2, [&](int me) {
    std::vector<int32_t> in(4, me), out(8);
    tdist::all_gather_into_tensor(Tensor(out.data(), DType::Int32, {8}), Tensor(in.data(), DType::Int32, {4}));
    tdist::all_gather_into_tensor(Tensor(out.data(), DType::Int32, {4, 2}), Tensor(in.data(), DType::Int32, {2, 2}));
    std::vector<double> parts(2, me + 1.0);
    double mine = 0;
    tdist::reduce_scatter_tensor(Tensor(&mine, DType::Float64, {}), Tensor(parts.data(), DType::Float64, {2}));
    require(mine == 3.0, "reduce_scatter_tensor");
    tdist::dump_flight_recorder();
  });
  const ttrace::Dump d = read_rank(dir, 1);
  const auto& e = default_group(d).entries;
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].shapes, (std::vector<ttrace::Shape>{{4}}));
  EXPECT_EQ(e[0].out_shapes, (std::vector<ttrace::Shape>{{8}}));
  EXPECT_EQ(e[0].bytes, 16);
  EXPECT_EQ(e[1].shapes, (std::vector<ttrace::Shape>{{2, 2}}));
  EXPECT_EQ(e[1].out_shapes, (std::vector<ttrace::Shape>{{4, 2}}));
  EXPECT_EQ(e[1].bytes, 16);
  EXPECT_EQ(e[2].op, "reduce_scatter_tensor");
  EXPECT_EQ(e[2].dtype, "float64");
  EXPECT_EQ(e[2].shapes, (std::vector<ttrace::Shape>{{2}}));
  EXPECT_EQ(e[2].out_shapes, (std::vector<ttrace::Shape>{ttrace::Shape{}}));
  EXPECT_EQ(e[2].bytes, 16);
}

TEST(FlightRecorder, KeepsTheLastEntriesAndCountsTheDropped) {
  TempDir dir;
  ScopedEnv where("TDIST_FLIGHT_RECORDER_DIR", dir.path());
  ScopedEnv entries("TDIST_FLIGHT_RECORDER_ENTRIES", "4");
  run_world(2, [&](int) {
    float x = 1;
    for (int k = 0; k < 10; ++k) tdist::all_reduce(Tensor(&x, DType::Float32, {1}));
    tdist::dump_flight_recorder();
  });
  const ttrace::Dump d = read_rank(dir, 1);
  const auto& g = default_group(d);
  EXPECT_EQ(g.capacity, 4);
  EXPECT_EQ(g.dropped, 6);
  ASSERT_EQ(g.entries.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(g.entries[i].seq, 7 + i);
}

TEST(FlightRecorder, ZeroEntriesTurnsItOff) {
  TempDir dir;
  ScopedEnv entries("TDIST_FLIGHT_RECORDER_ENTRIES", "0");
  run_world(2, [&](int me) {
    float x = 1;
    tdist::all_reduce(Tensor(&x, DType::Float32, {1}));
    tdist::dump_flight_recorder(dir.file("off_" + std::to_string(me) + ".json"));
  });
  const ttrace::Dump d = ttrace::read_dump(dir.file("off_0.json"));
  EXPECT_TRUE(d.groups.empty());
}

TEST(FlightRecorder, RequestWithoutDestinationSaysWhatToSet) {
  ScopedEnv a("TDIST_FLIGHT_RECORDER_DIR", nullptr);
  ScopedEnv b("TORCH_FR_DUMP_TEMP_FILE", nullptr);
  try {
    tdist::dump_flight_recorder();
    FAIL() << "no error without a destination";
  } catch (const DistValueError& e) {
    EXPECT_NE(std::string(e.what()).find("TDIST_FLIGHT_RECORDER_DIR"), std::string::npos) << e.what();
  }
}

TEST(FlightRecorder, TorchPrefixNamesTheFiles) {
  TempDir dir;
  ScopedEnv prefix("TORCH_FR_DUMP_TEMP_FILE", dir.file("nccl_trace_rank_"));
  run_world(2, [&](int) {
    float x = 1;
    tdist::all_reduce(Tensor(&x, DType::Float32, {1}));
    tdist::dump_flight_recorder();
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(std::filesystem::exists(dir.file("nccl_trace_rank_" + std::to_string(r) + ".json"))) << r;
}

TEST(FlightRecorder, SubgroupsHaveTheirOwnRecords) {
  TempDir dir;
  ScopedEnv where("TDIST_FLIGHT_RECORDER_DIR", dir.path());
  run_world(3, [&](int me) {
    Group odd = tdist::new_group({0, 2});
    float x = 1;
    if (me != 1) tdist::all_reduce(Tensor(&x, DType::Float32, {1}), ReduceOp::SUM, odd);
    tdist::all_reduce(Tensor(&x, DType::Float32, {1}));
    tdist::dump_flight_recorder();
  });
  const ttrace::Dump d = read_rank(dir, 2);
  ASSERT_EQ(d.groups.size(), 2u);
  const ttrace::GroupRecord* sub = nullptr;
  for (const auto& g : d.groups)
    if (g.name != "default_pg") sub = &g;
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(sub->group_rank, 1);
  ASSERT_EQ(sub->entries.size(), 1u);
  EXPECT_EQ(sub->entries[0].op, "all_reduce");
  // The default group's last entry is the all_reduce (new_group may use it before).
  ASSERT_FALSE(default_group(d).entries.empty());
  EXPECT_EQ(default_group(d).entries.back().op, "all_reduce");
}

// --- real faults, read by tdist-trace ------------------------------------------

// Forks n ranks whose body is expected to fail its collectives: each catches
// its DistError (and says so); a rank fails only by reaching `expect_error`
// without one.
void run_faulty(int n, milliseconds timeout, const std::function<void(int)>& body) {
  Shared<PortBoard> board;
  auto results = run_in_processes(
      n,
      [&](int rank) {
        init_process_world(*board, rank, n, timeout);
        body(rank);
      },
      std::chrono::seconds(120));
  EXPECT_EQ(describe_failures(results), "");
}

// Runs `op`, which must throw a DistError; the error is printed for the log.
void expect_error(int me, const std::function<void()>& op) {
  try {
    op();
  } catch (const DistError& e) {
    std::fprintf(stderr, "[rank %d] failed, as expected: %s\n", me, e.what());
    return;
  }
  require(false, "rank " + std::to_string(me) + ": the faulty collective passed");
}

// tdist-trace's findings of `kind`, from its --json report.
std::vector<const ttrace::JsonValue*> findings(const ttrace::JsonValue& report, const std::string& kind) {
  std::vector<const ttrace::JsonValue*> out;
  const ttrace::JsonValue* all = report.find("findings");
  if (!all) return out;
  for (const auto& f : all->items())
    if (const auto* k = f.find("kind"); k && k->as_string() == kind) out.push_back(&f);
  return out;
}

std::string wait_for_file(const std::string& path, milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!std::filesystem::exists(path) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(milliseconds(20));
  return std::filesystem::exists(path) ? path : "";
}

TEST(FlightRecorderFaults, AShapeMismatchIsNamedFromTheFailureDumps) {
  TempDir dir;
  ScopedEnv where("TDIST_FLIGHT_RECORDER_DIR", dir.path());
  ScopedEnv detail("TDIST_DEBUG", "DETAIL");  // the ranks compare arguments and fail at once
  run_faulty(3, milliseconds(10000), [&](int me) {
    std::vector<float> a(8, 1.0f);
    tdist::all_reduce(Tensor(a.data(), DType::Float32, {8}));
    expect_error(me, [&] { tdist::all_reduce(Tensor(a.data(), DType::Float32, {me == 2 ? 6 : 8})); });
  });
  for (int r = 0; r < 3; ++r) {
    const ttrace::Dump d = read_rank(dir, r);  // written by the failure itself
    EXPECT_EQ(d.reason, "failure") << d.path;
    const auto& g = default_group(d);
    ASSERT_EQ(g.entries.size(), 2u) << d.path;
    EXPECT_EQ(g.entries[1].state, ttrace::State::kFailed) << d.path;
    EXPECT_FALSE(g.entries[1].error.empty()) << d.path;
  }
  const auto r = trace_test::run_tool({"--json", dir.path()});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  const auto report = trace_test::parse(r.out);
  const auto mismatch = findings(report, "mismatch");
  ASSERT_EQ(mismatch.size(), 1u) << r.out;
  EXPECT_EQ(mismatch[0]->find("seq")->as_int(), 2) << r.out;
  const std::string words = trace_test::run_tool({dir.path()}).out;
  EXPECT_NE(words.find("[6]"), std::string::npos) << words;
  EXPECT_NE(words.find("[8]"), std::string::npos) << words;
}

TEST(FlightRecorderFaults, ARankThatNeverEntersIsNamed) {
  TempDir dir;
  ScopedEnv where("TDIST_FLIGHT_RECORDER_DIR", dir.path());
  Shared<std::atomic<int>> timed_out;
  run_faulty(3, milliseconds(5000), [&](int me) {
    float x = 1;
    for (int k = 0; k < 2; ++k) tdist::all_reduce(Tensor(&x, DType::Float32, {1}));
    if (me == 2) {
      // Hung elsewhere until the others gave up; then a SIGUSR1 makes it dump.
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (timed_out->load() < 2 && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(milliseconds(10));
      require(raise(SIGUSR1) == 0, "raise");
      require(!wait_for_file(dir.file("tdist_fr_2.json"), milliseconds(20000)).empty(), "no dump on SIGUSR1");
      std::_Exit(0);  // as a killed rank would: no goodbye to the others
    }
    expect_error(me, [&] { tdist::all_reduce(Tensor(&x, DType::Float32, {1})); });
    timed_out->fetch_add(1);
    std::_Exit(0);
  });
  EXPECT_EQ(read_rank(dir, 0).reason, "timeout");
  EXPECT_EQ(read_rank(dir, 2).reason, "signal");
  const auto r = trace_test::run_tool({"--json", dir.path()});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  const auto report = trace_test::parse(r.out);
  const auto never = findings(report, "never_entered");
  ASSERT_EQ(never.size(), 1u) << r.out;
  EXPECT_EQ(never[0]->find("seq")->as_int(), 3) << r.out;
  EXPECT_EQ(trace_test::ints_of(never[0]->find("ranks")), (std::vector<int64_t>{2})) << r.out;
}

TEST(FlightRecorderFaults, ARankThatLeftIsNamed) {
  TempDir dir;
  ScopedEnv where("TDIST_FLIGHT_RECORDER_DIR", dir.path());
  run_faulty(3, milliseconds(5000), [&](int me) {
    float x = 1;
    tdist::all_reduce(Tensor(&x, DType::Float32, {1}));
    if (me == 1) std::_Exit(0);  // leaves without a word, and without a dump
    expect_error(me, [&] { tdist::all_reduce(Tensor(&x, DType::Float32, {1})); });
    std::_Exit(0);
  });
  const auto r = trace_test::run_tool({"--json", dir.path()});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  const auto report = trace_test::parse(r.out);
  const auto missing = findings(report, "missing_dump");
  ASSERT_EQ(missing.size(), 1u) << r.out;
  EXPECT_NE(trace_test::run_tool({dir.path()}).out.find("rank 1"), std::string::npos);
}

TEST(FlightRecorderFaults, ASlowRankIsNamed) {
  TempDir dir;
  ScopedEnv where("TDIST_FLIGHT_RECORDER_DIR", dir.path());
  Shared<std::atomic<int>> entering;
  run_world(3, [&](int me) {
    // Large enough for the counter's times (kPreciseElements). Rank 1 enters each collective only
    // after the others said they are entering it, and 50 ms later still: last whatever the load.
    std::vector<float> a(8192, 1.0f);
    for (int k = 0; k < 8; ++k) {
      if (me == 1) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (entering->load() < 2 * (k + 1) && std::chrono::steady_clock::now() < end)
          std::this_thread::sleep_for(milliseconds(1));
        std::this_thread::sleep_for(milliseconds(50));
      } else {
        entering->fetch_add(1);
      }
      tdist::all_reduce(Tensor(a.data(), DType::Float32, {8192}));
    }
    tdist::dump_flight_recorder();
  });
  const auto r = trace_test::run_tool({"--json", dir.path()});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  const auto report = trace_test::parse(r.out);
  const auto slow = findings(report, "slow_rank");
  ASSERT_EQ(slow.size(), 1u) << r.out;
  const auto* groups = report.find("groups");
  ASSERT_NE(groups, nullptr);
  const auto* slowest = groups->items().at(0).find("slowest");
  ASSERT_NE(slowest, nullptr) << r.out;
  EXPECT_EQ(slowest->find("rank")->as_int(), 1) << r.out;
  EXPECT_GE(slowest->find("median_behind_first_us")->as_int(), 10000) << r.out;
}

// --- folders and signals --------------------------------------------------------------

int mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 0777);
}

// The README's flow on a fresh machine: the folders do not exist yet. init makes them, parents
// too, readable by their owner only (traces and dumps show what the job computed).
TEST(TraceFolders, MissingFoldersAreMadeOwnerOnlyAtInit) {
  TempDir dir;
  const std::string fr = dir.file("a/b/fr"), tl = dir.file("c/tl");
  ScopedEnv where("TDIST_FLIGHT_RECORDER_DIR", fr);
  ScopedEnv trace("TDIST_TRACE", tl);
  run_world(2, [&](int) {
    float x = 1;
    tdist::all_reduce(Tensor(&x, DType::Float32, {1}));
    tdist::dump_flight_recorder();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(std::filesystem::exists(fr + "/tdist_fr_" + std::to_string(r) + ".json")) << r;
    EXPECT_TRUE(std::filesystem::exists(tl + "/tdist_trace_" + std::to_string(r) + ".jsonl")) << r;
  }
  for (const char* made : {"a", "a/b", "a/b/fr", "c", "c/tl"}) EXPECT_EQ(mode_of(dir.file(made)), 0700) << made;
}

// A 1-rank init in this process; the error it throws, or "" when it succeeded.
std::string init_error() {
  InitOptions o;
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.world_size = 1;
  try {
    init_process_group(o);
  } catch (const DistValueError& e) {
    return e.what();
  }
  tdist::destroy_process_group();
  return "";
}

// A folder that cannot be made is refused by init_process_group, naming the setting, the path
// and why, instead of the job running on and writing nothing.
TEST(TraceFolders, AFolderThatCannotBeMadeIsRefusedAtInit) {
  TempDir dir;
  const std::string file = dir.file("a_file");
  { std::FILE* f = std::fopen(file.c_str(), "w"); ASSERT_NE(f, nullptr); std::fclose(f); }
  for (const char* setting : {"TDIST_FLIGHT_RECORDER_DIR", "TDIST_TRACE"}) {
    for (const std::string& path : {file, file + "/sub"}) {
      ScopedEnv bad(setting, path);
      const std::string error = init_error();
      EXPECT_NE(error.find(std::string(setting) + "=" + path), std::string::npos) << setting << " " << error;
      EXPECT_NE(error.find(path == file ? "not a folder" : "cannot create"), std::string::npos) << error;
    }
  }
  ScopedEnv bad("TORCH_FR_DUMP_TEMP_FILE", file + "/nccl_trace_rank_");
  EXPECT_NE(init_error().find("TORCH_FR_DUMP_TEMP_FILE"), std::string::npos);
}

// Forks n ranks like run_world, each writing its stderr to dir/err<rank>.
void run_world_logged(int n, const TempDir& dir, const std::function<void(int)>& body) {
  Shared<PortBoard> board;
  auto results = run_in_processes(
      n,
      [&](int rank) {
        const int fd = ::open(dir.file("err" + std::to_string(rank)).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        require(fd >= 0 && ::dup2(fd, 2) == 2, "cannot redirect stderr");
        init_process_world(*board, rank, n, milliseconds(30000));
        body(rank);
        tdist::destroy_process_group();
      },
      std::chrono::seconds(90));
  EXPECT_EQ(describe_failures(results), "");
}

// SIGUSR1 never kills a process that initialised tdist: without a folder it dumps to
// TMPDIR/tdist-flight-recorder-<uid> (made owner-only) and says where, in one line.
TEST(SignalDumps, WithoutAFolderSigusr1DumpsToTheDefaultFolderAndSaysWhere) {
  TempDir dir;
  ScopedEnv tmp("TMPDIR", dir.path());
  ScopedEnv a("TDIST_FLIGHT_RECORDER_DIR", nullptr);
  ScopedEnv b("TORCH_FR_DUMP_TEMP_FILE", nullptr);
  const std::string folder = dir.file("tdist-flight-recorder-" + std::to_string(::getuid()));
  run_world_logged(2, dir, [&](int me) {
    float x = 1;
    tdist::all_reduce(Tensor(&x, DType::Float32, {1}));
    require(raise(SIGUSR1) == 0, "raise");
    const std::string dump = folder + "/tdist_fr_" + std::to_string(me) + ".json";
    require(!wait_for_file(dump, milliseconds(20000)).empty(), "no dump on SIGUSR1 in " + folder);
    tdist::all_reduce(Tensor(&x, DType::Float32, {1}));  // and the job goes on
  });
  EXPECT_EQ(mode_of(folder), 0700);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(read_rank_in(folder, r).reason, "signal");
    const std::string err = trace_test::read_text(dir.file("err" + std::to_string(r)));
    const std::string said = "dumped on SIGUSR1 to " + folder + "/tdist_fr_" + std::to_string(r) + ".json";
    EXPECT_NE(err.find(said), std::string::npos) << err;
    EXPECT_EQ(err.find("SIGUSR1"), err.rfind("SIGUSR1")) << "one line: " << err;
  }
}

// The default folder sits in a folder others may write to: a link planted there is refused,
// the dump fails with a log line, and the process still lives.
TEST(SignalDumps, ALinkInPlaceOfTheDefaultFolderIsRefused) {
  TempDir dir, elsewhere;
  ScopedEnv tmp("TMPDIR", dir.path());
  ScopedEnv a("TDIST_FLIGHT_RECORDER_DIR", nullptr);
  const std::string folder = dir.file("tdist-flight-recorder-" + std::to_string(::getuid()));
  ASSERT_EQ(::symlink(elsewhere.path().c_str(), folder.c_str()), 0);
  run_world_logged(1, dir, [&](int) {
    require(raise(SIGUSR1) == 0, "raise");
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (trace_test::read_text(dir.file("err0")).find("SIGUSR1") == std::string::npos &&
           std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(milliseconds(10));
  });
  EXPECT_NE(trace_test::read_text(dir.file("err0")).find("the dump on SIGUSR1 failed"), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere.path()));
}

// --- the timeline -------------------------------------------------------------------

TEST(Timeline, EveryRankWritesItsOperationsAndTheyMerge) {
  TempDir dir;
  ScopedEnv trace("TDIST_TRACE", dir.path());
  run_world(3, [&](int me) {
    std::vector<float> a(1000, 1.0f);
    for (int k = 0; k < 5; ++k) tdist::all_reduce(Tensor(a.data(), DType::Float32, {1000}));
    tdist::broadcast(Tensor(a.data(), DType::Float32, {1000}), 2);
    if (me == 0) tdist::send(Tensor(a.data(), DType::Float32, {10}), 1);
    if (me == 1) tdist::recv(Tensor(a.data(), DType::Float32, {10}), 0);
  });
  for (int r = 0; r < 3; ++r) {
    const std::string text = trace_test::read_text(dir.file("tdist_trace_" + std::to_string(r) + ".jsonl"));
    const size_t lines = std::count(text.begin(), text.end(), '\n');
    EXPECT_EQ(lines, r == 2 ? 7u : 8u) << text;  // the header and every operation
    // The ranks share this host's clock: the offset measured through the store is 0 within its
    // error bound (half the exchange's round trip, which brackets rank 0's reading).
    const auto header = trace_test::parse(text.substr(0, text.find('\n')));
    ASSERT_NE(header.find("clock_error_us"), nullptr) << text.substr(0, 200);
    const int64_t offset = header.find("clock_offset_us")->as_int();
    const int64_t error = header.find("clock_error_us")->as_int();
    EXPECT_LE(std::abs(offset), error + 1) << "rank " << r;
    if (r == 0) EXPECT_EQ(offset, 0);
  }
  const std::string merged = dir.file("merged.json");
  const auto r = trace_test::run_tool({"--timeline", dir.path(), "-o", merged});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const auto doc = trace_test::parse(trace_test::read_text(merged));
  std::set<int64_t> pids;
  int all_reduces = 0;
  for (const auto& ev : doc.find("traceEvents")->items()) {
    if (ev.find("ph")->as_string() != "X") continue;
    pids.insert(ev.find("pid")->as_int());
    if (ev.find("name")->as_string().find("all_reduce") != std::string::npos) ++all_reduces;
  }
  EXPECT_EQ(pids.size(), 3u) << "one track per rank";
  EXPECT_EQ(all_reduces, 15);
}

}  // namespace
}  // namespace tdist::testing
