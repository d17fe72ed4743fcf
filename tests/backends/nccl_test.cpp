// The nccl backend where there is no GPU (here, and in CI): how it is
// registered, whether NCCL loads and what it says when it does not, what
// making a group without a device says, and what it refuses before
// anything is enqueued. Its operations on a GPU: nccl_gpu_test.cpp.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backends/nccl/nccl_types.h"
#include "backends/backend_registry.h"
#include "tdist/tdist.h"
#include "util/env.h"
#include "util/settings.h"

extern char** environ;

namespace tdist {
namespace {

bool has_gpu() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  return ok;
}

ProcessGroupOptions nccl_options(int device_id) {
  ProcessGroupOptions o;
  o.backend = "nccl";
  if (device_id >= 0) o.device_id = Device{DeviceType::CUDA, device_id};
  o.timeout = std::chrono::seconds(30);
  return o;
}

TEST(NcclRegistry, ServesCudaOnly) {
  BackendEntry entry = lookup_backend("nccl");
  EXPECT_EQ(entry.devices, std::vector<DeviceType>{DeviceType::CUDA});
  EXPECT_FALSE(entry.world_from_mpi);
}

TEST(NcclLibrary, LoadsFromTheToolkit) {
  if (std::getenv("TDIST_NCCL_LIBRARY")) GTEST_SKIP() << "TDIST_NCCL_LIBRARY is set: this checks the default search";
  EXPECT_TRUE(is_nccl_available());
  EXPECT_EQ(nccl_version().rfind("2.", 0), 0u) << nccl_version();
}

// Run in a child process (the library is loaded once per process): with
// TDIST_NCCL_LIBRARY naming a file that is not there, NCCL is unavailable and
// making a group says where it looked.
TEST(NcclLibrary, ChildWithMissingLibrary) {
  if (!std::getenv("TDIST_NCCL_TEST_CHILD")) GTEST_SKIP() << "run by NcclLibrary.UnavailableWhereTheLibraryIsNot";
  if (is_nccl_available()) std::_Exit(10);
  if (!nccl_version().empty()) std::_Exit(11);
  try {
    ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, nccl_options(-1));
    std::_Exit(12);
  } catch (const DistBackendError& e) {
    const std::string m = e.what();
    if (m.find("rank 0") == std::string::npos || m.find("/nonexistent") == std::string::npos ||
        m.find("TDIST_NCCL_LIBRARY") == std::string::npos)
      std::_Exit(13);
  }
  std::_Exit(0);
}

TEST(NcclLibrary, UnavailableWhereTheLibraryIsNot) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("TDIST_NCCL_LIBRARY=", 0) != 0) env.emplace_back(*e);
  env.emplace_back("TDIST_NCCL_LIBRARY=/nonexistent/libnccl.so.2");
  env.emplace_back("TDIST_NCCL_TEST_CHILD=1");
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe", filter = "--gtest_filter=NcclLibrary.ChildWithMissingLibrary";
  char* argv[] = {self.data(), filter.data(), nullptr};
  pid_t pid = 0;
  posix_spawn_file_actions_t quiet;  // the child's report would interleave with ours
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  const int rc = posix_spawn(&pid, "/proc/self/exe", &quiet, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&quiet);
  ASSERT_EQ(rc, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: available anyway; 11: a version; 12: the group was made; "
                                       "13: the error does not say where it looked";
}

TEST(NcclGroup, EagerWithoutDeviceNamesRank) {
  if (has_gpu()) GTEST_SKIP() << "a CUDA device is present: this checks the machine without one";
  try {
    ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, nccl_options(0));
    FAIL() << "a group with device_id 0 was made without a CUDA device";
  } catch (const DistBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 in group default_pg"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

TEST(NcclGroup, LazyGroupFailsAtFirstOperationWithoutDevice) {
  if (has_gpu()) GTEST_SKIP() << "a CUDA device is present: this checks the machine without one";
  ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, nccl_options(-1));
  float fake = 0;  // never touched: the device check comes first
  Tensor t(&fake, DType::Float32, {1}, Device{DeviceType::CUDA, 0});
  auto work = pg.all_reduce(t, AllReduceOptions{.async_op = false});
  try {
    work->wait();
    FAIL() << "all_reduce ran without a CUDA device";
  } catch (const DistBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce #1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

TEST(NcclGroup, FrontRefusesCpuTensorNamingDeviceAndBackend) {
  ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, nccl_options(-1));
  std::vector<float> v(4, 1.0f);
  try {
    pg.all_reduce(Tensor(v));
    FAIL() << "a CPU tensor went to an nccl-only group";
  } catch (const DistValueError& e) {
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nccl"), std::string::npos) << e.what();
  }
}

TEST(NcclGroup, MonitoredBarrierIsUnsupportedAndSaysWhatToUse) {
  ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, nccl_options(-1));
  try {
    pg.monitored_barrier(std::chrono::seconds(1));
    FAIL();
  } catch (const DistBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("does not support monitored_barrier"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu:tdist,cuda:nccl"), std::string::npos) << e.what();
  }
}

TEST(NcclGroup, CoalescingDoesNotNestAndAnEmptyBatchIsNothing) {
  ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, nccl_options(-1));
  Backend& b = pg.backend_for(Device{DeviceType::CUDA, 0});
  b.start_coalescing();
  EXPECT_THROW(b.start_coalescing(), DistValueError);
  EXPECT_NO_THROW(b.end_coalescing());
  EXPECT_NO_THROW(b.end_coalescing());
}

