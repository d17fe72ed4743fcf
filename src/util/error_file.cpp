#include "util/error_file.h"

#include <cxxabi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <memory>
#include <typeinfo>

#include "util/settings.h"
#include "util/json_text.h"

namespace tdist {
namespace {

std::string demangled(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(name);
}

std::terminate_handler previous_handler = nullptr;

// An uncaught exception: its type and message go to the error file, then the
// usual ending (the previous handler, or abort with its core dump).
[[noreturn]] void on_terminate() {
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      write_error_file(demangled(typeid(x).name()) + ": " + x.what());
    } catch (...) {
      write_error_file("terminated by an uncaught exception that is not a std::exception");
    }
  }
  if (previous_handler != nullptr) previous_handler();
  std::abort();
}

// Installed when the library loads, only in processes a launcher gave an error file.
[[maybe_unused]] const bool installed = [] {
  if (!settings::get<"TORCHELASTIC_ERROR_FILE">()) return false;
  previous_handler = std::set_terminate(on_terminate);
  return true;
}();

}  // namespace

bool write_error_file(const std::string& message, const std::string& py_callstack) {
  try {
    auto path = settings::get<"TORCHELASTIC_ERROR_FILE">();
    if (!path) return false;
    std::string json = "{\"message\": {\"message\": ";
    append_json_string(json, message);
    json += ", \"extraInfo\": {\"py_callstack\": ";
    append_json_string(json, py_callstack);
    json += ", \"timestamp\": \"" + std::to_string(static_cast<long long>(std::time(nullptr))) + "\"}}}\n";
    const std::string tmp = *path + ".tmp" + std::to_string(::getpid());
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr) return false;
    bool ok = std::fwrite(json.data(), 1, json.size(), f) == json.size();
    ok = std::fclose(f) == 0 && ok;
    if (!ok || std::rename(tmp.c_str(), path->c_str()) != 0) {
      std::remove(tmp.c_str());
      return false;
    }
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace tdist
