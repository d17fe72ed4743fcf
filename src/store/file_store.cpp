// FileStore: a record log in a shared file (see file_store_format.h).
//
// fcntl locks belong to a process, not to a descriptor: two stores of one
// process on one file would not exclude each other, and closing any
// descriptor of the file drops the process's lock. So every store of this
// process on the same file (same device and inode) also shares one mutex,
// held around every locked section and around close().
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "store/file_store_format.h"
#include "store/kv_table.h"
#include "store/store_util.h"
#include "tdist/errors.h"
#include "tdist/store.h"
#include "util/logging.h"
#include "util/socket.h"

namespace tdist {

using namespace store_detail;

bool store_detail::UserId::decode(const std::string& text, UserId* out) {
  std::istringstream in(text);
  std::string pid, start, nonce;
  if (!std::getline(in, out->host) || !std::getline(in, out->boot_id) || !std::getline(in, out->pid_ns) ||
      !std::getline(in, pid) ||
      !std::getline(in, start) || !std::getline(in, nonce))
    return false;
  try {
    out->pid = std::stoll(pid);
    out->start_time = std::stoull(start);
    out->nonce = std::stoull(nonce);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

namespace {

std::shared_ptr<std::mutex> file_mutex(dev_t dev, ino_t ino) {
  static std::mutex* mu = new std::mutex;  // leaked: stores may outlive static destruction
  static auto* registry = new std::map<std::pair<dev_t, ino_t>, std::weak_ptr<std::mutex>>;
  std::lock_guard<std::mutex> lock(*mu);
  std::erase_if(*registry, [](const auto& kv) { return kv.second.expired(); });
  auto& slot = (*registry)[{dev, ino}];
  if (auto p = slot.lock()) return p;
  auto p = std::make_shared<std::mutex>();
  slot = p;
  return p;
}

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Field 3 (state) and field 22 (start time) of /proc/<pid>/stat.
bool process_stat(long long pid, char* state, unsigned long long* start) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  std::string f;
  for (int i = 3; i <= 22 && (fields >> f); ++i) {
    if (i == 3) *state = f.empty() ? '?' : f[0];
    if (i == 22) {
      try {
        *start = std::stoull(f);
      } catch (const std::exception&) {
        return false;
      }
      return true;
    }
  }
  return false;
}

UserId self_id() {
  static std::atomic<unsigned long long> counter{0};
  UserId id;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  id.host = host;
  id.boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
  char ns[128] = {0};
  if (::readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1) > 0) id.pid_ns = ns;
  id.pid = getpid();
  char state = 0;
  process_stat(id.pid, &state, &id.start_time);
  id.nonce = ++counter;
  return id;
}

enum class Liveness { kAlive, kDead, kUnknown };

Liveness liveness(const UserId& u, const UserId& self) {
  if (u.host != self.host) return Liveness::kUnknown;
  if (!u.boot_id.empty() && !self.boot_id.empty() && u.boot_id != self.boot_id) return Liveness::kDead;
  // Another pid namespace (a container with the same host name): its pids cannot be checked from here.
  if (u.pid_ns != self.pid_ns) return Liveness::kUnknown;
  if (u.pid <= 0) return Liveness::kDead;
  if (::kill(static_cast<pid_t>(u.pid), 0) != 0 && errno == ESRCH) return Liveness::kDead;
  char state = 0;
  unsigned long long start = 0;
  if (process_stat(u.pid, &state, &start)) {
    if (state == 'Z' || state == 'X') return Liveness::kDead;
    if (u.start_time != 0 && start != u.start_time) return Liveness::kDead;  // the pid was reused
  }
  return Liveness::kAlive;
}

std::string describe_user(const UserId& u, const UserId& self) {
  if (u.host == self.host && u.pid_ns != self.pid_ns)
    return "pid " + std::to_string(u.pid) + " in another pid namespace (" + u.pid_ns + ") on this host";
  if (u.host == self.host) return "pid " + std::to_string(u.pid) + " on this host";
  return "pid " + std::to_string(u.pid) + " on host '" + u.host + "'";
}

uint64_t random_generation() {
  std::random_device rd;
  uint64_t g = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^
               (static_cast<uint64_t>(getpid()) << 16);
  return g == 0 ? 1 : g;
}

// An fcntl lock on the whole file while in scope.
class FileLock {
 public:
  FileLock(int fd, short type, const std::string& name) : fd_(fd) {
    struct flock fl {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    while (::fcntl(fd, F_SETLKW, &fl) != 0) {
      if (errno == EINTR) continue;
      throw DistStoreError(name + ": cannot lock the file: " + errno_string(errno));
    }
  }
  ~FileLock() {
    struct flock fl {};
    fl.l_type = F_UNLCK;
    fl.l_whence = SEEK_SET;
    ::fcntl(fd_, F_SETLK, &fl);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

void pread_all(int fd, char* p, size_t n, off_t at, const std::string& name) {
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw DistStoreError(name + ": cannot read the file: " + (r == 0 ? "unexpected end" : errno_string(errno)));
    p += r;
    n -= static_cast<size_t>(r);
    at += r;
  }
}

void pwrite_all(int fd, const char* p, size_t n, off_t at, const std::string& name) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw DistStoreError(name + ": cannot write the file: " + errno_string(errno));
    p += w;
    n -= static_cast<size_t>(w);
    at += w;
  }
}

}  // namespace

struct FileStore::State {
  std::string name;  // "FileStore(<path>)"
  std::string path;
  int world_size = -1;
  Fd fd;
  std::shared_ptr<std::mutex> mu;  // this process's stores on this file
  UserId self;
  std::string self_key;