TEST(NcclGroup, EmulatedCudaIsRefused) {
  setenv("TDIST_EMULATE_CUDA", "2", 1);
  try {
    ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, nccl_options(-1));
    unsetenv("TDIST_EMULATE_CUDA");
    FAIL() << "nccl accepted emulated devices";
  } catch (const DistBackendError& e) {
    unsetenv("TDIST_EMULATE_CUDA");
    EXPECT_NE(std::string(e.what()).find("TDIST_EMULATE_CUDA"), std::string::npos) << e.what();
  }
}

// --- what NCCL cannot do, refused naming op and dtype -----------------------

std::string refusal(ReduceOp op, DType dtype) {
  try {
    nccl::reduced_as(op, dtype, 4, "rank 0 in group g: all_reduce");
  } catch (const DistBackendError& e) {
    return e.what();
  }
  return "";
}

TEST(NcclTypes, RefusesWhatNcclCannotReduce) {
  for (ReduceOp::Kind k : {ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR}) {
    const std::string m = refusal(k, DType::Int32);
    EXPECT_NE(m.find("nccl cannot " + std::string(ReduceOp(k).name()) + " int32"), std::string::npos) << m;
  }
  EXPECT_NE(refusal(ReduceOp::SUM, DType::Int16).find("int16"), std::string::npos);
  EXPECT_NE(refusal(ReduceOp::PRODUCT, DType::Complex64).find("complex64"), std::string::npos);
  EXPECT_NE(refusal(ReduceOp::AVG, DType::Bool).find("bool"), std::string::npos);
  EXPECT_NE(refusal(ReduceOp::premul_sum(2.0), DType::Int64).find("int64"), std::string::npos);
  EXPECT_EQ(refusal(ReduceOp::AVG, DType::Int32), "");
  EXPECT_EQ(refusal(ReduceOp::premul_sum(0.5), DType::BFloat16), "");
}

TEST(NcclTypes, MapsBoolAndComplex) {
  auto r = nccl::reduced_as(ReduceOp::SUM, DType::Bool, 5, "x");
  EXPECT_EQ(r.type, ncclUint8);
  EXPECT_EQ(r.op, ncclMax);  // logical or
  r = nccl::reduced_as(ReduceOp::PRODUCT, DType::Bool, 5, "x");
  EXPECT_EQ(r.op, ncclMin);  // logical and
  r = nccl::reduced_as(ReduceOp::SUM, DType::Complex128, 5, "x");
  EXPECT_EQ(r.type, ncclFloat64);
  EXPECT_EQ(r.count, 10u);
  r = nccl::reduced_as(ReduceOp::premul_sum(3.0), DType::Complex64, 5, "x");
  EXPECT_TRUE(r.premul);
  EXPECT_EQ(r.type, ncclFloat32);
  auto m = nccl::moved_as(DType::Int16, 7);  // moved as bytes
  EXPECT_EQ(m.type, ncclUint8);
  EXPECT_EQ(m.count, 14u);
}

// --- settings ----------------------------------------------------------------

TEST(NcclSettings, RegisteredWithTorchNames) {
  const SettingInfo* lib = find_setting("TDIST_NCCL_LIBRARY");
  ASSERT_NE(lib, nullptr);
  const SettingInfo* blocking = find_setting("TDIST_NCCL_BLOCKING_WAIT");
  ASSERT_NE(blocking, nullptr);
  EXPECT_STREQ(blocking->torch_name, "TORCH_NCCL_BLOCKING_WAIT");
}

TEST(NcclSettings, NcclsOwnVariablesPassThrough) {
  // NCCL reads NCCL_*; tdist neither checks nor changes them.
  setenv("NCCL_DEBUG", "not-a-level", 1);
  setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  EXPECT_NO_THROW(check_environment());
  ProcessGroup pg(std::make_shared<HashStore>(), 0, 1, nccl_options(-1));
  EXPECT_STREQ(std::getenv("NCCL_DEBUG"), "not-a-level");
  EXPECT_STREQ(std::getenv("NCCL_SOCKET_IFNAME"), "=lo");
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_SOCKET_IFNAME");
}

}  // namespace
}  // namespace tdist
