// Store's default multi-key operations, for stores without a native form.
#include "tdist/errors.h"
#include "tdist/store.h"

namespace tdist {

std::vector<std::string> Store::multi_get(const std::vector<std::string>& keys) {
  // Wait for all keys at once (one timeout for the whole call, as a native
  // multi_get would), then read them.
  if (!keys.empty()) wait(keys, timeout());
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const auto& k : keys) values.push_back(get(k));
  return values;
}

void Store::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  if (keys.size() != values.size())
    throw DistValueError("multi_set: " + std::to_string(keys.size()) + " keys but " + std::to_string(values.size()) +
                         " values");
  for (size_t i = 0; i < keys.size(); ++i) set(keys[i], values[i]);
}

}  // namespace tdist