  // The replayed log.
  uint64_t generation = 0;  // 0: no header yet
  uint64_t offset = 0;      // end of the last complete record read
  uint64_t seen_size = 0;   // file size at the last sync
  KvTable table;
  std::map<std::string, bool> users;  // UserId::encode() -> has left
  int64_t left = 0;
  std::string preserved_note;  // set when the file held keys of users that had all left

  void clear() {
    table.clear();
    users.clear();
    left = 0;
    generation = 0;
    offset = 0;
  }

  // Applies the complete records of buf; returns the bytes they span.
  size_t apply(const char* p, size_t n, uint64_t file_offset) {
    size_t pos = 0;
    while (n - pos >= kRecordHeaderBytes) {
      uint8_t type = static_cast<uint8_t>(p[pos]);
      uint64_t klen = get_u32(p + pos + 1);
      uint64_t vlen = get_u64(p + pos + 5);
      if (type < 1 || type > 5)
        throw DistStoreError(name + ": the file is corrupt (record type " + std::to_string(type) + " at offset " +
                             std::to_string(file_offset + pos) + "); delete it if no run is using it");
      if (vlen > n || klen + vlen > n - pos - kRecordHeaderBytes) break;  // cut short: written by a dead writer
      std::string key(p + pos + kRecordHeaderBytes, klen);
      std::string value(p + pos + kRecordHeaderBytes + klen, vlen);
      switch (static_cast<RecordType>(type)) {
        case RecordType::kSet: table.set(key, std::move(value)); break;
        case RecordType::kCounter: table.set_counter(key, std::move(value)); break;
        case RecordType::kAppend: table.append(key, value); break;
        case RecordType::kJoin: users[key] = false; break;
        case RecordType::kLeave: {
          auto it = users.find(key);
          if (it != users.end() && !it->second) {
            it->second = true;
            ++left;
          }
          break;
        }
      }
      pos += kRecordHeaderBytes + klen + vlen;
    }
    return pos;
  }

  // Brings the replayed state up to date; the caller holds mu and a file lock.
  void sync() {
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw DistStoreError(name + ": fstat failed: " + errno_string(errno));
    uint64_t size = static_cast<uint64_t>(st.st_size);
    seen_size = size;
    char head[kFileHeaderBytes];
    size_t got = static_cast<size_t>(std::min<uint64_t>(size, kFileHeaderBytes));
    pread_all(fd.get(), head, got, 0, name);
    if (std::memcmp(head, kFileMagic, std::min(got, sizeof(kFileMagic))) != 0)
      throw DistStoreError(name + ": the file exists but is not a tdist FileStore file; delete it or use another path");
    if (size < kFileHeaderBytes) {  // empty (new or reset), or a header cut short by a writer that died
      clear();
      return;
    }
    uint64_t gen = get_u64(head + 8);
    if (gen != generation) {
      clear();
      generation = gen;
      offset = kFileHeaderBytes;
    }
    if (size <= offset) return;
    std::string buf(size - offset, '\0');
    pread_all(fd.get(), buf.data(), buf.size(), static_cast<off_t>(offset), name);
    offset += apply(buf.data(), buf.size(), offset);
  }

