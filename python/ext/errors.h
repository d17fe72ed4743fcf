// tdist's C++ errors as Python exceptions with torch's names.
#pragma once

#include <exception>

#include "common.h"

namespace tdist_py {

// The Python exception object for a stored C++ error (Work.exception()).
py::object exception_object(std::exception_ptr error);

// For Python code called from C++ (a Store subclassed in Python): a Python
// tdist error (DistStoreError, QueueEmptyError, ...) is thrown again as its
// C++ type with its message, so C++ callers catch it as they would ours;
// any other Python error is left to propagate as it is. Needs the GIL.
void throw_as_cpp_if_dist_error(py::error_already_set& e);

}  // namespace tdist_py
