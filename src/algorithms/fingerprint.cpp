// TDIST_DEBUG=DETAIL's collective check (torch's TORCH_DISTRIBUTED_DEBUG=DETAIL
// idea): before a collective every rank shares a short signature of it (op,
// root, reduce op, dtype, shape) and all compare, so ranks that called
// different collectives, or the same with different arguments, get an error
// naming each rank's call instead of a hang or silently wrong data.
#include <cstring>
#include <map>
#include <vector>

#include "tdist/errors.h"
#include "algorithms/collective.h"

namespace tdist {

namespace {
constexpr size_t kSignatureBytes = 192;
}

void check_fingerprint(CollectiveContext& ctx, const std::string& signature) {
  const int n = ctx.size();
  if (n == 1) return;
  std::vector<char> all(kSignatureBytes * n, 0);
  std::vector<Tensor> blocks;
  for (int i = 0; i < n; ++i)
    blocks.push_back(Tensor(all.data() + i * kSignatureBytes, DType::UInt8, {int64_t(kSignatureBytes)}));
  std::memcpy(blocks[ctx.rank()].data(), signature.data(), std::min(signature.size(), kSignatureBytes - 1));
  algorithms::all_gather(ctx, blocks, blocks[ctx.rank()]);
  std::map<std::string, std::vector<int>> calls;
  for (int i = 0; i < n; ++i) calls[std::string(all.data() + i * kSignatureBytes)].push_back(i);
  if (calls.size() == 1) return;
  std::string text;
  for (auto& [sig, ranks] : calls) {
    std::string list;
    for (size_t i = 0; i < ranks.size(); ++i) list.append(i ? "," : "").append(std::to_string(ranks[i]));
    text.append(text.empty() ? "" : "; ").append("ranks [").append(list).append("] called ").append(sig);
  }
  throw DistBackendError("the ranks disagree on this collective: " + text);
}

}  // namespace tdist
