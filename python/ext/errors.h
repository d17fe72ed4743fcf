// tdist's C++ errors as Python exceptions with torch's names.
#pragma once

#include <exception>

#include "common.h"

namespace tdist_py {

// The Python exception object for a stored C++ error (Work.exception()).
py::object exception_object(std::exception_ptr error);

}  // namespace tdist_py