  // Sync when the file has grown or shrunk since we last looked. Caller holds mu.
  void refresh() {
    struct stat st {};
    if (::fstat(fd.get(), &st) == 0 && static_cast<uint64_t>(st.st_size) == seen_size) return;
    FileLock lock(fd.get(), F_RDLCK, name);
    sync();
  }

  // Appends encoded records; the caller holds mu and an exclusive lock and has synced.
  void write(const std::string& records) {
    if (generation == 0) {
      if (::ftruncate(fd.get(), 0) != 0) throw DistStoreError(name + ": cannot truncate: " + errno_string(errno));
      uint64_t gen = random_generation();
      std::string head = encode_file_header(gen);
      pwrite_all(fd.get(), head.data(), head.size(), 0, name);
      generation = gen;
      offset = seen_size = kFileHeaderBytes;
    }
    if (seen_size > offset) {
      TDIST_LOG(LogLevel::Warn, name << ": dropping " << (seen_size - offset)
                                     << " bytes of a record cut short by a writer that died");
      if (::ftruncate(fd.get(), static_cast<off_t>(offset)) != 0)
        throw DistStoreError(name + ": cannot truncate: " + errno_string(errno));
    }
    try {
      pwrite_all(fd.get(), records.data(), records.size(), static_cast<off_t>(offset), name);
    } catch (...) {
      int rc = ::ftruncate(fd.get(), static_cast<off_t>(offset));  // never leave half a record behind
      (void)rc;
      throw;
    }
    offset += apply(records.data(), records.size(), offset);
    seen_size = offset;
  }

  // Polls for pred() (evaluated under mu with fresh state) until the deadline:
  // short sleeps that grow to a few ms, never a spin.
  template <typename Pred>
  bool wait_until(Deadline deadline, Pred pred) {
    auto backoff = std::chrono::microseconds(200);
    for (;;) {
      {
        std::lock_guard<std::mutex> g(*mu);
        refresh();
        if (pred()) return true;
      }
      if (deadline.expired()) return false;
      std::this_thread::sleep_for(std::min<std::chrono::microseconds>(backoff, deadline.remaining()));
      backoff = std::min<std::chrono::microseconds>(backoff * 2, std::chrono::milliseconds(4));
    }
  }

