// Object collectives on byte strings. Wire format (documented in
// distributed.h): object sizes travel first as int64 tensors, then the bytes,
// concatenated (padded to the largest object where a collective needs equal
// sizes: gather and scatter). Nothing received is ever executed or parsed.
#include <algorithm>
#include <cstring>

#include "tdist/distributed.h"
#include "tdist/errors.h"
#include "process_group/world.h"

namespace tdist {

namespace {

// Point-to-point object messages use their own tag, so they never mix with
// the user's tensors on tag 0.
constexpr int kObjectTag = -2;

Tensor bytes_view(std::string& s) { return Tensor(s.data(), DType::UInt8, {static_cast<int64_t>(s.size())}); }
Tensor bytes_view(std::vector<char>& s) { return Tensor(s.data(), DType::UInt8, {static_cast<int64_t>(s.size())}); }

std::vector<char> concat(const std::vector<std::string>& objects, size_t pad_to = 0) {
  size_t total = 0;
  for (auto& o : objects) total += std::max(o.size(), pad_to);
  std::vector<char> out(total);
  size_t at = 0;
  for (auto& o : objects) {
    // Empty objects may come with an empty (null) buffer: memcpy must not see it.
    if (!o.empty()) std::memcpy(out.data() + at, o.data(), o.size());
    at += std::max(o.size(), pad_to);
  }
  return out;
}

void split(const std::vector<char>& bytes, const std::vector<int64_t>& sizes, std::vector<std::string>& out,
           size_t stride = 0) {
  out.resize(sizes.size());
  size_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i].assign(bytes.data() + at, static_cast<size_t>(sizes[i]));
    at += stride ? stride : static_cast<size_t>(sizes[i]);
  }
}

std::vector<int64_t> sizes_of(const std::vector<std::string>& objects) {
  std::vector<int64_t> sizes;
  for (auto& o : objects) sizes.push_back(static_cast<int64_t>(o.size()));
  return sizes;
}

// Sizes that came from other ranks: a negative one (a corrupt or foreign
// peer) must become an error, not a huge allocation.
void check_sizes(const std::vector<int64_t>& sizes, const char* op) {
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] < 0)
      throw DistBackendError(std::string(op) + ": received a negative object size (" + std::to_string(sizes[i]) +
                             ") for entry " + std::to_string(i));
}

}  // namespace

void broadcast_object_list(std::vector<std::string>& object_list, PeerRank src, const Group& group) {
  Group g = resolve_group(group, "broadcast_object_list");
  if (skip_non_member(*g, "broadcast_object_list")) return;
  bool is_src = g->rank() == to_group_rank(*g, src, "broadcast_object_list", "source");
  std::vector<int64_t> sizes = is_src ? sizes_of(object_list) : std::vector<int64_t>(object_list.size());
  broadcast(sizes, src, g);
  check_sizes(sizes, "broadcast_object_list");
  size_t total = 0;
  for (int64_t s : sizes) total += static_cast<size_t>(s);
  std::vector<char> bytes = is_src ? concat(object_list) : std::vector<char>(total);
  broadcast(bytes_view(bytes), src, g);
  if (!is_src) split(bytes, sizes, object_list);
}

void all_gather_object(std::vector<std::string>& object_list, const std::string& obj, const Group& group) {
  Group g = resolve_group(group, "all_gather_object");
  if (skip_non_member(*g, "all_gather_object")) return;
  const int n = g->size();
  std::vector<int64_t> sizes(n);
  int64_t mine = static_cast<int64_t>(obj.size());
  all_gather_into_tensor(sizes, Tensor(&mine, 1), g);
  check_sizes(sizes, "all_gather_object");
  object_list.assign(n, std::string());
  std::vector<Tensor> outputs;
  for (int i = 0; i < n; ++i) {
    object_list[i].resize(static_cast<size_t>(sizes[i]));
    outputs.push_back(bytes_view(object_list[i]));
  }
  std::string copy = obj;
  all_gather(outputs, bytes_view(copy), g);
}

