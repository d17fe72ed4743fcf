// mpi_bench: the same measurements as tdist-bench, through MPI. It links the
// plain-C++ half of tools/tdist-bench (options, sweep, timing, checks, output),
// so options, sizes, busbw formulas, timing (warm-up, barrier, loop, slowest
// rank's mean) and columns are identical; only the operations differ:
//   all_reduce      MPI_Allreduce (in-place: MPI_IN_PLACE)
//   broadcast       MPI_Bcast (out-of-place: memcpy on the root + MPI_Bcast, as tdist-bench)
//   reduce          MPI_Reduce (in-place: MPI_IN_PLACE on the root)
//   all_gather      MPI_Allgather (in-place: MPI_IN_PLACE, input at the rank's slice)
//   reduce_scatter  MPI_Reduce_scatter_block (in-place: MPI_IN_PLACE, result at the start)
//   all_to_all      MPI_Alltoall (out-of-place only, as tdist-bench)
//   sendrecv        MPI_Send/MPI_Recv ping-pong between ranks 0 and 1 (half the round trip)
// avg is MPI_SUM followed by a local division (MPI has no average op).
// Built by bench/compare.sh:
//   mpicxx -O2 -std=c++20 -Itools/tdist-bench bench/mpi_bench.cpp tools/tdist-bench/{bench_types,
//          buffers,driver,options,output,timing}.cpp -o mpi_bench
// The C API only (no deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm.h"
#include "driver.h"
#include "options.h"

extern char** environ;

