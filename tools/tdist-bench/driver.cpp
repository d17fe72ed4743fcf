#include "driver.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "buffers.h"
#include "output.h"
#include "timing.h"

namespace tbench {

std::string describe_this_process() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "?");
  return "Pid " + std::to_string(static_cast<long>(getpid())) + " on " + host;
}

namespace {

// A benchmark buffer: host memory, or device memory the runner allocated
// (Comm::device_buffer), which the driver reaches through a host staging buffer.
struct BenchBuffer {
  Buffer host;
  std::shared_ptr<void> device;
  void* data() const { return device ? device.get() : host.data(); }
};

BenchBuffer allocate(Comm& comm, size_t bytes) {
  BenchBuffer m;
  m.device = comm.device_buffer(bytes);
  if (!m.device) m.host = Buffer(bytes);
  return m;
}

struct Sweep {
  Comm& comm;
  const Options& o;
  Reporter& rep;
  BenchBuffer send, recv;
  Buffer stage;  // host copies of device inputs and results; empty for host buffers
  double busbw_sum = 0;
  int busbw_n = 0;
  int64_t wrong_total = 0;

  Cell measure(Coll c, Dt d, Op op, Place place, size_t count, uint64_t bytes, int warmup, int iters) {
    Cell cell;
    const bool wanted = place == Place::Out ? o.places != Places::InOnly : o.places != Places::OutOnly;
    if (!wanted || !has_place(c, place)) return cell;
    const Op fill_op = is_reducing(c) ? op : Op::Sum;
    Call call{c, d, op, o.root, place, send.data(), recv.data(), count};
    Prepared prep = comm.prepare(call);
    fill_input(d, fill_op, prep);
    double secs = time_loop(comm, prep.run, warmup, iters);
    if (c == Coll::SendRecv) secs /= 2;  // latency: half the round trip
    cell.measured = true;
    cell.time_us = secs * 1e6;
    compute_bandwidth(cell, c, bytes, comm.size());
    busbw_sum += cell.busbw;
    ++busbw_n;
    if (o.check) {
      const size_t result_bytes = prep.result_count * dt_size(d);
      if (on_device()) {
        poison(stage.data(), result_bytes);
        comm.upload(prep.result, stage.data(), result_bytes);
      } else {
        poison(prep.result, result_bytes);
      }
      fill_input(d, fill_op, prep);
      prep.run();
      const void* result = prep.result;
      if (on_device()) {
        comm.download(stage.data(), prep.result, result_bytes);
        result = stage.data();
      }
      CheckSpec spec{c, d, op, comm.size(), comm.rank(), o.root, count};
      cell.wrong = comm.sum_int64(count_wrong(spec, result, prep.result_count));
      wrong_total += cell.wrong;
    }
    return cell;
  }

  bool on_device() const { return send.device != nullptr; }

  // The rank's pattern into the operation's input, through the host for device buffers.
  void fill_input(Dt d, Op fill_op, const Prepared& prep) {
    if (!on_device()) {
      fill_pattern(d, fill_op, comm.rank(), prep.input, prep.input_count);
      return;
    }
    fill_pattern(d, fill_op, comm.rank(), stage.data(), prep.input_count);
    comm.upload(prep.input, stage.data(), prep.input_count * dt_size(d));
  }

  void table(Coll c, Dt d, Op op) {
    const bool reducing = is_reducing(c);
    rep.section(c, d, reducing ? std::string(op_name(op)) : "none");
    for (uint64_t requested : sweep_sizes(o)) {
      const size_t count = count_for(c, d, requested, comm.size());
      const uint64_t bytes = static_cast<uint64_t>(count) * dt_size(d);
      Record r{c, d, op, reducing, is_rooted(c) ? o.root : -1, bytes, count,
               scaled_warmup(o, bytes), scaled_iters(o, bytes), {}, {}};
      r.out = measure(c, d, op, Place::Out, count, bytes, r.warmup, r.iters);
      r.in = measure(c, d, op, Place::In, count, bytes, r.warmup, r.iters);
      rep.row(r);
    }
  }
};

}  // namespace

int run_benchmark(Comm& comm, const Options& o, const std::string& program) {
  const bool printer = comm.rank() == 0;
  auto rep = make_reporter(o.format, printer ? stdout : nullptr);
  if (o.root >= comm.size()) {
    if (printer)
      std::fprintf(stderr, "%s: --root %d is not a rank of the %d ranks\n", program.c_str(), o.root, comm.size());
    return 2;
  }
  RunInfo info;
  info.program = program;
  info.library = comm.library();
  info.world_size = comm.size();
  info.ranks = comm.all_gather_strings(describe_this_process());
  info.settings = comm.settings();
  info.notes = comm.notes();
  info.options = o;
  rep->begin(info);

  uint64_t largest = 0;
  for (uint64_t s : sweep_sizes(o)) largest = std::max(largest, s);
  BenchBuffer send = allocate(comm, largest), recv = allocate(comm, largest);
  Buffer stage = send.device ? Buffer(largest) : Buffer();
  Sweep sweep{comm, o, *rep, std::move(send), std::move(recv), std::move(stage)};

  for (Coll c : o.colls) {
    if (c == Coll::SendRecv && comm.size() < 2) {
      rep->note("sendrecv skipped: it needs at least 2 ranks");
      continue;
    }
    for (Dt d : o.dts) {
      const std::vector<Op> ops = is_reducing(c) ? o.ops : std::vector<Op>{o.ops.front()};
      for (Op op : ops) {
        const std::string why = comm.unsupported(c, d, op);
        if (!why.empty()) {
          std::string line(coll_name(c));
          line += ' ';
          line += dt_name(d);
          if (is_reducing(c)) {
            line += ' ';
            line += op_name(op);
          }
          line += " skipped: ";
          line += why;
          rep->note(line);
          continue;
        }
        sweep.table(c, d, op);
      }
    }
  }
  const double avg = sweep.busbw_n > 0 ? sweep.busbw_sum / sweep.busbw_n : 0;
  rep->end(avg, sweep.wrong_total, o.check);
  return sweep.wrong_total > 0 ? 1 : 0;
}

}  // namespace tbench
