// The job secret and the primitives that prove knowledge of it.
//
// A job's processes share one random token (TDIST_JOB_TOKEN, or the file that
// TDIST_JOB_TOKEN_FILE names). It never crosses the wire: a store client and
// two ranks that connect prove they know it with HMAC-SHA256 (OpenSSL's
// libcrypto) over fresh nonces from both sides, so nothing a stranger reads
// from the network or the store lets it impersonate a rank. Without a token a
// job is open, as torch's is; that is logged once per job (warn_open_once).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace tdist::auth {

using Digest = std::array<uint8_t, 32>;
using Nonce = std::array<uint8_t, 16>;

// The token of this job: TDIST_JOB_TOKEN, else the contents of the file that
// TDIST_JOB_TOKEN_FILE names (trailing newlines dropped; the file must be
// readable by its owner only, or DistValueError says why), else nullopt.
// Read on every call: a test or a launcher may change the environment.
std::optional<std::string> job_token();

// Logs that `what` (e.g. "TCPStore server on 127.0.0.1:29500") has no job
// token, so anyone who can connect may join, and what to do: once per job,
// not once per process, so that 64 ranks started by hand say it once. Only
// a process that speaks for the job logs it (the store's host; rank 0 for
// the ranks' connections), and it only once.
void warn_open_once(const std::string& what, bool speaks_for_job = true);

// A fresh token for a launcher: 32 random bytes as 64 hex digits.
std::string generate_token();

// Cryptographically random bytes (OpenSSL RAND_bytes); DistError if it fails.
void random_bytes(void* out, size_t n);
Nonce random_nonce();

// HMAC-SHA256 keyed with `token` over the parts, each prefixed with its length
// (so ("ab","c") and ("a","bc") differ). Callers put a label naming the
// purpose first (e.g. "tdist-store-client"), so an answer for one purpose is
// never valid for another.
Digest hmac(std::string_view token, std::initializer_list<std::string_view> parts);

// Constant-time comparison.
bool equal(const Digest& a, const Digest& b);

inline std::string_view view(const Nonce& n) { return {reinterpret_cast<const char*>(n.data()), n.size()}; }

}  // namespace tdist::auth
