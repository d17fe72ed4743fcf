// Every operation of the tdist backend on CUDA tensors, checked against
// results computed on the host: the body of the emulated tests
// (TDIST_EMULATE_CUDA, in CI) and of the real-GPU test (label "gpu",
// scripts/gpu_check.sh). Device memory comes from the device runtime, data
// moves through its copies on the caller's current stream, and every
// collective runs through the front as a user's would.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/process_world.h"
#include "common/reduce_check.h"
#include "device/device_runtime.h"
#include "tdist/cuda.h"

namespace tdist::testing::device_world {

inline device::Runtime& rt() { return device::require_runtime(DeviceType::CUDA, "test"); }

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// A tensor's worth of device memory.
class DeviceMem {
 public:
  DeviceMem(int device, DType dtype, size_t count)
      : device_(device), dtype_(dtype), count_(count), data_(rt().alloc_device(device, count * dtype_size(dtype))) {}
  ~DeviceMem() { rt().free_device(device_, data_); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;

  Tensor tensor() const { return part(0, count_); }
  Tensor part(size_t offset, size_t count) const {
    return Tensor(static_cast<char*>(data_) + offset * dtype_size(dtype_), dtype_, {static_cast<int64_t>(count)},
                  Device{DeviceType::CUDA, device_});
  }
  // Copies in and out on the current stream, and waits for it: the host reads
  // what the stream work queued before (the collective included) wrote.
  void upload(Buffer& host) {
    auto* stream = rt().current_stream(device_);
    rt().copy(data_, host.data(), host.nbytes(), stream);
    rt().synchronize_stream(stream);
  }
  Buffer download() const {
    Buffer host(dtype_, count_);
    auto* stream = rt().current_stream(device_);
    rt().copy(host.data(), data_, host.nbytes(), stream);
    rt().synchronize_stream(stream);
    return host;
  }

 private:
  int device_;
  DType dtype_;
  size_t count_;
  void* data_;
};

inline std::string name(const char* op, DType dtype, size_t count, const std::string& extra = "") {
  return std::string(op) + " " + std::string(dtype_name(dtype)) + " x" + std::to_string(count) + extra;
}

inline void expect_equal(const Buffer& got, const Buffer& want, const std::string& what) {
  const long diff = got.first_difference(want);
  require(diff < 0, what + ": element " + std::to_string(diff) + " is " + (diff >= 0 ? got.at(diff) : "") +
                        ", expected " + (diff >= 0 ? want.at(diff) : ""));
}

// Element i of rank r's moved (not reduced) data.
inline long moved(int r, size_t i) { return static_cast<long>(r * 1000 + i % 1000) % 120; }

inline void all_reduce_case(int device, const Group& g, ReduceOp op, DType dtype, size_t count) {
  const int me = get_rank(g), n = get_world_size(g);
  DeviceMem mem(device, dtype, count);
  Buffer in(dtype, count, [&](size_t i) { return input_value(op, me, i); });
  mem.upload(in);
  all_reduce(mem.tensor(), op, g)->wait();
  expect_equal(mem.download(), expected(op, dtype, count, n), name("all_reduce", dtype, count, " " + std::string(op.name())));
}

inline void broadcast_case(int device, const Group& g, DType dtype, size_t count, int root) {
  const int me = get_rank(g);
  DeviceMem mem(device, dtype, count);
  Buffer in(dtype, count, [&](size_t i) { return me == root ? moved(root, i) : 0L; });
  mem.upload(in);
  broadcast(mem.tensor(), group_src(root), g)->wait();
  expect_equal(mem.download(), Buffer(dtype, count, [&](size_t i) { return moved(root, i); }),
               name("broadcast", dtype, count, " from " + std::to_string(root)));
}

inline void reduce_case(int device, const Group& g, ReduceOp op, DType dtype, size_t count, int root) {
  const int me = get_rank(g), n = get_world_size(g);
  DeviceMem mem(device, dtype, count);
  Buffer in(dtype, count, [&](size_t i) { return input_value(op, me, i); });
  mem.upload(in);
  reduce(mem.tensor(), group_dst(root), op, g)->wait();
  expect_equal(mem.download(), me == root ? expected(op, dtype, count, n) : in,
               name("reduce", dtype, count, " to " + std::to_string(root)));
}

inline void gathers_case(int device, const Group& g, size_t count, int root) {
  const int me = get_rank(g), n = get_world_size(g);
  const DType dtype = DType::Int32;
  Buffer mine(dtype, count, [&](size_t i) { return moved(me, i); });
  Buffer all(dtype, count * n, [&](size_t k) { return moved(static_cast<int>(k / std::max<size_t>(count, 1)), k % std::max<size_t>(count, 1)); });
  DeviceMem in(device, dtype, count), out(device, dtype, count * n);
  in.upload(mine);
  std::vector<Tensor> parts;
  for (int r = 0; r < n; ++r) parts.push_back(out.part(r * count, count));
  all_gather(parts, in.tensor(), g)->wait();
  expect_equal(out.download(), all, name("all_gather", dtype, count));
  Buffer zero(dtype, count * n, [](size_t) { return 0L; });
  out.upload(zero);
  all_gather_into_tensor(out.tensor(), in.tensor(), g)->wait();
  expect_equal(out.download(), all, name("all_gather_into_tensor", dtype, count));
  // In place: the input is this rank's block of the output (FSDP's form).
  {
    Buffer block(dtype, count * n, [&](size_t k) { return k / std::max<size_t>(count, 1) == static_cast<size_t>(me) ? moved(me, k % std::max<size_t>(count, 1)) : 0L; });
    out.upload(block);
  }
  all_gather_into_tensor(out.tensor(), out.part(me * count, count), g)->wait();
  expect_equal(out.download(), all, name("all_gather_into_tensor in place", dtype, count));

  out.upload(zero);
  std::vector<Tensor> gather_list;
  if (me == root) gather_list = parts;
  gather(in.tensor(), gather_list, group_dst(root), g)->wait();
  expect_equal(out.download(), me == root ? all : zero, name("gather", dtype, count, " to " + std::to_string(root)));

  // Scatter from root: rank r gets block r of `all`.
  DeviceMem got(device, dtype, count);
  Buffer none(dtype, count, [](size_t) { return -1L; });
  got.upload(none);
  out.upload(all);
  std::vector<Tensor> scatter_list;
  if (me == root) scatter_list = parts;
  scatter(got.tensor(), scatter_list, group_src(root), g)->wait();
  expect_equal(got.download(), mine, name("scatter", dtype, count, " from " + std::to_string(root)));
}

inline void reduce_scatter_case(int device, const Group& g, ReduceOp op, DType dtype, size_t count) {
  const int me = get_rank(g), n = get_world_size(g);
  Buffer in(dtype, count * n, [&](size_t k) { return input_value(op, me, k); });
  Buffer want_all = expected(op, dtype, count * n, n);
  Buffer want(dtype, count);
  std::memcpy(want.data(), static_cast<char*>(want_all.data()) + me * count * dtype_size(dtype), want.nbytes());
  DeviceMem input(device, dtype, count * n), output(device, dtype, count);
  input.upload(in);
  std::vector<Tensor> parts;
  for (int r = 0; r < n; ++r) parts.push_back(input.part(r * count, count));
  reduce_scatter(output.tensor(), parts, op, g)->wait();
  expect_equal(output.download(), want, name("reduce_scatter", dtype, count, " " + std::string(op.name())));
  reduce_scatter_tensor(output.tensor(), input.tensor(), op, g)->wait();
  expect_equal(output.download(), want, name("reduce_scatter_tensor", dtype, count, " " + std::string(op.name())));
}

// Uneven: rank s sends rank d (s + d) % 3 + `base` elements.
inline void all_to_all_case(int device, const Group& g, size_t base) {
  const int me = get_rank(g), n = get_world_size(g);
  const DType dtype = DType::Int64;
  auto size = [&](int s, int d) { return static_cast<size_t>((s + d) % 3) + base; };
  std::vector<size_t> in_at(n + 1, 0), out_at(n + 1, 0);
  for (int r = 0; r < n; ++r) {
    in_at[r + 1] = in_at[r] + size(me, r);
    out_at[r + 1] = out_at[r] + size(r, me);
  }
  // Element i of the block s sends d: s * 10000 + d * 100 + i.
  Buffer in(dtype, in_at[n], [&](size_t k) {
    int d = 0;
    while (in_at[d + 1] <= k) ++d;
    return static_cast<long>(me * 10000 + d * 100 + (k - in_at[d]));
  });
  Buffer want(dtype, out_at[n], [&](size_t k) {
    int s = 0;
    while (out_at[s + 1] <= k) ++s;
    return static_cast<long>(s * 10000 + me * 100 + (k - out_at[s]));
  });
  DeviceMem input(device, dtype, in_at[n]), output(device, dtype, out_at[n]);
  input.upload(in);
  std::vector<Tensor> ins, outs;
  std::vector<int64_t> in_splits, out_splits;
  for (int r = 0; r < n; ++r) {
    ins.push_back(input.part(in_at[r], size(me, r)));
    outs.push_back(output.part(out_at[r], size(r, me)));
    in_splits.push_back(static_cast<int64_t>(size(me, r)));
    out_splits.push_back(static_cast<int64_t>(size(r, me)));
  }
  all_to_all(outs, ins, g)->wait();
  expect_equal(output.download(), want, "all_to_all uneven");
  Buffer zero(dtype, out_at[n], [](size_t) { return 0L; });
  output.upload(zero);
  all_to_all_single(output.tensor(), input.tensor(), out_splits, in_splits, g)->wait();
  expect_equal(output.download(), want, "all_to_all_single uneven");
}

inline void coalesced_case(int device, const Group& g) {
  const int me = get_rank(g), n = get_world_size(g);
  const DType dtype = DType::Float32;
  DeviceMem a(device, dtype, 5), b(device, dtype, 40000);
  Buffer ia(dtype, 5, [&](size_t i) { return input_value(ReduceOp::SUM, me, i); });
  Buffer ib(dtype, 40000, [&](size_t i) { return input_value(ReduceOp::SUM, me, i); });
  a.upload(ia);
  b.upload(ib);
  all_reduce_coalesced({a.tensor(), b.tensor()}, ReduceOp::SUM, g)->wait();
  expect_equal(a.download(), expected(ReduceOp::SUM, dtype, 5, n), "all_reduce_coalesced, first tensor");
  expect_equal(b.download(), expected(ReduceOp::SUM, dtype, 40000, n), "all_reduce_coalesced, second tensor");
}

// A ring of isend/irecv, then blocking send/recv between pairs.
inline void point_to_point_case(int device, const Group& g, size_t count) {
  const int me = get_rank(g), n = get_world_size(g);
  if (n < 2) return;
  const DType dtype = DType::BFloat16;
  DeviceMem out(device, dtype, count), in(device, dtype, count);
  Buffer mine(dtype, count, [&](size_t i) { return moved(me, i); });
  Buffer none(dtype, count, [](size_t) { return 0L; });
  out.upload(mine);
  in.upload(none);
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  auto r = irecv(in.tensor(), group_src(prev), g);
  auto s = isend(out.tensor(), group_dst(next), g);
  s->wait();
  r->wait();
  expect_equal(in.download(), Buffer(dtype, count, [&](size_t i) { return moved(prev, i); }),
               name("irecv", dtype, count, " from " + std::to_string(prev)));
  // The same ring as one batch.
  in.upload(none);
  for (auto& w : batch_isend_irecv({P2POp(P2POp::IRECV, in.tensor(), group_src(prev), g),
                                    P2POp(P2POp::ISEND, out.tensor(), group_dst(next), g)}))
    w->wait();
  expect_equal(in.download(), Buffer(dtype, count, [&](size_t i) { return moved(prev, i); }),
               name("batch_isend_irecv", dtype, count, " from " + std::to_string(prev)));
  const int peer = me ^ 1;
  if (peer >= n) return;
  in.upload(none);
  if (me % 2 == 0) {
    send(out.tensor(), group_dst(peer), g);
    recv(in.tensor(), group_src(peer), g);
  } else {
    recv(in.tensor(), group_src(peer), g);
    send(out.tensor(), group_dst(peer), g);
  }
  expect_equal(in.download(), Buffer(dtype, count, [&](size_t i) { return moved(peer, i); }),
               name("recv", dtype, count, " from " + std::to_string(peer)));
}

// Several async operations in flight, waited for afterwards.
inline void async_case(int device, const Group& g) {
  const int me = get_rank(g), n = get_world_size(g);
  std::vector<std::unique_ptr<DeviceMem>> mems;
  std::vector<std::shared_ptr<Work>> works;
  for (int k = 0; k < 4; ++k) {
    mems.push_back(std::make_unique<DeviceMem>(device, DType::Int32, 33));
    Buffer in(DType::Int32, 33, [&](size_t i) { return input_value(ReduceOp::MAX, me, i); });
    mems.back()->upload(in);
    works.push_back(all_reduce(mems.back()->tensor(), ReduceOp::MAX, g, /*async_op=*/true));
  }
  for (auto& w : works) w->wait();
  for (auto& m : mems) expect_equal(m->download(), expected(ReduceOp::MAX, DType::Int32, 33, n), "async all_reduce MAX");
}

// The matrix: `large` elements of float32 pass the staging chunk (pipelined).
inline void check_every_operation(const Group& g, int device, size_t large) {
  const int n = get_world_size(g);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}}) {
    for (DType dtype : {DType::Float32, DType::Float16, DType::BFloat16})
      for (ReduceOp op : {ReduceOp(ReduceOp::SUM), ReduceOp(ReduceOp::AVG), ReduceOp(ReduceOp::MAX), ReduceOp::premul_sum(2.0)})
        all_reduce_case(device, g, op, dtype, count);
    for (DType dtype : {DType::Int32, DType::Int64, DType::UInt8})
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MIN, ReduceOp::BXOR}) all_reduce_case(device, g, op, dtype, count);
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX}) all_reduce_case(device, g, op, DType::Bool, count);
    for (int root : {0, n - 1}) {
      broadcast_case(device, g, DType::Float16, count, root);
      reduce_case(device, g, ReduceOp::SUM, DType::Int32, count, root);
      gathers_case(device, g, count, root);
    }
    reduce_scatter_case(device, g, ReduceOp::SUM, DType::Float32, count);
    reduce_scatter_case(device, g, ReduceOp::AVG, DType::BFloat16, count);
    point_to_point_case(device, g, count);
  }
  all_to_all_case(device, g, 0);
  all_to_all_case(device, g, 1000);
  coalesced_case(device, g);
  async_case(device, g);
  // Past one staging chunk: the pipelined path, an odd tail included.
  all_reduce_case(device, g, ReduceOp::SUM, DType::Float32, large);
  all_reduce_case(device, g, ReduceOp::AVG, DType::BFloat16, large);
  broadcast_case(device, g, DType::Float32, large, n - 1);
  reduce_case(device, g, ReduceOp::MAX, DType::Int32, large, n / 2);
  gathers_case(device, g, large / 4, 0);
  barrier(g)->wait();
}