  // For timeout errors: whether this file seems to hold the state of an
  // earlier run (users that died without leaving, users on other hosts that
  // cannot be checked, keys of users that had all left). Caller holds mu.
  std::string stale_hint() {
    std::string dead, unknown;
    for (const auto& [key, has_left] : users) {
      if (has_left || key == self_key) continue;
      UserId u;
      if (!UserId::decode(key, &u)) continue;
      Liveness l = liveness(u, self);
      if (l == Liveness::kDead) dead += (dead.empty() ? "" : ", ") + describe_user(u, self);
      if (l == Liveness::kUnknown) unknown += (unknown.empty() ? "" : ", ") + describe_user(u, self);
    }
    std::string hint;
    if (!dead.empty())
      hint += "; " + path + " holds state of an earlier run: its users " + dead +
              " died without closing their store (delete the file if no run is using it)";
    if (!unknown.empty())
      hint += "; " + path + " may hold state of an earlier run: it lists users that cannot be checked from here (" +
              unknown + "); if they are gone, delete the file";
    if (!preserved_note.empty()) hint += "; " + preserved_note;
    return hint;
  }
};

FileStore::FileStore(std::string path, int world_size, std::chrono::milliseconds timeout)
    : Store(timeout), path_(std::move(path)), state_(std::make_unique<State>()) {
  State& s = *state_;
  s.name = "FileStore(" + path_ + ")";
  s.path = path_;
  s.world_size = world_size;
  s.self = self_id();
  s.self_key = s.self.encode();
  if (path_.empty()) throw DistValueError("FileStore: the path is empty");
  Deadline deadline = deadline_after(timeout);
  for (;;) {
    Fd fd(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid()) throw DistStoreError(s.name + ": cannot open the file: " + errno_string(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw DistStoreError(s.name + ": fstat failed: " + errno_string(errno));
    auto mu = file_mutex(st.st_dev, st.st_ino);
    std::lock_guard<std::mutex> g(*mu);
    {
      FileLock lock(fd.get(), F_WRLCK, s.name);
      struct stat now {};
      bool same = ::stat(path_.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino;
      if (same) {
        s.fd = std::move(fd);
        s.mu = mu;
        s.sync();
        // A crashed run leaves users that never left. When all of them are
        // provably dead (this host, process gone), nobody can be using the
        // file: start it afresh instead of replaying their state.
        std::string dead;
        bool all_dead = true, any = false;
        for (const auto& [key, has_left] : s.users) {
          if (has_left) continue;
          any = true;
          UserId u;
          if (!UserId::decode(key, &u) || liveness(u, s.self) != Liveness::kDead) {
            all_dead = false;
            break;
          }
          dead += (dead.empty() ? "" : ", ") + std::to_string(u.pid);
        }
        if (any && all_dead) {
          TDIST_LOG(LogLevel::Warn, s.name << ": the file holds state of an earlier run whose users (pids " << dead
                                           << " on this host) all died without closing their store; resetting it");
          if (::ftruncate(s.fd.get(), 0) != 0)
            throw DistStoreError(s.name + ": cannot reset the stale file: " + errno_string(errno));
          s.clear();
          s.seen_size = 0;
        } else if (!any && !s.users.empty() && s.table.size() > 0) {
          s.preserved_note = "when this store opened " + path_ + " it already held " +
                             std::to_string(s.table.size()) + " keys of " + std::to_string(s.users.size()) +
                             " earlier users that had all closed their stores (an earlier run?)";
        }
        std::string rec;
        encode_record(rec, RecordType::kJoin, s.self_key, "");
        s.write(rec);
        return;
      }
    }
    // Removed or replaced between open and lock (its last user cleaned up): retry.
    fd.reset();  // still under mu
    if (deadline.expired())
      throw DistStoreError(s.name + ": the file kept being removed or replaced while opening it for " +
                           format_ms(timeout));
  }
}

FileStore::~FileStore() {
  State& s = *state_;
  if (!s.fd.valid()) return;
  try {
    std::lock_guard<std::mutex> g(*s.mu);
    {
      FileLock lock(s.fd.get(), F_WRLCK, s.name);
      s.sync();
      std::string rec;
      encode_record(rec, RecordType::kLeave, s.self_key, "");
      s.write(rec);
      int64_t active = 0;
      for (const auto& [key, has_left] : s.users) active += has_left ? 0 : 1;
      if (s.world_size > 0 && active == 0 && s.left >= s.world_size) {
        struct stat mine {}, now {};
        if (::fstat(s.fd.get(), &mine) == 0 && ::stat(path_.c_str(), &now) == 0 && mine.st_dev == now.st_dev &&
            mine.st_ino == now.st_ino)
          ::unlink(path_.c_str());
      }
    }
    s.fd.reset();  // under mu: closing drops this process's fcntl locks on the file
  } catch (const std::exception& e) {
    TDIST_LOG(LogLevel::Warn, s.name << ": closing the store failed: " << e.what());
  }
}

void FileStore::set(const std::string& key, const std::string& value) {
  State& s = *state_;
  std::string rec;
  encode_record(rec, RecordType::kSet, key, value);
  std::lock_guard<std::mutex> g(*s.mu);
  FileLock lock(s.fd.get(), F_WRLCK, s.name);
  s.sync();
  s.write(rec);
}

std::string FileStore::get(const std::string& key) {
  State& s = *state_;
  Millis t = timeout();
  std::string value;
  bool found = s.wait_until(deadline_after(t), [&] {
    const KvTable::Entry* e = s.table.find(key);
    if (e != nullptr) value = e->value;
    return e != nullptr;
  });
  if (found) return value;
  std::lock_guard<std::mutex> g(*s.mu);
  throw DistStoreError(s.name + ": get(key " + quote(key) + ") timed out after " + format_ms(t) +
                       ": the key was not set" + s.stale_hint());
}

int64_t FileStore::add(const std::string& key, int64_t amount) {
  State& s = *state_;
  std::lock_guard<std::mutex> g(*s.mu);
  FileLock lock(s.fd.get(), F_WRLCK, s.name);
  s.sync();
  // Compute on a copy of the entry: the record, once written, applies it.
  KvTable scratch;
  if (const KvTable::Entry* e = s.table.find(key)) {
    if (e->counter) scratch.set_counter(key, e->value);
    else scratch.set(key, e->value);
  }
  int64_t result = 0;
  auto status = scratch.add(key, amount, &result);
  if (status != KvTable::AddStatus::kOk)
    throw DistStoreError(s.name + ": add(key " + quote(key) + ", " + std::to_string(amount) +
                         "): " + KvTable::add_error(status, result, amount));
  std::string rec;
  encode_record(rec, RecordType::kCounter, key, counter_text(result));
  s.write(rec);
  return result;
}

void FileStore::append(const std::string& key, const std::string& value) {
  State& s = *state_;
  std::string rec;
  encode_record(rec, RecordType::kAppend, key, value);
  std::lock_guard<std::mutex> g(*s.mu);
  FileLock lock(s.fd.get(), F_WRLCK, s.name);
  s.sync();
  s.write(rec);
}

std::string FileStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  State& s = *state_;
  std::lock_guard<std::mutex> g(*s.mu);
  FileLock lock(s.fd.get(), F_WRLCK, s.name);
  s.sync();
  const KvTable::Entry* e = s.table.find(key);
  bool write = e != nullptr ? e->value == expected : expected.empty();
  if (!write) return e != nullptr ? e->value : expected;
  std::string rec;
  encode_record(rec, RecordType::kSet, key, desired);
  s.write(rec);
  return desired;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  State& s = *state_;
  std::lock_guard<std::mutex> g(*s.mu);
  s.refresh();
  for (const auto& k : keys)
    if (!s.table.contains(k)) return false;
  return true;
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  State& s = *state_;
  auto all = [&] {
    for (const auto& k : keys)
      if (!s.table.contains(k)) return false;
    return true;
  };
  if (s.wait_until(deadline_after(timeout), all)) return;
  std::lock_guard<std::mutex> g(*s.mu);
  auto missing = missing_keys(keys, [&](const std::string& k) { return s.table.contains(k); });
  throw DistStoreError(s.name + ": wait(keys " + quote_list(keys) + ") timed out after " + format_ms(timeout) +
                       "; missing keys: " + quote_list(missing) + s.stale_hint());
}

// One wait for every key, then the values of one consistent state.
std::vector<std::string> FileStore::multi_get(const std::vector<std::string>& keys) {
  State& s = *state_;
  Millis t = timeout();
  std::vector<std::string> values;
  auto all = [&] {
    for (const auto& k : keys)
      if (!s.table.contains(k)) return false;
    values.clear();
    for (const auto& k : keys) values.push_back(s.table.find(k)->value);
    return true;
  };
  if (s.wait_until(deadline_after(t), all)) return values;
  std::lock_guard<std::mutex> g(*s.mu);
  auto missing = missing_keys(keys, [&](const std::string& k) { return s.table.contains(k); });
  throw DistStoreError(s.name + ": multi_get(keys " + quote_list(keys) + ") timed out after " + format_ms(t) +
                       "; missing keys: " + quote_list(missing) + s.stale_hint());
}

// All records in one append under one lock: readers see all or none.
void FileStore::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  State& s = *state_;
  if (keys.size() != values.size())
    throw DistValueError(s.name + ": multi_set: " + std::to_string(keys.size()) + " keys but " +
                         std::to_string(values.size()) + " values");
  if (keys.empty()) return;
  std::string recs;
  for (size_t i = 0; i < keys.size(); ++i) encode_record(recs, RecordType::kSet, keys[i], values[i]);
  std::lock_guard<std::mutex> g(*s.mu);
  FileLock lock(s.fd.get(), F_WRLCK, s.name);
  s.sync();
  s.write(recs);
}

bool FileStore::delete_key(const std::string& key) {
  throw DistStoreError(state_->name + ": delete_key(key " + quote(key) +
                       ") is not supported by FileStore (as in torch.distributed); use TCPStore or HashStore");
}

int64_t FileStore::num_keys() {
  State& s = *state_;
  std::lock_guard<std::mutex> g(*s.mu);
  s.refresh();
  return static_cast<int64_t>(s.table.size());
}

std::vector<std::string> FileStore::list_keys() {
  State& s = *state_;
  std::lock_guard<std::mutex> g(*s.mu);
  s.refresh();
  return s.table.keys();
}

// world_size -1: the clone never removes the file, so the users that count
// toward world_size stay the ones the program made.
std::shared_ptr<Store> FileStore::clone() { return std::make_shared<FileStore>(path_, -1, timeout()); }

}  // namespace tdist
