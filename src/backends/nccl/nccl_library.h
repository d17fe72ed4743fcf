// NCCL, loaded at run time (dlopen), so that one build of tdist runs on
// machines with and without NCCL and a GPU: nccl.h gives the types, and every
// function the backend calls is resolved once into the table below.
//
// Where it looks: TDIST_NCCL_LIBRARY (a path) when set, and only there (a
// library the user names and that does not load is an error, not a reason to
// take another); else "libnccl.so.2" through the loader's search path
// (LD_LIBRARY_PATH, ldconfig's cache: a PyTorch install's NCCL when its
// directory is on the path), else the CUDA toolkit's
// /usr/local/cuda/lib/libnccl.so.2. RTLD_LOCAL keeps its symbols out of the
// process's global namespace (torch may load another NCCL of its own).
#pragma once

#include <nccl.h>

#include <string>

namespace tdist::nccl {

struct Api {
  ncclResult_t (*GetVersion)(int*);
  ncclResult_t (*GetUniqueId)(ncclUniqueId*);
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char* (*GetErrorString)(ncclResult_t);
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*GroupStart)();
  ncclResult_t (*GroupEnd)();
  ncclResult_t (*RedOpCreatePreMulSum)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t);
  ncclResult_t (*RedOpDestroy)(ncclRedOp_t, ncclComm_t);
  // Optional: null in libraries older than the call (2.18 for CommSplit,
  // 2.13 for GetLastError); the backend then does without.
  ncclResult_t (*CommSplit)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*);
  const char* (*GetLastError)(ncclComm_t);

  std::string path;     // the file it was loaded from
  std::string version;  // "2.28.9"
};

// The library, loaded on the first call (once per process); null when it
// does not load, with `why` (if given) saying which files were tried and what
// went wrong, or which symbol is missing from which file.
const Api* try_api(std::string* why = nullptr);
// The same, throwing DistBackendError that starts with `who` ("rank 0 in
// group default_pg") and says why.
const Api& api(const std::string& who);

// NCCL's version code (ncclGetVersion) as "major.minor.patch".
std::string version_string(int code);

}  // namespace tdist::nccl