// Past one half of the IPC exchange buffer (4 MiB) as well: its chunks.
inline void check_ipc_chunks(const Group& g, int device) {
  const int n = get_world_size(g);
  all_reduce_case(device, g, ReduceOp::SUM, DType::Float32, 1100003);
  all_reduce_case(device, g, ReduceOp::AVG, DType::Float16, 2100001);
  broadcast_case(device, g, DType::Int32, 1100003, n - 1);
  gathers_case(device, g, 1100003, 0);
  reduce_scatter_case(device, g, ReduceOp::SUM, DType::Float32, 4 * 1024 * 1024 / (4 * n) + 5);
  reduce_scatter_case(device, g, ReduceOp::PRODUCT, DType::Int64, 1001);
}

// The emulated IPC exchange buffers this process maps (its own and its
// peers'): memfd mappings of exactly two halves (8 MiB). The tests' own
// tensors are never that size.
inline int mapped_exchange_buffers() {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return -1;
  char line[512];
  int found = 0;
  while (std::fgets(line, sizeof(line), maps)) {
    unsigned long begin = 0, end = 0;
    if (std::strstr(line, "tdist-emulated-cuda") && std::sscanf(line, "%lx-%lx", &begin, &end) == 2 &&
        end - begin == 8ul << 20)
      ++found;
  }
  std::fclose(maps);
  return found;
}

