#include "bench_types.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace tbench {

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}
}  // namespace

std::string_view coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllGather: return "all_gather";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::AllToAll: return "all_to_all";
    case Coll::SendRecv: return "sendrecv";
    case Coll::Copy: return "copy";
  }
  return "?";
}

std::string_view dt_name(Dt d) {
  switch (d) {
    case Dt::Int8: return "int8";
    case Dt::Uint8: return "uint8";
    case Dt::Int32: return "int32";
    case Dt::Int64: return "int64";
    case Dt::Half: return "half";
    case Dt::BFloat16: return "bfloat16";
    case Dt::Float: return "float";
    case Dt::Double: return "double";
  }
  return "?";
}

std::string_view op_name(Op o) {
  switch (o) {
    case Op::Sum: return "sum";
    case Op::Prod: return "prod";
    case Op::Min: return "min";
    case Op::Max: return "max";
    case Op::Avg: return "avg";
  }
  return "?";
}

std::optional<Coll> parse_coll(std::string_view s) {
  const std::string v = lower(s);
  for (Coll c : kAllColls)
    if (v == coll_name(c)) return c;
  if (v == "allreduce") return Coll::AllReduce;
  if (v == "bcast") return Coll::Broadcast;
  if (v == "allgather" || v == "all_gather_into_tensor") return Coll::AllGather;
  if (v == "reducescatter" || v == "reduce_scatter_tensor") return Coll::ReduceScatter;
  if (v == "alltoall" || v == "all_to_all_single") return Coll::AllToAll;
  if (v == "send_recv" || v == "pingpong" || v == "ping_pong" || v == "p2p") return Coll::SendRecv;
  if (v == "copy" || v == "memcpy" || v == "d2d") return Coll::Copy;
  return std::nullopt;
}

std::optional<Dt> parse_dt(std::string_view s) {
  const std::string v = lower(s);
  for (Dt d : kAllDts)
    if (v == dt_name(d)) return d;
  if (v == "char") return Dt::Int8;
  if (v == "int" || v == "int32_t") return Dt::Int32;
  if (v == "long" || v == "int64_t") return Dt::Int64;
  if (v == "float16" || v == "fp16") return Dt::Half;
  if (v == "bf16") return Dt::BFloat16;
  if (v == "float32" || v == "fp32") return Dt::Float;
  if (v == "float64" || v == "fp64") return Dt::Double;
  return std::nullopt;
}

std::optional<Op> parse_op(std::string_view s) {
  const std::string v = lower(s);
  for (Op o : kAllOps)
    if (v == op_name(o)) return o;
  if (v == "product") return Op::Prod;
  return std::nullopt;
}

size_t dt_size(Dt d) {
  switch (d) {
    case Dt::Int8:
    case Dt::Uint8: return 1;
    case Dt::Half:
    case Dt::BFloat16: return 2;
    case Dt::Int32:
    case Dt::Float: return 4;
    case Dt::Int64:
    case Dt::Double: return 8;
  }
  return 1;
}

bool dt_is_float(Dt d) { return d == Dt::Half || d == Dt::BFloat16 || d == Dt::Float || d == Dt::Double; }

bool is_reducing(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }
bool is_rooted(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce; }
bool is_chunked(Coll c) { return c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AllToAll; }

bool has_place(Coll c, Place p) {
  if (p == Place::Out) return true;
  return c != Coll::AllToAll && c != Coll::SendRecv && c != Coll::Copy;
}

double busbw_factor(Coll c, int n) {
  switch (c) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll: return static_cast<double>(n - 1) / n;
    case Coll::Broadcast:
    case Coll::Reduce:
    case Coll::SendRecv:
    case Coll::Copy: return 1.0;
  }
  return 1.0;
}

size_t count_for(Coll c, Dt d, uint64_t bytes, int n) {
  size_t count = static_cast<size_t>(bytes / dt_size(d));
  if (is_chunked(c) && n > 0) count -= count % static_cast<size_t>(n);
  return count;
}

}  // namespace tbench
