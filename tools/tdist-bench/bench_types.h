// The vocabulary of the benchmark: collectives, element types, reduction ops,
// buffer placements, and nccl-tests' bus-bandwidth factors. Plain C++ with no
// tdist dependency, so that bench/mpi_bench.cpp shares it (same names, same
// formulas, same columns).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tbench {

// Copy is no collective: each rank copies the row's bytes from its send to its
// receive buffer (memcpy, or cudaMemcpy on a device), the physical limit a
// collective among ranks of one memory or one GPU is measured against
// (--copy-limit). "all" does not include it.
enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, SendRecv, Copy };
inline constexpr Coll kAllColls[] = {Coll::AllReduce, Coll::Broadcast,     Coll::Reduce,  Coll::AllGather,
                                     Coll::ReduceScatter, Coll::AllToAll, Coll::SendRecv};

// The element types (nccl-tests' names).
enum class Dt { Int8, Uint8, Int32, Int64, Half, BFloat16, Float, Double };
inline constexpr Dt kAllDts[] = {Dt::Int8, Dt::Uint8, Dt::Int32, Dt::Int64,
                                 Dt::Half, Dt::BFloat16, Dt::Float, Dt::Double};

enum class Op { Sum, Prod, Min, Max, Avg };
inline constexpr Op kAllOps[] = {Op::Sum, Op::Prod, Op::Min, Op::Max, Op::Avg};

// Out-of-place: separate send and receive buffers; in-place: one buffer.
enum class Place { Out, In };

std::string_view coll_name(Coll c);      // "all_reduce", ...
std::string_view dt_name(Dt d);          // "float", "bfloat16", ...
std::string_view op_name(Op o);          // "sum", ...
std::optional<Coll> parse_coll(std::string_view s);
std::optional<Dt> parse_dt(std::string_view s);  // also float32, fp16, bf16, int, ...
std::optional<Op> parse_op(std::string_view s);  // also product

size_t dt_size(Dt d);
bool dt_is_float(Dt d);

bool is_reducing(Coll c);  // all_reduce, reduce, reduce_scatter
bool is_rooted(Coll c);    // broadcast, reduce
// all_gather, reduce_scatter, all_to_all: the size is the whole buffer of
// world_size chunks (as in nccl-tests), so counts are multiples of the world size.
bool is_chunked(Coll c);

// Whether a placement is measured. all_to_all and sendrecv have no in-place form
// in tdist's API; the other collectives have both columns (see placement_note).
bool has_place(Coll c, Place p);

// nccl-tests' busbw = algbw * factor: 2(n-1)/n all_reduce; (n-1)/n all_gather,
// reduce_scatter, all_to_all; 1 broadcast, reduce, sendrecv, copy.
double busbw_factor(Coll c, int world_size);

// Element count for a requested size: size / element size, rounded down to a
// multiple of the world size for chunked collectives.
size_t count_for(Coll c, Dt d, uint64_t bytes, int world_size);

}  // namespace tbench
