#include "tdist_comm.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <tdist/tdist.h>

#include "cuda_memory.h"

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

TdistComm::TdistComm(const Options& options) : rank_(tdist::get_rank()), size_(tdist::get_world_size()) {
  if (options.device != Memory::Cuda) return;
  const int count = cuda_memory::device_count();
  if (cuda_memory::built() && count == 0)
    throw std::runtime_error("--device cuda: no CUDA device (cudaGetDeviceCount found none)");
  if (!tdist::cuda::is_built())
    throw std::runtime_error("--device cuda: this libtdist was built without CUDA; its backends refuse device buffers");
  // Ranks of one host share the GPUs round-robin: N ranks on a one-GPU machine share it.
  const int local_rank = tdist::get_node_local_rank(rank_);  // LOCAL_RANK, read by tdist's settings
  device_ = count > 0 ? local_rank % count : 0;
  cuda_memory::set_device(device_);
  device_name_ = cuda_memory::describe(device_);
  stream_ = cuda_memory::create_stream();
  tdist::cuda::set_current_stream(stream_, device_);
}

TdistComm::~TdistComm() {
  if (!on_device()) return;
  tdist::cuda::set_current_stream(nullptr, device_);
  cuda_memory::destroy_stream(stream_);
}

std::string TdistComm::library() const {
  std::string s = std::string("tdist ") + TDIST_VERSION_STRING + " (backend " + tdist::get_backend() + ")";
  if (on_device()) s += ", device buffers on cuda:" + std::to_string(device_) + " " + device_name_;
  return s;
}

std::shared_ptr<void> TdistComm::device_buffer(size_t bytes) {
  if (!on_device()) return nullptr;
  return std::shared_ptr<void>(cuda_memory::allocate(bytes), [](void* p) { cuda_memory::release(p); });
}

void TdistComm::upload(void* device_dst, const void* host_src, size_t bytes) {
  cuda_memory::upload(device_dst, host_src, bytes);
}

void TdistComm::download(void* host_dst, const void* device_src, size_t bytes) {
  cuda_memory::download(host_dst, device_src, bytes);
}

void TdistComm::copy(void* dst, const void* src, size_t bytes) const {
  if (on_device())
    cuda_memory::copy_async(dst, src, bytes, stream_);
  else
    std::memcpy(dst, src, bytes);
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
  std::vector<std::string> notes = {
      "all_reduce, broadcast and reduce are in-place in tdist's API: their out-of-place time is",
      "a memcpy into the receive buffer (on the root only for broadcast and reduce) + the in-place call."};
  if (on_device()) {
    notes.push_back("--device cuda: buffers from cudaMalloc; operations on the benchmark's own stream (tdist's");
    notes.push_back("current stream); each iteration ends with cudaStreamSynchronize: times are end to end.");
    notes.push_back("The out-of-place copies and the copy rows are cudaMemcpyAsync on that stream.");
  }
  return notes;
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
  const tdist::Device device =
      on_device() ? tdist::Device{tdist::DeviceType::CUDA, device_} : tdist::Device{tdist::DeviceType::CPU, -1};
  auto tensor = [dt, device](void* p, size_t elements) {
    return tdist::Tensor(p, dt, {static_cast<int64_t>(elements)}, device);
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
        p.run = [this, t, op, send, recv, bytes] {
          copy(recv, send, bytes);
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
        p.run = [this, t, root, send, recv, bytes] {
          copy(recv, send, bytes);
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
        p.run = [this, t, root, op, send, recv, bytes] {
          copy(recv, send, bytes);
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
    case Coll::Copy: {
      p.run = [this, send, recv, bytes] { copy(recv, send, bytes); };
      p.input = send;
      p.input_count = count;
      p.result = recv;
      p.result_count = count;
      break;
    }
  }
  if (on_device()) {
    // End to end: the host sees the device work of the iteration done before the next.
    p.run = [run = std::move(p.run), stream = stream_] {
      run();
      cuda_memory::synchronize(stream);
    };
  }
  return p;
}

}  // namespace tbench
