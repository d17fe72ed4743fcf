// Helpers of the store tests: the text of the DistStoreError a call throws.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tdist/errors.h"

namespace tdist::testing {

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Runs fn, expecting DistStoreError; returns its message.
template <typename Fn>
std::string store_error(Fn fn) {
  try {
    fn();
  } catch (const DistStoreError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected DistStoreError";
  return "";
}

}  // namespace tdist::testing
