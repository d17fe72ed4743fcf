// Backend specs: "tdist", "gloo" (alias), "cpu:tdist,cuda:nccl".
#pragma once

#include <string>

namespace tdist {

// Throws DistValueError naming the unknown backend or device in `spec`.
void validate_backend_spec(const std::string& spec);

}  // namespace tdist
