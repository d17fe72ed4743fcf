// What each worker executes, by torchrun's rule: PROGRAM runs with Python
// ("python -u train.py ARGS", "-m module", "--run-path") unless --no-python,
// which executes PROGRAM itself (a C++ binary, a shell script).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace tdistrun {

struct WorkerCommand {
  std::string path;               // the file to execute (the interpreter, or PROGRAM with --no-python)
  std::vector<std::string> head;  // the workers' argv before ARGS (Options::command)
  std::vector<std::string> notes; // for the user, e.g. which python3 was found on PATH
};

// The Python that runs a Python PROGRAM: PYTHON_EXEC where set (as torchrun),
// else the one this build was configured for (TDIST_RUN_PYTHON), else a
// python3 next to tdistrun (a virtual environment's bin/), else python3 from
// PATH (with a note saying so). Returns the path to execute, or "" and the
// reason in *error.
std::string python_interpreter(const EnvLookup& env, std::string* error, std::vector<std::string>* notes);

// The command for opt.program_kind and opt.program. An executable compiled
// program or shell script runs as with --no-python (Python could not run it).
// Checks what can be checked before any worker starts: the interpreter exists;
// a script (or --run-path file) exists and is not a compiled program or
// another language's script, for which the error says to pass --no-python. nullopt: *error says why
// (tdistrun exits 127, as for a PROGRAM that cannot be executed).
std::optional<WorkerCommand> worker_command(const Options& opt, const EnvLookup& env, std::string* error);

// The interpreter tdistrun was configured with ("" when none was found).
const char* configured_python();

}  // namespace tdistrun