// Ranks as processes; hosts[r] (if given) is rank r's emulated host. Each
// rank's device is rank % device_count(), so ranks share devices when there
// are more ranks than devices. `emulate`: devices to emulate (0: the real ones).
// `path`: TDIST_CUDA_PATH for every rank ("": unset, auto).
inline void run_world(int n, int emulate, const std::vector<int>& hosts,
                      const std::function<void(int rank, int device)>& body, const std::string& path = "") {
  Shared<PortBoard> board;
  auto results = run_in_processes(n, [&](int rank) {
    if (!path.empty()) setenv("TDIST_CUDA_PATH", path.c_str(), 1);
    if (emulate > 0)
      setenv("TDIST_EMULATE_CUDA", std::to_string(emulate).c_str(), 1);
    else
      unsetenv("TDIST_EMULATE_CUDA");
    if (!hosts.empty()) setenv("TDIST_HOST_ID", ("host" + std::to_string(hosts[rank])).c_str(), 1);
    init_process_world(*board, rank, n, std::chrono::seconds(60));
    const int device = rank % cuda::device_count();
    cuda::StreamGuard on_device(nullptr, device);  // the default stream of the rank's device
    rt().set_device(device);
    body(rank, device);
    destroy_process_group();
  }, std::chrono::seconds(240));
  if (!describe_failures(results).empty()) throw std::runtime_error(describe_failures(results));
}

}  // namespace tdist::testing::device_world
