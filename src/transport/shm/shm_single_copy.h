// Large messages between two ranks of one host in one copy, split between
// them: the sender announces the message in the ring (a header alone, no
// payload) and leaves where its bytes are in a slot of the pair's segment;
// the receiver reads the first part straight out of the sender's memory
// (process_vm_readv) while the sender writes the rest straight into the
// receive buffer (process_vm_writev). Each byte is copied once, the two
// halves on two cores at once. The ring copies every byte twice, and when
// the two ranks' cores share no cache (two chiplets, two sockets) each of its
// lines crosses between them twice: 1 MiB took 420-540 µs there against
// 62-87 on cores that share one; in one copy 43-71 either way
// (docs/tuning_log.md, "Point-to-point in one copy").
//
// Every step that touches the other process's memory is claimed first, by a
// compare-and-swap on the slot, so that either side can withdraw what the
// other has not begun: a sender whose send failed withdraws its buffer, a
// receiver whose receive failed revokes its buffer. Neither then touches the
// other's memory, and a part already begun is waited for (it ends within one
// copy) before the request completes. The same claim lets a receiver that
// has read its half before the sender began the other (the sender is not
// running: more ranks than cores) read that half too. An announcement that
// arrives before its receive is posted waits a moment for it (shm_path.cpp),
// then is read whole into the mesh's buffer; the sender then writes nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tdist {

// The sender's buffer (src_state): the receiver claims it to read its part,
// or the sender withdraws it first; kSrcDone once the receiver is done with
// the whole slot (its read, and the outcome of the sender's part): only then
// may the sender complete the send and use the slot again.
enum SrcState : uint32_t { kSrcPosted = 0, kSrcReading = 1, kSrcWithdrawn = 2, kSrcDone = 3 };
// The sender's part, written into the receive buffer (dst_state).
enum DstState : uint32_t {
  kDstUnanswered = 0,  // the receiver has not seen the announcement yet
  kDstWanted = 1,      // dst and split are set: the sender writes [split, size)
  kDstWriting = 2,
  kDstWritten = 3,
  kDstRevoked = 4,  // by the receiver (its receive failed) or the sender (its send failed): nobody writes
  kDstNone = 5,     // the receiver reads it all (or drops it): nothing to write
  kDstFailed = 6,   // the sender's write failed
  kDstTaken = 7,    // the receiver read that part too: the sender had not begun it
};

// One message in flight: message k of a direction uses slot k % kSlots.
struct alignas(64) SingleCopySlot {
  std::atomic<uint64_t> src{0};    // the sender's buffer, in its address space
  std::atomic<uint64_t> dst{0};    // where the sender writes, in the receiver's
  std::atomic<uint64_t> split{0};  // the receiver reads [0, split); the sender writes [split, size)
  std::atomic<uint32_t> src_state{kSrcPosted};
  std::atomic<uint32_t> dst_state{kDstUnanswered};
};

// One direction's slots and the flags that ask for a doorbell.
struct alignas(64) SingleCopyControl {
  static constexpr uint64_t kSlots = 16;  // messages a sender may have announced and not finished
  std::atomic<uint32_t> sender_waits{0};  // the sender sleeps: ring it when a slot moves
  alignas(64) std::atomic<uint32_t> receiver_waits{0};
  SingleCopySlot slots[kSlots];
};

// Each rank of a pair checks, once, that the pid its peer gave names the
// peer: it sends the peer a random nonce over their connection, the peer
// stores it in a word of its own memory, and the rank reads that word at the
// peer's pid (and writes it back, which proves it may write there too). A
// peer that gave another process's pid cannot put the nonce there, so no
// peer can make a rank copy into or out of a third process. The lower rank
// checks during the set-up; the higher one when it first looks at the path
// after the lower rank's verdict is in. Each verdict is in the segment:
// messages go in one copy only once both are 1.
struct SingleCopyVerdicts {
  std::atomic<uint32_t> low{0};  // 0 not yet, 1 the lower rank verified the higher one, 2 it could not
  alignas(64) std::atomic<uint32_t> high{0};
};

// What each side tells the other during the set-up (wire::ShmOffer,
// wire::ShmReply): its pid, the address of its word that will hold the
// other's nonce, and the nonce the other must store in its own word.
struct SingleCopyIdentity {
  int32_t pid = 0;
  uint64_t pid_ns = 0;
  uint64_t probe = 0;
  uint64_t nonce = 0;
};

// A word for one pair's probe. Never freed, nor used for anything else: a
// peer may still probe it after the pair is gone (it writes what it read
// back), and must not write into memory that something else owns by then.
std::atomic<uint64_t>* new_probe_word();

// This process's identity for a pair whose probe word is `word` (having
// allowed the peers of its user to read and write its memory:
// util/peer_memory.h), with a fresh nonce.
SingleCopyIdentity single_copy_identity(const std::atomic<uint64_t>& word);

// Whether this process may read and write the memory of the process `peer`
// names, and that process holds `nonce` (the one this process gave it) at its
// probe word. Empty when so, else why not (TDIST_TEST_SHM_SINGLE_COPY_FAIL
// makes it fail, for tests).
std::string probe_single_copy(const SingleCopyIdentity& peer, uint64_t nonce);

// Messages this process received in one copy so far (tests check that the
// path they mean to exercise was taken).
uint64_t single_copy_messages_received();
void count_single_copy_message();

}  // namespace tdist
