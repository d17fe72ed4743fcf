// A data path that lives only in the tests: it proves that adding a way to
// reach a peer is what docs/architecture.md says (a DataPath and a
// registration), with nothing in libtdist naming it. Ranks that run as
// threads of one process (with_thread_world) hand each other messages
// through in-memory mailboxes; the pair's control socket carries the set-up
// (the mailbox's key) and the doorbells, as it does for the shared-memory
// rings. Every message that goes through a mailbox is counted, per pair.
#pragma once

#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "tdist/errors.h"
#include "transport/data_path.h"
#include "transport/data_path_registry.h"

namespace tdist::testing {

inline constexpr int kMailboxMaxRanks = 8;

struct MailboxStats {
  // Messages sent through a mailbox, by (from, to) rank of the mesh.
  std::array<std::array<std::atomic<uint64_t>, kMailboxMaxRanks>, kMailboxMaxRanks> sent{};
  uint64_t total() const {
    uint64_t n = 0;
    for (auto& row : sent)
      for (auto& c : row) n += c.load();
    return n;
  }
  void reset() {
    for (auto& row : sent)
      for (auto& c : row) c.store(0);
  }
};

inline MailboxStats& mailbox_stats() {
  static MailboxStats stats;
  return stats;
}

// Which pairs the mailbox reaches (it must answer alike at both ends); all by default.
inline std::function<bool(int rank, int peer)>& mailbox_reaches() {
  static std::function<bool(int, int)> reaches = [](int, int) { return true; };
  return reaches;
}

// One direction of a pair: frames waiting for the reader.
struct MailboxQueue {
  struct Frame {
    wire::MessageHeader header;
    std::vector<char> payload;
  };
  std::mutex mu;
  std::deque<Frame> frames;
  bool reader_sleeps = false;  // the reader asked for a doorbell (under mu)
};

struct Mailbox {
  MailboxQueue to_high, to_low;  // by the pair's lower and higher rank
};

// The mailboxes being set up, by key: the lower rank of a pair files one and
// sends its key over the control socket; the higher takes it.
struct MailboxDesk {
  std::mutex mu;
  uint64_t next_key = 1;
  std::map<uint64_t, std::shared_ptr<Mailbox>> waiting;
};
inline MailboxDesk& mailbox_desk() {
  static MailboxDesk desk;
  return desk;
}

class MailboxPath final : public DataPath {
 public:
  MailboxPath(std::shared_ptr<Mailbox> box, bool is_low, PathHost& host, int rank, int peer)
      : box_(std::move(box)),
        tx_(is_low ? box_->to_high : box_->to_low),
        rx_(is_low ? box_->to_low : box_->to_high),
        host_(host),
        rank_(rank),
        peer_(peer) {}

  // A send is complete once its copy is in the mailbox.
  void post_locked(std::shared_ptr<Request> request) override {
    MailboxQueue::Frame frame{wire::MessageHeader{wire::kMessageMagic, 0, request->tag(), request->size(),
                                                  request->comm()},
                              std::vector<char>(static_cast<char*>(request->data()),
                                                static_cast<char*>(request->data()) + request->size())};
    bool ring = false;
    {
      std::lock_guard<std::mutex> lock(tx_.mu);
      tx_.frames.push_back(std::move(frame));
      ring = std::exchange(tx_.reader_sleeps, false);
    }
    if (rank_ < kMailboxMaxRanks && peer_ < kMailboxMaxRanks) mailbox_stats().sent[rank_][peer_].fetch_add(1);
    if (ring) host_.doorbell_locked(peer_);
    request->complete(nullptr, peer_);
  }
  void flush_locked() override {}
  bool backlog() const override { return false; }
  void fail_sends_locked(const std::exception_ptr&) override {}
  void abandon_sends_locked(uint32_t, const std::exception_ptr&) override {}  // a send is never left half-written
  bool prepare_sleep_locked() override { return true; }

  bool poll() override {
    std::deque<MailboxQueue::Frame> arrived;
    {
      std::lock_guard<std::mutex> lock(rx_.mu);
      rx_.reader_sleeps = false;
      arrived.swap(rx_.frames);
    }
    for (auto& frame : arrived) {
      char* dst = host_.begin_message(peer_, frame.header, slot_);
      if (dst && !frame.payload.empty()) std::memcpy(dst, frame.payload.data(), frame.payload.size());
      host_.end_message(peer_, slot_);
    }
    return !arrived.empty();
  }
  bool prepare_sleep() override {
    std::lock_guard<std::mutex> lock(rx_.mu);
    rx_.reader_sleeps = true;
    return !rx_.frames.empty();
  }
  MessageSlot& incoming() override { return slot_; }
  void discard_incoming() override {}  // a message is copied whole in poll()

 private:
  const std::shared_ptr<Mailbox> box_;
  MailboxQueue& tx_;
  MailboxQueue& rx_;
  PathHost& host_;
  const int rank_;
  const int peer_;
  MessageSlot slot_;
};

// Registers "mailbox" (once per process).
inline void register_mailbox_path() {
  static const bool registered = [] {
    register_data_path(
        "mailbox",
        DataPathFactory{
            "an in-process mailbox",
            [](const SetupChannel& channel) { return mailbox_reaches()(channel.rank(), channel.peer()); },
            [](SetupChannel& channel, PathHost& host, Deadline deadline) -> std::unique_ptr<DataPath> {
              const bool is_low = channel.rank() < channel.peer();
              std::shared_ptr<Mailbox> box;
              uint64_t key = 0;
              MailboxDesk& desk = mailbox_desk();
              if (is_low) {
                box = std::make_shared<Mailbox>();
                {
                  std::lock_guard<std::mutex> lock(desk.mu);
                  key = desk.next_key++;
                  desk.waiting[key] = box;
                }
                channel.send(&key, sizeof(key), deadline);
              } else {
                channel.recv(&key, sizeof(key), deadline);
                std::lock_guard<std::mutex> lock(desk.mu);
                auto it = desk.waiting.find(key);
                if (it == desk.waiting.end())
                  throw DistNetworkError(channel.label() + ": no mailbox " + std::to_string(key) + " from " +
                                         channel.peer_name() + " (the mailbox path needs ranks in one process)");
                box = std::move(it->second);
                desk.waiting.erase(it);
              }
              return std::make_unique<MailboxPath>(std::move(box), is_low, host, channel.rank(), channel.peer());
            },
        });
    return true;
  }();
  (void)registered;
}

}  // namespace tdist::testing