void gather_object(const std::string& obj, std::vector<std::string>* object_gather_list, PeerRank dst,
                   const Group& group) {
  Group g = resolve_group(group, "gather_object");
  if (skip_non_member(*g, "gather_object")) return;
  const int n = g->size();
  const bool is_dst = g->rank() == to_group_rank(*g, dst, "gather_object", "destination");
  if (is_dst && object_gather_list == nullptr)
    throw DistValueError("gather_object: the destination rank must pass object_gather_list");
  // Sizes to everyone (cheap), so every rank can pad to the same block size.
  std::vector<int64_t> sizes(n);
  int64_t mine = static_cast<int64_t>(obj.size());
  all_gather_into_tensor(sizes, Tensor(&mine, 1), g);
  check_sizes(sizes, "gather_object");
  size_t block = static_cast<size_t>(*std::max_element(sizes.begin(), sizes.end()));
  std::vector<char> padded(block);
  if (!obj.empty()) std::memcpy(padded.data(), obj.data(), obj.size());
  std::vector<char> all(is_dst ? block * n : 0);
  std::vector<Tensor> outputs;
  if (is_dst)
    for (int i = 0; i < n; ++i) outputs.push_back(Tensor(all.data() + i * block, DType::UInt8, {int64_t(block)}));
  gather(bytes_view(padded), outputs, dst, g);
  if (is_dst) split(all, sizes, *object_gather_list, block);
}

void scatter_object_list(std::vector<std::string>& scatter_object_output_list,
                         const std::vector<std::string>& scatter_object_input_list, PeerRank src, const Group& group) {
  Group g = resolve_group(group, "scatter_object_list");
  if (skip_non_member(*g, "scatter_object_list")) return;
  const int n = g->size();
  const bool is_src = g->rank() == to_group_rank(*g, src, "scatter_object_list", "source");
  if (is_src && static_cast<int>(scatter_object_input_list.size()) != n)
    throw DistValueError("scatter_object_list: the source must pass " + std::to_string(n) + " objects, got " +
                         std::to_string(scatter_object_input_list.size()));
  if (scatter_object_output_list.empty())
    throw DistValueError("scatter_object_list: scatter_object_output_list must have at least one entry");
  std::vector<int64_t> sizes = is_src ? sizes_of(scatter_object_input_list) : std::vector<int64_t>(n);
  broadcast(sizes, src, g);
  check_sizes(sizes, "scatter_object_list");
  size_t block = static_cast<size_t>(*std::max_element(sizes.begin(), sizes.end()));
  std::vector<char> all = is_src ? concat(scatter_object_input_list, block) : std::vector<char>();
  std::vector<Tensor> inputs;
  if (is_src)
    for (int i = 0; i < n; ++i) inputs.push_back(Tensor(all.data() + i * block, DType::UInt8, {int64_t(block)}));
  std::vector<char> mine(block);
  scatter(bytes_view(mine), inputs, src, g);
  scatter_object_output_list[0].assign(mine.data(), static_cast<size_t>(sizes[g->rank()]));
}

void send_object_list(const std::vector<std::string>& object_list, PeerRank dst, const Group& group) {
  std::vector<int64_t> sizes = sizes_of(object_list);
  send(sizes, dst, group, kObjectTag);
  std::vector<char> bytes = concat(object_list);
  send(bytes_view(bytes), dst, group, kObjectTag);
}

int recv_object_list(std::vector<std::string>& object_list, PeerRank src, const Group& group) {
  Group g = resolve_group(group, "recv_object_list");
  std::vector<int64_t> sizes(object_list.size());
  int from = recv(sizes, src, g, kObjectTag);
  size_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw DistBackendError("recv_object_list: rank " + std::to_string(from) + " sent a negative size");
    total += static_cast<size_t>(s);
  }
  std::vector<char> bytes(total);
  recv(bytes_view(bytes), from, g, kObjectTag);  // the bytes come from the same sender
  split(bytes, sizes, object_list);
  return from;
}

}  // namespace tdist
