#include "backends/call_hint.h"

namespace tdist {

thread_local bool BlockingCallHint::active_ = false;

}  // namespace tdist
