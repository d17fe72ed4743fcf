// ReduceOp names and the (op x dtype) support matrix.
#include "tdist/reduce_op.h"

#include <array>
#include <string>

#include "tdist/errors.h"

namespace tdist {

namespace {
constexpr std::string_view kNames[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
constexpr unsigned kNumOps = sizeof(kNames) / sizeof(kNames[0]);
static_assert(kNumOps == ReduceOp::PREMUL_SUM + 1);
}  // namespace

std::string_view ReduceOp::name() const {
  return static_cast<unsigned>(kind_) < kNumOps ? kNames[kind_] : std::string_view("INVALID");
}

namespace {

bool supported(ReduceOp op, DType dtype) {
  if (!is_valid(dtype)) return false;
  const bool boolean = dtype == DType::Bool;
  const bool integer = is_integral(dtype) && !boolean;
  const bool floating = is_floating(dtype);
  const bool complex = is_complex(dtype);
  switch (op.kind()) {
    case ReduceOp::SUM:
    case ReduceOp::PRODUCT:
      return true;
    case ReduceOp::MIN:
    case ReduceOp::MAX:
      return !complex;
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR:
      return boolean || integer;
    case ReduceOp::AVG:
      return floating || complex || integer;
    case ReduceOp::PREMUL_SUM:
      return floating || complex;
  }
  return false;
}

}  // namespace

// Every collective that reduces asks this first: one table lookup.
bool reduce_op_supported(ReduceOp op, DType dtype) {
  static const auto table = [] {
    std::array<std::array<bool, kNumDTypes>, kNumOps> t{};
    for (unsigned k = 0; k < kNumOps; ++k)
      for (int d = 0; d < kNumDTypes; ++d)
        t[k][d] = supported(ReduceOp(static_cast<ReduceOp::Kind>(k)), static_cast<DType>(d));
    return t;
  }();
  const auto k = static_cast<unsigned>(op.kind()), d = static_cast<unsigned>(dtype);
  return k < kNumOps && d < static_cast<unsigned>(kNumDTypes) && table[k][d];
}

namespace {

// Why `op` means nothing for `dtype`, in the words of what it needs.
const char* why_not(ReduceOp op) {
  switch (op.kind()) {
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR: return "bitwise ops need an integer or bool tensor";
    case ReduceOp::MIN:
    case ReduceOp::MAX: return "complex numbers have no order";
    case ReduceOp::AVG: return "AVG needs a numeric tensor: sum the bools as integers and divide";
    case ReduceOp::PREMUL_SUM: return "PREMUL_SUM needs a floating-point or complex tensor";
    case ReduceOp::SUM:
    case ReduceOp::PRODUCT: break;
  }
  return "not supported";
}

}  // namespace

void check_reduce_op(ReduceOp op, DType dtype, std::string_view operation) {
  if (reduce_op_supported(op, dtype)) return;
  std::string msg(operation);
  if (!msg.empty()) msg += ": ";
  if (static_cast<unsigned>(op.kind()) >= kNumOps) {
    throw DistValueError(msg + "invalid ReduceOp code " + std::to_string(static_cast<unsigned>(op.kind())));
  }
  if (!is_valid(dtype)) {
    throw DistValueError(msg + "invalid dtype code " + std::to_string(static_cast<unsigned>(dtype)));
  }
  msg += "ReduceOp." + std::string(op.name()) + " is not defined for " + std::string(dtype_name(dtype)) + " (" +
         why_not(op) + "; " + std::string(dtype_name(dtype)) + " supports";
  const char* sep = " ";
  for (unsigned k = 0; k < kNumOps; ++k) {
    if (reduce_op_supported(ReduceOp(static_cast<ReduceOp::Kind>(k)), dtype)) {
      msg += sep;
      msg += kNames[k];
      sep = ", ";
    }
  }
  throw DistValueError(msg + ")");
}

}  // namespace tdist
