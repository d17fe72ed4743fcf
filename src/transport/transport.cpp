#include "transport/transport.h"

#include <string>

#include "tdist/errors.h"

namespace tdist {

// A rank may send to and receive from itself, as torch allows (an all-to-all
// written as batch_isend_irecv over every rank includes the rank itself).
void check_peer_arg(int peer, int /*rank*/, int size, bool is_recv) {
  if (peer >= 0 && peer < size) return;
  if (peer == kAnySender && is_recv) return;
  const char* what = is_recv ? "receive" : "send";
  throw DistValueError(std::string(what) + " with invalid peer rank " + std::to_string(peer) + " (group size " +
                       std::to_string(size) + ")");
}

}  // namespace tdist
