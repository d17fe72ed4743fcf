#include "tdist_comm.h"

#include <cstring>
#include <tdist/tdist.h>

extern char** environ;

namespace tbench {

namespace {

tdist::DType to_dtype(Dt d) {
  switch (d) {
    case Dt::Int8: return tdist::DType::Int8;
    case Dt::Uint8: return tdist::DType::UInt8;
    case Dt::Int32: return tdist::DType::Int32;
    case Dt::Int64: return tdist::DType::Int64;
    case Dt::Half: return tdist::DType::Float16;
    case Dt::BFloat16: return tdist::DType::BFloat16;
    case Dt::Float: return tdist::DType::Float32;
    case Dt::Double: return tdist::DType::Float64;
  }
  return tdist::DType::Float32;
}

tdist::ReduceOp to_op(Op o) {
  switch (o) {
    case Op::Sum: return tdist::ReduceOp::SUM;
    case Op::Prod: return tdist::ReduceOp::PRODUCT;
    case Op::Min: return tdist::ReduceOp::MIN;
    case Op::Max: return tdist::ReduceOp::MAX;
    case Op::Avg: return tdist::ReduceOp::AVG;
  }
  return tdist::ReduceOp::SUM;
}

char* at(void* base, size_t elements, size_t elem_size) { return static_cast<char*>(base) + elements * elem_size; }

}  // namespace

TdistComm::TdistComm() : rank_(tdist::get_rank()), size_(tdist::get_world_size()) {}

std::string TdistComm::library() const {
  return std::string("tdist ") + TDIST_VERSION_STRING + " (backend " + tdist::get_backend() + ")";
}

void TdistComm::barrier() { tdist::barrier(); }

double TdistComm::max_double(double v) {
  tdist::all_reduce(tdist::Tensor(&v, 1), tdist::ReduceOp::MAX);
  return v;
}

int64_t TdistComm::sum_int64(int64_t v) {
  tdist::all_reduce(tdist::Tensor(&v, 1), tdist::ReduceOp::SUM);
  return v;
}

std::vector<std::string> TdistComm::all_gather_strings(const std::string& s) {
  std::vector<std::string> out;
  tdist::all_gather_object(out, s);
  return out;
}

std::vector<std::string> TdistComm::settings() const {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "TDIST_", 6) == 0 && std::strncmp(*e, "TDIST_LAUNCHED=", 15) != 0) out.emplace_back(*e);
  return out;
}

std::vector<std::string> TdistComm::notes() const {
  return {"all_reduce, broadcast and reduce are in-place in tdist's API: their out-of-place time is",
          "a memcpy into the receive buffer (on the root only for broadcast and reduce) + the in-place call."};
}

std::string TdistComm::unsupported(Coll c, Dt d, Op o) const {
  if (is_reducing(c) && !tdist::reduce_op_supported(to_op(o), to_dtype(d)))
    return "tdist does not define " + std::string(op_name(o)) + " on " + std::string(dt_name(d));
  return "";
}

Prepared TdistComm::prepare(const Call& call) {
  const tdist::DType dt = to_dtype(call.dt);
  const tdist::ReduceOp op = to_op(call.op);
  const size_t es = dt_size(call.dt);
  const size_t count = call.count;
  const size_t bytes = count * es;
  const int n = size_, me = rank_, root = call.root;
  const size_t chunk = count / static_cast<size_t>(n);
  const bool in_place = call.place == Place::In;
  auto tensor = [dt](void* p, size_t elements) {
    return tdist::Tensor(p, dt, {static_cast<int64_t>(elements)});
  };
  void* send = call.send;
  void* recv = call.recv;
  Prepared p;
  switch (call.coll) {
    case Coll::AllReduce: {
      tdist::Tensor t = tensor(recv, count);
      if (in_place) {
        p.run = [t, op] { tdist::all_reduce(t, op); };
        p.input = recv;
      } else {
        p.run = [t, op, send, recv, bytes] {
          std::memcpy(recv, send, bytes);
          tdist::all_reduce(t, op);
        };
        p.input = send;
      }
      p.input_count = count;
      p.result = recv;
      p.result_count = count;
      break;
    }
    case Coll::Broadcast: {
      tdist::Tensor t = tensor(recv, count);
      if (in_place || me != root) {
        p.run = [t, root] { tdist::broadcast(t, root); };
      } else {
        p.run = [t, root, send, recv, bytes] {
          std::memcpy(recv, send, bytes);
          tdist::broadcast(t, root);
        };
      }
      p.input = in_place ? recv : send;
      p.input_count = count;
      p.result = recv;
      p.result_count = count;
      break;
    }
    case Coll::Reduce: {
      if (in_place) {
        tdist::Tensor t = tensor(recv, count);
        p.run = [t, root, op] { tdist::reduce(t, root, op); };
        p.input = recv;
      } else if (me == root) {
        tdist::Tensor t = tensor(recv, count);
        p.run = [t, root, op, send, recv, bytes] {
          std::memcpy(recv, send, bytes);
          tdist::reduce(t, root, op);
        };
        p.input = send;
      } else {
        // Non-root tensors are inputs only (left unchanged): no copy needed.
        tdist::Tensor t = tensor(send, count);
        p.run = [t, root, op] { tdist::reduce(t, root, op); };
        p.input = send;
      }
      p.input_count = count;
      p.result = recv;
      p.result_count = me == root ? count : 0;
      break;
    }
    case Coll::AllGather: {
      void* input = in_place ? at(recv, me * chunk, es) : send;
      tdist::Tensor out = tensor(recv, count), in = tensor(input, chunk);
      p.run = [out, in] { tdist::all_gather_into_tensor(out, in); };
      p.input = input;
      p.input_count = chunk;
      p.result = recv;
      p.result_count = count;
      break;
    }
    case Coll::ReduceScatter: {
      void* output = in_place ? at(send, me * chunk, es) : recv;
      tdist::Tensor out = tensor(output, chunk), in = tensor(send, count);
      p.run = [out, in, op] { tdist::reduce_scatter_tensor(out, in, op); };
      p.input = send;
      p.input_count = count;
      p.result = output;
      p.result_count = chunk;
      break;
    }
    case Coll::AllToAll: {
      tdist::Tensor out = tensor(recv, count), in = tensor(send, count);
      p.run = [out, in] { tdist::all_to_all_single(out, in); };
      p.input = send;
      p.input_count = count;
      p.result = recv;
      p.result_count = count;
      break;
    }
    case Coll::SendRecv: {
      tdist::Tensor s = tensor(send, count), r = tensor(recv, count);
      if (me == 0) {
        p.run = [s, r] {
          tdist::send(s, 1);
          tdist::recv(r, 1);
        };
      } else if (me == 1) {
        p.run = [s, r] {
          tdist::recv(r, 0);
          tdist::send(s, 0);
        };
      } else {
        p.run = [] {};
      }
      p.input = send;
      p.input_count = me < 2 ? count : 0;
      p.result = recv;
      p.result_count = me < 2 ? count : 0;
      break;
    }
  }
  return p;
}

}  // namespace tbench
