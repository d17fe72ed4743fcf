#include "util/error_context.h"

#include "tdist/errors.h"

namespace tdist {

std::exception_ptr with_context(std::exception_ptr error, const std::string& prefix) {
  try {
    std::rethrow_exception(error);
  } catch (const DistNetworkError& e) {
    return std::make_exception_ptr(DistNetworkError(prefix + e.what()));
  } catch (const DistStoreError& e) {
    return std::make_exception_ptr(DistStoreError(prefix + e.what()));
  } catch (const DistValueError& e) {
    return std::make_exception_ptr(DistValueError(prefix + e.what()));
  } catch (const DistBackendError& e) {
    return std::make_exception_ptr(DistBackendError(prefix + e.what()));
  } catch (const DistError& e) {
    return std::make_exception_ptr(DistError(prefix + e.what()));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(DistBackendError(prefix + e.what()));
  } catch (...) {
    return std::make_exception_ptr(DistBackendError(prefix + "unknown error"));
  }
}

std::string error_message(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace tdist
