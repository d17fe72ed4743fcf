#include "program.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include "worker.h"

#ifndef TDISTRUN_CONFIGURED_PYTHON
#define TDISTRUN_CONFIGURED_PYTHON ""
#endif

namespace tdistrun {
namespace {

// torchrun's --run-path runs the script in its own interpreter with
// runpy.run_path; each worker does the same in a fresh one. With "-c" the
// interpreter's argv is ["-c", PROGRAM, ARGS...].
constexpr const char* kRunPathCode =
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')";

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// The folder tdistrun's own executable is in ("" when unknown).
std::string own_folder() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// Why `path` cannot be a Python script, or "" when it may be one: a compiled
// program, or a script whose "#!" line names another interpreter.
std::string not_python_because(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string first(256, '\0');
  in.read(first.data(), static_cast<std::streamsize>(first.size()));
  first.resize(static_cast<size_t>(in.gcount()));
  if (first.starts_with("\x7f" "ELF")) return "it is a compiled program";
  if (!first.starts_with("#!")) return "";
  // The interpreter the "#!" line names, through env: a shell's script is no
  // Python (but "#!/usr/bin/env -S uv run" and the like may well be).
  std::istringstream line(first.substr(2, first.find('\n') - 2));
  std::string word, interpreter;
  while (line >> word) {
    interpreter = word.substr(word.rfind('/') + 1);
    if (interpreter != "env" && !word.starts_with("-")) break;
  }
  for (const char* shell : {"sh", "bash", "dash", "zsh", "ksh", "csh", "tcsh", "fish"}) {
    if (interpreter == shell) return "it is a " + interpreter + " script";
  }
  return "";
}

// Checks that a script PROGRAM (or --run-path file) is a file Python can run.
bool check_script(const Options& opt, std::string* error) {
  const std::string& script = opt.program;
  const char* how = opt.program_kind == ProgramKind::kPythonRunPath ? " with --run-path" : "";
  struct stat st {};
  int err = 0;
  if (stat(script.c_str(), &st) != 0) {
    err = errno;
  } else if (S_ISDIR(st.st_mode)) {
    err = EISDIR;
  } else if (!S_ISREG(st.st_mode)) {
    // A pipe (bash's <(...)) would be read by the check below and then by one worker only.
    *error = "cannot run '" + script + "' with Python" + how + ": not a regular file (each worker reads it)";
    return false;
  } else if (access(script.c_str(), R_OK) != 0) {
    err = errno;
  }
  if (err != 0) {
    *error = "cannot run '" + script + "' with Python" + how + ": " + std::strerror(err);
    std::string ignored;
    const std::string found = script.find('/') == std::string::npos ? resolve_program(script, &ignored) : "";
    if (!found.empty()) *error += "; to execute the program " + found + " instead, pass --no-python";
    return false;
  }
  if (std::string why = not_python_because(script); !why.empty()) {
    *error = "'" + script + "' is not a Python script (" + why + "): pass --no-python to execute it directly "
             "(like torchrun, tdistrun runs PROGRAM with Python unless --no-python)";
    return false;
  }
  return true;
}

// A file Python cannot run but the system can execute: a compiled program, or
// a shell script with its "#!" line, marked executable. torchrun would hand it
// to Python and fail; tdist's C++ programs have always been launched this way,
// so tdistrun executes it as if --no-python were given.
bool executes_itself(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || access(path.c_str(), X_OK) != 0) return false;
  return !not_python_because(path).empty();
}

}  // namespace

const char* configured_python() { return TDISTRUN_CONFIGURED_PYTHON; }

std::string python_interpreter(const EnvLookup& env, std::string* error, std::vector<std::string>* notes) {
  if (auto exec = env("PYTHON_EXEC"); exec && !exec->empty()) {
    std::string why;
    std::string path = resolve_program(*exec, &why);
    if (path.empty()) *error = "cannot execute PYTHON_EXEC=" + *exec + ": " + why;
    return path;
  }
  const std::string configured = configured_python();
  if (!configured.empty() && is_executable_file(configured)) return configured;
  if (const std::string folder = own_folder(); !folder.empty()) {
    for (const char* name : {"python3", "python"}) {
      if (is_executable_file(folder + "/" + name)) return folder + "/" + name;
    }
  }
  std::string why;
  std::string path = resolve_program("python3", &why);
  if (path.empty()) {
    *error = "no Python to run PROGRAM with: " +
             (configured.empty() ? std::string("none was configured") : configured + " is gone") +
             " and python3 is not on PATH; set PYTHON_EXEC, or pass --no-python to execute PROGRAM directly";
    return "";
  }
  notes->push_back("running PROGRAM with " + path + " (python3 from PATH: " +
                   (configured.empty() ? std::string("no Python was configured for this build")
                                       : "the configured " + configured + " is gone") +
                   "); set PYTHON_EXEC to choose another");
  return path;
}

std::optional<WorkerCommand> worker_command(const Options& opt, const EnvLookup& env, std::string* error) {
  WorkerCommand cmd;
  if (opt.program_kind == ProgramKind::kExecutable ||
      (opt.program_kind == ProgramKind::kPythonScript && executes_itself(opt.program))) {
    std::string why;
    cmd.path = resolve_program(opt.program, &why);
    if (cmd.path.empty()) {
      *error = "cannot execute '" + opt.program + "': " + why;
      return std::nullopt;
    }
    cmd.head = {opt.program};
    return cmd;
  }
  if (opt.program_kind != ProgramKind::kPythonModule && !check_script(opt, error)) return std::nullopt;
  cmd.path = python_interpreter(env, error, &cmd.notes);
  if (cmd.path.empty()) return std::nullopt;
  // -u: unbuffered output, as torchrun starts its workers, so lines reach the console as they are printed.
  cmd.head = {cmd.path, "-u"};
  switch (opt.program_kind) {
    case ProgramKind::kPythonModule:
      cmd.head.insert(cmd.head.end(), {"-m", opt.program});
      break;
    case ProgramKind::kPythonRunPath:
      cmd.head.insert(cmd.head.end(), {"-c", kRunPathCode, opt.program});
      break;
    default:
      cmd.head.push_back(opt.program);
      break;
  }
  return cmd;
}

}  // namespace tdistrun
