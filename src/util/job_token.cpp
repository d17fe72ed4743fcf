#include "util/job_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <atomic>
#include <mutex>
#include <fstream>
#include <sstream>

#include "tdist/errors.h"
#include "util/settings.h"
#include "util/logging.h"
#include "util/socket.h"

namespace tdist::auth {

std::optional<std::string> job_token() {
  if (auto v = settings::get<"TDIST_JOB_TOKEN">()) return v;
  auto path = settings::get<"TDIST_JOB_TOKEN_FILE">();
  if (!path) return std::nullopt;
  struct stat st {};
  if (::stat(path->c_str(), &st) != 0)
    throw DistValueError("TDIST_JOB_TOKEN_FILE=" + *path + ": cannot read the file (" + errno_string(errno) + ")");
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    throw DistValueError("TDIST_JOB_TOKEN_FILE=" + *path +
                         ": the file must be readable by its owner only (chmod 600), so that other users cannot "
                         "read the job's secret");
  std::ifstream in(*path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (!in.good() && !in.eof())
    throw DistValueError("TDIST_JOB_TOKEN_FILE=" + *path + ": cannot read the file");
  if (token.empty()) throw DistValueError("TDIST_JOB_TOKEN_FILE=" + *path + ": the file is empty");
  return token;
}

void warn_open_once(const std::string& what, bool speaks_for_job) {
  static std::atomic<bool> warned{false};
  if (!speaks_for_job || warned.exchange(true)) return;
  TDIST_LOG(LogLevel::Warn, what << ": no job token is set, so any process that can connect may join the job; "
                                   "start every rank with the same secret, e.g. export TDIST_JOB_TOKEN=$(openssl rand "
                                   "-hex 32), or TDIST_JOB_TOKEN_FILE naming a file of mode 600 (tdistrun and spawn "
                                   "set one for you; said once, for the whole job)");
}

namespace {

// OpenSSL frees its global state in an exit handler unless told not to. A
// program that calls exit() while one of tdist's threads is inside OpenSSL (an
// HMAC for a connection, or a thread's random state being freed as the thread
// ends) then crashes in OPENSSL_cleanup, with a double free or SIGSEGV: seen at
// the end of a cluster job whose link went down, and in 188 of 200 exits of a
// process with three threads using OpenSSL. Exit frees the memory anyway.
// Where something else initialized OpenSSL first, its choice stands.
void init_openssl() {
  static std::once_flag once;
  std::call_once(once, [] { OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr); });
}

}  // namespace

void random_bytes(void* out, size_t n) {
  init_openssl();
  if (RAND_bytes(static_cast<unsigned char*>(out), static_cast<int>(n)) != 1)
    throw DistError("OpenSSL RAND_bytes failed to produce " + std::to_string(n) + " random bytes");
}

Nonce random_nonce() {
  Nonce n;
  random_bytes(n.data(), n.size());
  return n;
}

std::string generate_token() {
  uint8_t raw[32];
  random_bytes(raw, sizeof(raw));
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : raw) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

Digest hmac(std::string_view token, std::initializer_list<std::string_view> parts) {
  init_openssl();
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* ctx = mac ? EVP_MAC_CTX_new(mac) : nullptr;
  char digest_name[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest_name, 0), OSSL_PARAM_construct_end()};
  bool ok = ctx && EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(token.data()), token.size(), params) == 1;
  for (std::string_view part : parts) {
    if (!ok) break;
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((uint64_t(part.size()) >> (8 * i)) & 0xff);
    ok = EVP_MAC_update(ctx, len, sizeof(len)) == 1 &&
         EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(part.data()), part.size()) == 1;
  }
  Digest out{};
  size_t written = 0;
  ok = ok && EVP_MAC_final(ctx, out.data(), &written, out.size()) == 1 && written == out.size();
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  if (!ok) throw DistError("OpenSSL HMAC-SHA256 failed");
  return out;
}

bool equal(const Digest& a, const Digest& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

}  // namespace tdist::auth
