// Micro-benchmark: reduction::accumulate against memcpy of the same size, 1 KiB .. 64 MiB.
// bytes_per_second counts the size of one buffer per iteration for every benchmark, so the
// figures compare directly (accumulate moves 3x that: two reads and one write; memcpy 2x).
//   build-reduce/bin/tdist_reduce_microbench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <complex>
#include <cstring>
#include <vector>

#include "reduce/reduction_kernels.h"

namespace {

using tdist::DType;
using tdist::ReduceOp;

void set_bytes(benchmark::State& state, size_t bytes) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<char> src(bytes, 1), dst(bytes, 2);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, bytes);
}

template <typename T>
void BM_Accumulate(benchmark::State& state, ReduceOp op, DType dtype) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t n = bytes / sizeof(T);
  std::vector<T> acc(n), in(n);  // zeros: no denormals or NaN to slow anything down
  for (auto _ : state) {
    tdist::reduction::accumulate(op, dtype, acc.data(), in.data(), n);
    benchmark::DoNotOptimize(acc.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, bytes);
}

void BM_SumFloat32(benchmark::State& s) { BM_Accumulate<float>(s, ReduceOp::SUM, DType::Float32); }
void BM_MaxFloat32(benchmark::State& s) { BM_Accumulate<float>(s, ReduceOp::MAX, DType::Float32); }
void BM_SumInt32(benchmark::State& s) { BM_Accumulate<int32_t>(s, ReduceOp::SUM, DType::Int32); }
void BM_SumFloat64(benchmark::State& s) { BM_Accumulate<double>(s, ReduceOp::SUM, DType::Float64); }
void BM_SumFloat16(benchmark::State& s) { BM_Accumulate<tdist::Half>(s, ReduceOp::SUM, DType::Float16); }
void BM_SumBFloat16(benchmark::State& s) { BM_Accumulate<tdist::BFloat16>(s, ReduceOp::SUM, DType::BFloat16); }
void BM_ProdComplex64(benchmark::State& s) {
  BM_Accumulate<std::complex<float>>(s, ReduceOp::PRODUCT, DType::Complex64);
}

// 1 KiB .. 64 MiB in steps of 4x.
void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t bytes = 1 << 10; bytes <= (int64_t{64} << 20); bytes *= 4) b->Arg(bytes);
}

BENCHMARK(BM_Memcpy)->Apply(sizes);
BENCHMARK(BM_SumFloat32)->Apply(sizes);
BENCHMARK(BM_MaxFloat32)->Apply(sizes);
BENCHMARK(BM_SumInt32)->Apply(sizes);
BENCHMARK(BM_SumFloat64)->Apply(sizes);
BENCHMARK(BM_SumFloat16)->Apply(sizes);
BENCHMARK(BM_SumBFloat16)->Apply(sizes);
BENCHMARK(BM_ProdComplex64)->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
