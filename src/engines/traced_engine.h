// Another engine's calls as steps of an operation, each a step line of the
// timeline (TDIST_TRACE, docs/trace_format.md): what the hierarchical engine
// runs inside a host and among hosts, so that a timeline shows where an
// operation's time went. Only made when the timeline is on: otherwise the
// hierarchical engine calls its step engines directly, at no cost.
#pragma once

#include <memory>
#include <string>

#include "engines/engine.h"

namespace tdist {

// `inner` must outlive the result; `where`: "inside host" or "among hosts".
std::unique_ptr<Engine> make_traced_engine(Engine& inner, std::string group, const char* where);

}  // namespace tdist
