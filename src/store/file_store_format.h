// FileStore's file: an append-only log of records, replayed by every reader.
//
//   File   := "TDISTFS1" | u64 generation | Record*
//   Record := u8 type | u32 key_len | u64 value_len | key | value   (little-endian)
//
//   kSet      key = value (set, compare_set, multi_set)
//   kCounter  key = value, a counter's new decimal text (add)
//   kAppend   value appended to key
//   kJoin     a store user opened the file; key = its UserId, value empty
//   kLeave    that user's store was destroyed
//
// Every access holds an fcntl lock on the whole file (shared to read, exclusive
// to write). The generation changes when the file is reset (a run that found
// only dead users), so readers know to replay from the start. A record cut
// short by a writer that died mid-write is ignored by readers and cut off by
// the next writer.
#pragma once

#include <cstdint>
#include <string>

#include "store/tcp_store_protocol.h"  // put_u32/put_u64/get_u32/get_u64

namespace tdist::store_detail {

inline constexpr char kFileMagic[8] = {'T', 'D', 'I', 'S', 'T', 'F', 'S', '1'};
inline constexpr size_t kFileHeaderBytes = 16;
inline constexpr size_t kRecordHeaderBytes = 1 + 4 + 8;

enum class RecordType : uint8_t { kSet = 1, kCounter = 2, kAppend = 3, kJoin = 4, kLeave = 5 };

inline std::string encode_file_header(uint64_t generation) {
  std::string out(kFileMagic, sizeof(kFileMagic));
  put_u64(out, generation);
  return out;
}

inline void encode_record(std::string& out, RecordType type, const std::string& key, const std::string& value) {
  out.push_back(static_cast<char>(type));
  put_u32(out, static_cast<uint32_t>(key.size()));
  put_u64(out, value.size());
  out += key;
  out += value;
}

// Who opened the file: enough to tell later whether that process still runs.
struct UserId {
  std::string host;     // gethostname()
  std::string boot_id;  // /proc/sys/kernel/random/boot_id (empty when unknown)
  std::string pid_ns;   // /proc/self/ns/pid link text: pids mean something only within it
  long long pid = 0;
  unsigned long long start_time = 0;  // /proc/<pid>/stat field 22 (0 when unknown)
  unsigned long long nonce = 0;       // tells apart stores of one process

  std::string encode() const {
    return host + "\n" + boot_id + "\n" + pid_ns + "\n" + std::to_string(pid) + "\n" + std::to_string(start_time) + "\n" +
           std::to_string(nonce);
  }
  static bool decode(const std::string& text, UserId* out);
};

}  // namespace tdist::store_detail