namespace tbench {
namespace {

MPI_Datatype mpi_type(Dt d) {
  switch (d) {
    case Dt::Int8: return MPI_INT8_T;
    case Dt::Uint8: return MPI_UINT8_T;
    case Dt::Int32: return MPI_INT32_T;
    case Dt::Int64: return MPI_INT64_T;
    case Dt::Half:
    case Dt::BFloat16: return MPI_UINT16_T;  // moved, never reduced
    case Dt::Float: return MPI_FLOAT;
    case Dt::Double: return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(Op o) {
  switch (o) {
    case Op::Sum:
    case Op::Avg: return MPI_SUM;
    case Op::Prod: return MPI_PROD;
    case Op::Min: return MPI_MIN;
    case Op::Max: return MPI_MAX;
  }
  return MPI_SUM;
}

template <typename T>
void divide_typed(void* data, size_t count, int n) {
  T* p = static_cast<T*>(data);
  if constexpr (std::is_integral_v<T>) {
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(static_cast<int64_t>(p[i]) / n);
  } else {
    const T c = static_cast<T>(n);
    for (size_t i = 0; i < count; ++i) p[i] = p[i] / c;
  }
}

// The AVG finish: data /= n (truncating for integers, as tdist and NCCL).
void divide(Dt d, void* data, size_t count, int n) {
  switch (d) {
    case Dt::Int8: divide_typed<int8_t>(data, count, n); break;
    case Dt::Uint8: divide_typed<uint8_t>(data, count, n); break;
    case Dt::Int32: divide_typed<int32_t>(data, count, n); break;
    case Dt::Int64: divide_typed<int64_t>(data, count, n); break;
    case Dt::Float: divide_typed<float>(data, count, n); break;
    case Dt::Double: divide_typed<double>(data, count, n); break;
    default: break;
  }
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string(what) + ": " + std::string(msg, static_cast<size_t>(len)));
}

char* at(void* base, size_t elements, size_t elem_size) { return static_cast<char*>(base) + elements * elem_size; }

class MpiComm final : public Comm {
 public:
  MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

  std::string library() const override {
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    MPI_Get_library_version(v, &len);
    std::string s(v, static_cast<size_t>(len));
    s = s.substr(0, s.find_first_of(",\n"));
    return "mpi (" + s + ")";
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  double max_double(double v) override {
    check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    return v;
  }
  int64_t sum_int64(int64_t v) override {
    check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    return v;
  }
  std::vector<std::string> all_gather_strings(const std::string& s) override {
    int len = static_cast<int>(s.size());
    std::vector<int> lens(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    int total = 0;
    for (int i = 0; i < size_; ++i) {
      displs[static_cast<size_t>(i)] = total;
      total += lens[static_cast<size_t>(i)];
    }
    std::vector<char> all(static_cast<size_t>(total) + 1);
    check(MPI_Allgatherv(s.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::string> out;
    for (int i = 0; i < size_; ++i)
      out.emplace_back(all.data() + displs[static_cast<size_t>(i)], static_cast<size_t>(lens[static_cast<size_t>(i)]));
    return out;
  }
  std::vector<std::string> settings() const override {
    std::vector<std::string> out;
    // The MCA parameters (from --mca or the environment), less mpirun's own bookkeeping.
    for (char** e = environ; e && *e; ++e) {
      if (std::strncmp(*e, "OMPI_MCA_", 9) != 0) continue;
      const char* key = *e + 9;
      bool internal = false;
      for (const char* prefix : {"orte_", "ess", "pmix", "initial_wdir", "shmem_RUNTIME", "mpi_oversubscribe"})
        if (std::strncmp(key, prefix, std::strlen(prefix)) == 0) internal = true;
      if (!internal) out.emplace_back(*e);
    }
    return out;
  }
  std::vector<std::string> notes() const override {
    return {"out-of-place: MPI's calls with separate buffers (broadcast: memcpy on the root + MPI_Bcast);",
            "in-place: MPI_IN_PLACE; avg: MPI_SUM + a local division; sendrecv: MPI_Send/MPI_Recv ping-pong."};
  }
  std::string unsupported(Coll c, Dt d, Op) const override {
    if (is_reducing(c) && (d == Dt::Half || d == Dt::BFloat16))
      return "MPI has no 16-bit floating type to reduce";
    return "";
  }

  Prepared prepare(const Call& call) override {
    if (call.count > static_cast<size_t>(INT_MAX)) throw std::runtime_error("count beyond MPI's int counts");
    const MPI_Datatype t = mpi_type(call.dt);
    const MPI_Op op = mpi_op(call.op);
    const bool avg = is_reducing(call.coll) && call.op == Op::Avg;
    const Dt dt = call.dt;
    const size_t es = dt_size(dt);
    const size_t count = call.count;
    const int icount = static_cast<int>(count);
    const size_t bytes = count * es;
    const int n = size_, me = rank_, root = call.root;
    const size_t chunk = count / static_cast<size_t>(n);
    const int ichunk = static_cast<int>(chunk);
    const bool in_place = call.place == Place::In;
    void* send = call.send;
    void* recv = call.recv;
    const MPI_Comm w = MPI_COMM_WORLD;
    Prepared p;
    switch (call.coll) {
      case Coll::AllReduce:
        p.run = [=] {
          check(MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, icount, t, op, w), "MPI_Allreduce");
          if (avg) divide(dt, recv, count, n);
        };
        p.input = in_place ? recv : send;
        p.input_count = count;
        p.result = recv;
        p.result_count = count;
        break;
      case Coll::Broadcast:
        p.run = [=] {
          if (!in_place && me == root) std::memcpy(recv, send, bytes);
          check(MPI_Bcast(recv, icount, t, root, w), "MPI_Bcast");
        };
        p.input = in_place ? recv : send;
        p.input_count = count;
        p.result = recv;
        p.result_count = count;
        break;
      case Coll::Reduce:
        p.run = [=] {
          const void* sbuf = !in_place ? send : (me == root ? MPI_IN_PLACE : recv);
          check(MPI_Reduce(sbuf, me == root ? recv : nullptr, icount, t, op, root, w), "MPI_Reduce");
          if (avg && me == root) divide(dt, recv, count, n);
        };
        p.input = in_place ? recv : send;
        p.input_count = count;
        p.result = recv;
        p.result_count = me == root ? count : 0;
        break;
      case Coll::AllGather:
        p.run = [=] {
          if (in_place)
            check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, ichunk, t, w), "MPI_Allgather");
          else
            check(MPI_Allgather(send, ichunk, t, recv, ichunk, t, w), "MPI_Allgather");
        };
        p.input = in_place ? at(recv, me * chunk, es) : send;
        p.input_count = chunk;
        p.result = recv;
        p.result_count = count;
        break;
      case Coll::ReduceScatter: {
        void* result = in_place ? send : recv;
        p.run = [=] {
          check(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : send, result, ichunk, t, op, w),
                "MPI_Reduce_scatter_block");
          if (avg) divide(dt, result, chunk, n);
        };
        p.input = send;
        p.input_count = count;
        p.result = result;
        p.result_count = chunk;
        break;
      }
      case Coll::AllToAll:
        p.run = [=] { check(MPI_Alltoall(send, ichunk, t, recv, ichunk, t, w), "MPI_Alltoall"); };
        p.input = send;
        p.input_count = count;
        p.result = recv;
        p.result_count = count;
        break;
      case Coll::SendRecv:
        if (me == 0) {
          p.run = [=] {
            check(MPI_Send(send, icount, t, 1, 0, w), "MPI_Send");
            check(MPI_Recv(recv, icount, t, 1, 0, w, MPI_STATUS_IGNORE), "MPI_Recv");
          };
        } else if (me == 1) {
          p.run = [=] {
            check(MPI_Recv(recv, icount, t, 0, 0, w, MPI_STATUS_IGNORE), "MPI_Recv");
            check(MPI_Send(send, icount, t, 0, 0, w), "MPI_Send");
          };
        } else {
          p.run = [] {};
        }
        p.input = send;
        p.input_count = me < 2 ? count : 0;
        p.result = recv;
        p.result_count = me < 2 ? count : 0;
        break;
      case Coll::Copy:
        p.run = [=] { std::memcpy(recv, send, bytes); };
        p.input = send;
        p.input_count = count;
        p.result = recv;
        p.result_count = count;
        break;
    }
    return p;
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace
}  // namespace tbench

int main(int argc, char** argv) {
  const char* program = "mpi_bench";
  // MPI_BENCH_THREAD_LEVEL=multiple: MPI_THREAD_MULTIPLE, the level tdist's
  // mpi backend asks for (bench/compare.sh's scenario mpi), which costs Open MPI
  // itself about 0.15 us per small collective here; else MPI_Init's level.
  const char* level = std::getenv("MPI_BENCH_THREAD_LEVEL");
  int provided = 0;
  MPI_Init_thread(&argc, &argv,
                  level && std::string(level) == "multiple" ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  tbench::ParseResult parsed = tbench::parse_options(argc, argv);
  int status = 0;
  if (parsed.action == tbench::Action::Help) {
    if (rank == 0) std::fputs(tbench::help_text(program).c_str(), stdout);
  } else if (parsed.action == tbench::Action::UsageError) {
    if (rank == 0) std::fprintf(stderr, "%s: %s (see --help)\n", program, parsed.error.c_str());
    status = 2;
  } else if (parsed.options.device != tbench::Memory::Cpu) {
    if (rank == 0) std::fprintf(stderr, "%s: --device cuda is tdist-bench's; %s measures host buffers\n", program, program);
    status = 2;
  } else {
    try {
      tbench::MpiComm comm;
      status = tbench::run_benchmark(comm, parsed.options, program);
    } catch (const std::exception& e) {
      std::fflush(stdout);
      std::fprintf(stderr, "%s: rank %d: %s\n", program, rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
  MPI_Finalize();
  return status;
}
