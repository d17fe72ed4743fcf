// 我们自己的Ring-Allreduce: the tutorial's allreduce(send, recv), built only
// from point-to-point isend/recv, in the chunked form the tutorial leaves as
// an exercise (DeepSpeech / Baidu's ring allreduce): the tensor is cut into
// world_size chunks (like torch.chunk); in the reduce-scatter phase every rank
// passes one chunk to its right neighbour and adds the chunk coming from its
// left neighbour, size - 1 times, after which rank r holds the full sum of
// chunk (r + 1) % size; in the all-gather phase the finished chunks travel
// round the ring once more, size - 1 steps, overwriting instead of adding.
// Each rank sends 2 (size - 1) / size of the tensor in all, whatever the size.
//
//   tdist-example-ring_all_reduce [world_size]          (spawns itself)
//   tdistrun --nproc-per-node 4 --no-python tdist-example-ring_all_reduce
//
// Every rank prints its result and checks it against tdist::all_reduce.
#include <algorithm>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "example_main.h"

namespace {

// The elements [begin, end) of chunk i of n elements cut into `chunks` parts,
// as torch.chunk does: ceil(n / chunks) elements each, the last ones shorter
// (or empty).
struct Chunk {
  size_t begin, end;
  size_t size() const { return end - begin; }
};
Chunk chunk_of(size_t n, int chunks, int i) {
  size_t per = (n + chunks - 1) / chunks;
  size_t begin = std::min(n, per * i), end = std::min(n, begin + per);
  return {begin, end};
}

// Sums `send` over all ranks into `recv` (which may be `send` itself).
void allreduce(std::span<const float> send, std::span<float> recv) {
  const int rank = tdist::get_rank();
  const int size = tdist::get_world_size();
  const size_t n = send.size();
  std::vector<float> accum(send.begin(), send.end());  // the chunks being summed
  std::vector<float> recv_buff(chunk_of(n, size, 0).size());

  const int left = ((rank - 1) + size) % size;
  const int right = (rank + 1) % size;
  auto mod = [size](int i) { return ((i % size) + size) % size; };
  auto chunk_span = [&](int i) {
    Chunk c = chunk_of(n, size, i);
    return std::span<float>(accum.data() + c.begin, c.size());
  };

  // Reduce-scatter: in step i send chunk (rank - i), receive and add chunk (rank - i - 1).
  for (int i = 0; i < size - 1; ++i) {
    std::span<float> out = chunk_span(mod(rank - i));
    std::span<float> in = chunk_span(mod(rank - i - 1));
    auto send_req = tdist::isend(out, right);
    std::span<float> buff(recv_buff.data(), in.size());
    tdist::recv(buff, left);
    for (size_t k = 0; k < in.size(); ++k) in[k] += buff[k];
    send_req->wait();
  }
  // Now chunk (rank + 1) holds the sum over every rank.
  // All-gather: in step i send chunk (rank + 1 - i), receive chunk (rank - i) in place.
  for (int i = 0; i < size - 1; ++i) {
    std::span<float> out = chunk_span(mod(rank + 1 - i));
    std::span<float> in = chunk_span(mod(rank - i));
    auto send_req = tdist::isend(out, right);
    tdist::recv(in, left);
    send_req->wait();
  }
  std::copy(accum.begin(), accum.end(), recv.begin());
}

std::string format(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%g", i ? ", " : "", v[i]);
    s += buf;
  }
  return s + "]";
}

void run(int rank, int /*size*/) {
  // The small tensor the output shows: rank r contributes [r, r+1, ..., r+9]
  // (10 elements: uneven chunks for 3 or 4 ranks).
  std::vector<float> send(10), recv(10);
  for (size_t j = 0; j < send.size(); ++j) send[j] = float(rank + int(j));
  allreduce(send, recv);
  std::vector<float> expected = send;
  tdist::all_reduce(expected, tdist::ReduceOp::SUM);
  bool ok = recv == expected;

  // A large one, 1 MiB + a bit, with small integers so that any order of
  // summation gives the same floats.
  std::vector<float> big(262147), big_result(big.size());
  for (size_t j = 0; j < big.size(); ++j) big[j] = float((j * 7 + size_t(rank) * 13) % 101) - 50.0f;
  allreduce(big, big_result);
  tdist::all_reduce(big, tdist::ReduceOp::SUM);
  ok = ok && big_result == big;

  std::printf("Rank %d has data %s\n", rank, format(recv).c_str());
  std::printf("Rank %d ring all_reduce matches tdist::all_reduce: %s\n", rank, ok ? "yes" : "NO");
  std::fflush(stdout);
  if (!ok) throw std::runtime_error("rank " + std::to_string(rank) + ": ring all_reduce differs from tdist::all_reduce");
}

}  // namespace

int main(int argc, char** argv) { return example::run(argc, argv, run); }
