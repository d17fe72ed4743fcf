// The emulated CUDA runtime: its memory is found by device_of, its IPC
// handles map the same pages in another process, its kernels are the
// reduction kernels, its streams wait on host words as a GPU's do (and its
// frees synchronize as cudaFreeHost does), and devices outside its count are
// refused by name.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "common/harness.h"
#include "device/device_runtime.h"
#include "tdist/errors.h"

namespace tdist::testing {
namespace {

using device::Runtime;

TEST(EmulatedRuntime, CountsDevicesAndTracksCurrentDevicePerThread) {
  auto rt = device::make_emulated_cuda_runtime(2);
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(rt->device_count(), 2);
  EXPECT_EQ(rt->unavailable_reason(), "");
  EXPECT_EQ(rt->current_device(), 0);
  rt->set_device(1);
  EXPECT_EQ(rt->current_device(), 1);
  std::thread([&] { EXPECT_EQ(rt->current_device(), 0); }).join();
  rt->set_device(0);
  EXPECT_EQ(device::make_emulated_cuda_runtime(0), nullptr);
}

TEST(EmulatedRuntime, RefusesADeviceOutsideItsCountNamingIt) {
  auto rt = device::make_emulated_cuda_runtime(1);
  try {
    rt->alloc_device(1, 64);
    FAIL() << "alloc_device on cuda:1 of one device succeeded";
  } catch (const DistValueError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rt->set_device(-1), DistValueError);
}

TEST(EmulatedRuntime, DeviceOfAnswersFromItsAllocations) {
  auto rt = device::make_emulated_cuda_runtime(2);
  char* a = static_cast<char*>(rt->alloc_device(0, 1000));
  char* b = static_cast<char*>(rt->alloc_device(1, 0));  // empty: still a distinct address
  EXPECT_EQ(rt->device_of(a), 0);
  EXPECT_EQ(rt->device_of(a + 999), 0);
  EXPECT_EQ(rt->device_of(b), 1);
  std::vector<char> host(16);
  EXPECT_EQ(rt->device_of(host.data()), -1);
  void* pinned = rt->alloc_pinned(100);
  EXPECT_EQ(rt->device_of(pinned), -1);
  rt->free_pinned(pinned);
  rt->free_device(0, a);
  EXPECT_EQ(rt->device_of(a), -1);
  rt->free_device(1, b);
}

TEST(EmulatedRuntime, CopiesAndEventsCompleteAtOnceWithoutHostWords) {
  auto rt = device::make_emulated_cuda_runtime(1);
  void* stream = rt->create_stream(0);
  void* event = rt->create_event(0);
  int* d = static_cast<int*>(rt->alloc_device(0, 4 * sizeof(int)));
  int in[4] = {1, 2, 3, 4}, out[4] = {};
  rt->copy(d, in, sizeof(in), stream);
  rt->record(event, stream);
  rt->stream_wait(nullptr, event);
  rt->copy(out, d, sizeof(out), nullptr);
  EXPECT_TRUE(rt->query(event));
  rt->synchronize(event);
  rt->synchronize_stream(stream);
  EXPECT_EQ(std::memcmp(in, out, sizeof(in)), 0);
  rt->free_device(0, d);
  rt->destroy_event(event);
  rt->destroy_stream(stream);
}

// Sets `word` to `value` after `delay` on another thread (a queue thread finishing an operation).
std::thread set_later(uint32_t* word, uint32_t value, std::chrono::milliseconds delay) {
  return std::thread([=] {
    std::this_thread::sleep_for(delay);
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
  });
}

// A stream that waits on a host word runs nothing after the wait until the word is set; an event
// recorded there is pending until then, and a stream made to wait for that event waits too.
TEST(EmulatedRuntime, HostWordWaitsHoldTheStreamAndWhatWaitsOnIt) {
  auto rt = device::make_emulated_cuda_runtime(1);
  ASSERT_TRUE(rt->can_wait_on_host_word(0));
  void* stream = rt->create_stream(0);
  void* other = rt->create_stream(0);
  void* event = rt->create_event(0);
  auto* word = static_cast<uint32_t*>(rt->alloc_pinned(sizeof(uint32_t)));
  *word = 0;
  rt->stream_wait_host_word(stream, word, 2);
  rt->record(event, stream);
  EXPECT_FALSE(rt->query(event));
  rt->stream_wait(other, event);
  int in = 7, out = 0;
  __atomic_store_n(word, 1, __ATOMIC_RELEASE);  // not yet: 1 < 2
  EXPECT_FALSE(rt->query(event));
  std::thread setter = set_later(word, 2, std::chrono::milliseconds(50));
  rt->copy(&out, &in, sizeof(in), other);  // runs once the word reaches 2
  EXPECT_EQ(__atomic_load_n(word, __ATOMIC_ACQUIRE), 2u);
  EXPECT_EQ(out, 7);
  EXPECT_TRUE(rt->query(event));
  rt->synchronize_stream(stream);
  setter.join();
  rt->free_pinned(word);
  rt->destroy_event(event);
  rt->destroy_stream(other);
  rt->destroy_stream(stream);
}

// free_pinned synchronizes the device as cudaFreeHost does: it waits for every stream's host
// words (the default stream's too), however late another thread sets them (the default patience
// of 60 s is far past the setter's delay, also on a loaded machine).
TEST(EmulatedRuntime, FreeingWaitsForHostWordsSetLater) {
  auto rt = device::make_emulated_cuda_runtime(1);
  auto* word = static_cast<uint32_t*>(rt->alloc_pinned(sizeof(uint32_t)));
  *word = 0;
  void* scratch = rt->alloc_pinned(64);
  rt->stream_wait_host_word(nullptr, word, 1);
  std::thread setter = set_later(word, 1, std::chrono::milliseconds(50));
  rt->free_pinned(scratch);  // returns once the word is set
  EXPECT_EQ(__atomic_load_n(word, __ATOMIC_ACQUIRE), 1u);
  setter.join();
  rt->free_pinned(word);
}

// A word nobody sets is reported after the runtime's patience, naming it, not hung on. Nothing
// here depends on timing: the word is never set while free_pinned waits.
TEST(EmulatedRuntime, FreeingReportsAHostWordNeverSet) {
  auto rt = device::make_emulated_cuda_runtime(1, std::chrono::milliseconds(300));
  auto* word = static_cast<uint32_t*>(rt->alloc_pinned(sizeof(uint32_t)));
  *word = 1;
  void* scratch = rt->alloc_pinned(64);
  void* stream = rt->create_stream(0);
  rt->stream_wait_host_word(stream, word, 5);
  try {
    rt->free_pinned(scratch);
    FAIL() << "free_pinned returned while a stream waits on a host word nobody sets";
  } catch (const DistBackendError& e) {
    const std::string m = e.what();
    for (const char* part : {"free_pinned", "cudaFreeHost synchronizes the device", "to reach 5", "holds 1",
                             "wait for ever"})
      EXPECT_NE(m.find(part), std::string::npos) << "'" << part << "' is not in: " << m;
  }
  __atomic_store_n(word, 5, __ATOMIC_RELEASE);
  rt->free_pinned(scratch);
  rt->destroy_stream(stream);
  rt->free_pinned(word);
}

TEST(EmulatedRuntime, KernelsAreTheReductionKernels) {
  auto rt = device::make_emulated_cuda_runtime(1);
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30}, c = {100, 200, 300}, out(3);
  rt->accumulate(ReduceOp::SUM, DType::Float32, a.data(), b.data(), 3, nullptr);
  EXPECT_EQ(a, (std::vector<float>{11, 22, 33}));
  const void* ins[3] = {a.data(), b.data(), c.data()};
  rt->combine(ReduceOp::MAX, DType::Float32, out.data(), ins, 3, 3, nullptr);
  EXPECT_EQ(out, (std::vector<float>{100, 200, 300}));
  // In place: the output is one of the inputs (not the first).
  const void* in_place[3] = {b.data(), c.data(), a.data()};
  rt->combine(ReduceOp::SUM, DType::Float32, a.data(), in_place, 3, 3, nullptr);
  EXPECT_EQ(a, (std::vector<float>{121, 242, 363}));
  rt->finalize(ReduceOp::AVG, DType::Float32, a.data(), 3, 11, nullptr);
  EXPECT_EQ(a, (std::vector<float>{11, 22, 33}));
  const void* one[1] = {b.data()};
  rt->combine(ReduceOp::SUM, DType::Float32, out.data(), one, 1, 3, nullptr);
  EXPECT_EQ(out, b);
  EXPECT_THROW(rt->combine(ReduceOp::SUM, DType::Float32, out.data(), ins, 17, 3, nullptr), DistValueError);
}

// A forked child maps the parent's allocation through its handle and writes
// into it; the parent sees the write in its own mapping.
TEST(EmulatedRuntime, IpcHandleMapsTheSamePagesInAnotherProcess) {
  auto rt = device::make_emulated_cuda_runtime(2);
  int* d = static_cast<int*>(rt->alloc_device(1, 4096 * 2));
  d[1500] = 7;
  const std::string handle = rt->ipc_handle(d + 1024);  // inside the allocation: the offset travels
  auto results = run_in_processes(1, [&](int) {
    auto child = device::make_emulated_cuda_runtime(2);
    int* mapped = static_cast<int*>(child->ipc_open(1, handle));
    if (child->device_of(mapped) != 1) throw std::runtime_error("the mapping is not on cuda:1");
    if (mapped[1500 - 1024] != 7) throw std::runtime_error("the mapping does not show the parent's data");
    mapped[0] = 42;
    child->ipc_close(mapped);
  });
  ASSERT_EQ(describe_failures(results), "");
  EXPECT_EQ(d[1024], 42);
  rt->free_device(1, d);
}

TEST(EmulatedRuntime, IpcOpenOfAGoneHandleSaysWhy) {
  auto rt = device::make_emulated_cuda_runtime(1);
  try {
    rt->ipc_open(0, std::to_string(getpid()) + ":99999:0");
    FAIL() << "ipc_open of a closed descriptor succeeded";
  } catch (const DistBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rt->ipc_open(0, "not a handle"), DistBackendError);
}

}  // namespace
}  // namespace tdist::testing
