// Every rank of a group sends messages of each size to every other rank at
// once (its receives posted first), then checks what arrived: the shared
// check of the point-to-point data paths.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "tdist/process_group.h"
#include "transport/byte_pattern.h"

namespace tdist::testing {

// The contents of the message of `size` bytes from rank `from` to rank `to`.
inline std::vector<uint8_t> message_from(size_t size, int from, int to) { return pattern(size, from * 64 + to); }

inline void exchange_sizes(ProcessGroup& pg, const std::vector<size_t>& sizes) {
  std::vector<std::shared_ptr<Work>> works;
  std::vector<std::vector<uint8_t>> out, in;
  for (int peer = 0; peer < pg.size(); ++peer) {
    if (peer == pg.rank()) continue;
    for (size_t k = 0; k < sizes.size(); ++k) {
      in.emplace_back(sizes[k], 0xee);
      works.push_back(pg.recv(bytes(in.back()), peer, static_cast<int>(k)));
      out.push_back(message_from(sizes[k], pg.rank(), peer));
      works.push_back(pg.send(bytes(out.back()), peer, static_cast<int>(k)));
    }
  }
  for (auto& w : works) w->wait();
  size_t at = 0;
  for (int peer = 0; peer < pg.size(); ++peer) {
    if (peer == pg.rank()) continue;
    for (size_t k = 0; k < sizes.size(); ++k, ++at)
      ASSERT_EQ(in[at], message_from(sizes[k], peer, pg.rank()))
          << "from rank " << peer << ", " << sizes[k] << " bytes";
  }
}

}  // namespace tdist::testing
