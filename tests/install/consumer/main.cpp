// Smoke test of an installed tdist: headers found, library linked and loaded,
// exceptions thrown inside libtdist caught here. Exit status 0 on success.
#include <tdist/tdist.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

int main() {
  int failures = 0;
  auto check = [&failures](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "tdist consumer: FAILED: %s\n", what);
      ++failures;
    }
  };

  try {
    tdist::HashStore store;
    store.set("key", "value");
    check(store.get("key") == "value", "HashStore::get returns what set wrote");
    check(store.add("counter", 2) == 2 && store.add("counter", 3) == 5, "HashStore::add counts");
    check(store.check({"key", "counter"}), "HashStore::check sees both keys");

    bool threw = false;
    try {
      store.wait({"missing"}, std::chrono::milliseconds(10));
    } catch (const tdist::DistStoreError&) {
      threw = true;  // thrown inside libtdist, caught by its type here
    }
    check(threw, "HashStore::wait on a missing key throws DistStoreError");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tdist consumer: unexpected exception: %s\n", e.what());
    ++failures;
  }

  check(tdist::dtype_name(tdist::DType::Float32) == "float32", "dtype_name(Float32) is \"float32\"");
  check(tdist::dtype_size(tdist::DType::Float64) == 8, "dtype_size(Float64) is 8");
  check(tdist::dtype_of_v<float> == tdist::DType::Float32, "dtype_of_v<float> is Float32");

#ifdef TDIST_EXPECTED_VERSION
  // The package's version (CMake config or pkg-config) and the header's agree.
  check(std::string_view(TDIST_VERSION_STRING) == TDIST_EXPECTED_VERSION,
        "TDIST_VERSION_STRING matches the package version");
#endif

  if (failures != 0) return 1;
  std::printf("tdist consumer OK (tdist %s)\n", TDIST_VERSION_STRING);
  return 0;
}
