#include "transport/transport.h"

#include <string>

#include "tdist/errors.h"

namespace tdist {

void check_peer_arg(int peer, int rank, int size, bool is_recv) {
  if (peer >= 0 && peer < size && peer != rank) return;
  if (peer == kAnySender && is_recv) return;
  const char* what = is_recv ? "receive" : "send";
  if (peer < 0 || peer >= size)
    throw DistValueError(std::string(what) + " with invalid peer rank " + std::to_string(peer) + " (group size " +
                         std::to_string(size) + ")");
  if (peer == rank)
    throw DistValueError(std::string(what) + " to/from itself (rank " + std::to_string(peer) + ") is not allowed");
}

}  // namespace tdist
