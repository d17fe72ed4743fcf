#include "store/store_client.h"

#include "tdist/errors.h"
#include "tdist/store.h"

namespace tdist::store_detail {

void check_request_size(const std::string& name, Command c, std::span<const std::string* const> keys,
                        std::span<const std::string* const> values, size_t max_value_bytes,
                        const std::string& value_limit) {
  if (keys.size() > TCPStore::kMaxKeysPerRequest)
    throw DistValueError(name + ": " + describe_request(c, keys) + ": " + std::to_string(keys.size()) +
                         " keys in one request, above the limit of " + std::to_string(TCPStore::kMaxKeysPerRequest));
  for (const std::string* k : keys)
    if (k->size() > TCPStore::kMaxKeyBytes)
      throw DistValueError(name + ": " + describe_request(c, keys) + ": a key of " + std::to_string(k->size()) +
                           " bytes, above the limit of " + std::to_string(TCPStore::kMaxKeyBytes));
  for (const std::string* v : values)
    if (v->size() > max_value_bytes)
      throw DistValueError(name + ": " + describe_request(c, keys) + ": a value of " + std::to_string(v->size()) +
                           " bytes, above " + value_limit);
}

}  // namespace tdist::store_detail
