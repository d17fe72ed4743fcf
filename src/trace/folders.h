// The folders traces and dumps are written to: made (owner-only, as
// `mkdir -p -m 700` would) at init_process_group, or refused there with an
// error that names the setting, the path and why, so that a mistyped or
// missing folder is found before the job runs rather than when its files are
// needed. And the default folder of a dump that no setting places (SIGUSR1).
#pragma once

#include <string>

namespace tdist::trace {

// Makes `dir` and any missing parents with mode 0700, or checks that it is a
// folder this process can write to. DistValueError names `setting`, the
// path, why, and what to do.
void ensure_folder(const std::string& dir, const char* setting);

// Makes the folders TDIST_TRACE, TDIST_FLIGHT_RECORDER_DIR and
// TORCH_FR_DUMP_TEMP_FILE (its prefix's folder) name, where they are set.
void prepare_folders_from_env();

// Where a dump goes when no setting says: $TMPDIR (else /tmp)
// /tdist-flight-recorder-<uid>, made 0700 and refused unless it is this
// user's own folder that nobody else can write to (it sits in a shared
// folder). DistError says why.
std::string default_dump_folder();

}  // namespace tdist::trace
