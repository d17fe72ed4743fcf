// The reduction kernels: every (ReduceOp x DType) against a scalar reference computed here,
// for counts {0, 1, 7, 1000, 4099}, with out distinct from and aliasing the inputs; AVG and
// PREMUL_SUM finalize; NaN, overflow and bool edge cases; unsupported combinations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "reduce/reduction_kernels.h"
#include "tdist/errors.h"

namespace tdist {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using Kind = ReduceOp::Kind;
using Rng = std::mt19937_64;

constexpr size_t kCounts[] = {0, 1, 7, 1000, 4099};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- per-dtype reference semantics ----------------------------------------------------------

struct BoolTraits {
  using T = uint8_t;
  static T gen(Rng& r) {
    static constexpr T kValues[] = {0, 1, 0, 1, 0, 1, 2, 255};  // any non-zero byte is true
    return kValues[r() % 8];
  }
  static T ref(Kind k, T a, T b) {
    const bool x = a != 0, y = b != 0;
    switch (k) {
      case ReduceOp::SUM: case ReduceOp::MAX: case ReduceOp::BOR: return x || y;
      case ReduceOp::PRODUCT: case ReduceOp::MIN: case ReduceOp::BAND: return x && y;
      case ReduceOp::BXOR: return x != y;
      default: ADD_FAILURE() << "no bool reference"; return 0;
    }
  }
  static T finalize(ReduceOp, T x, int) { return x; }
  static bool same(T x, T y) { return x == y; }
  static std::string show(T x) { return std::to_string(x); }
};

template <typename I>
struct IntTraits {
  using T = I;
  static T gen(Rng& r) {
    // Half small values, half arbitrary bit patterns: the reference wraps like the kernels.
    if (r() % 2) {
      const int64_t v = static_cast<int64_t>(r() % 21) - (std::is_signed_v<I> ? 10 : 0);
      return static_cast<T>(v);
    }
    return static_cast<T>(r());
  }
  static T ref(Kind k, T a, T b) {
    const auto ua = static_cast<uint64_t>(static_cast<int64_t>(a));
    const auto ub = static_cast<uint64_t>(static_cast<int64_t>(b));
    switch (k) {
      case ReduceOp::SUM: case ReduceOp::AVG: return static_cast<T>(ua + ub);  // modulo 2^bits
      case ReduceOp::PRODUCT: return static_cast<T>(ua * ub);
      case ReduceOp::MIN: return std::min(a, b);
      case ReduceOp::MAX: return std::max(a, b);
      case ReduceOp::BAND: return static_cast<T>(a & b);
      case ReduceOp::BOR: return static_cast<T>(a | b);
      case ReduceOp::BXOR: return static_cast<T>(a ^ b);
      default: ADD_FAILURE() << "no integer reference"; return 0;
    }
  }
  static T finalize(ReduceOp op, T x, int c) {
    return op == ReduceOp::AVG ? static_cast<T>(static_cast<int64_t>(x) / c) : x;  // truncating
  }
  static bool same(T x, T y) { return x == y; }
  static std::string show(T x) { return std::to_string(static_cast<int64_t>(x)); }
};

template <typename F>
bool same_float(F x, F y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return std::memcmp(&x, &y, sizeof(F)) == 0;  // distinguishes -0.0 from +0.0
}

template <typename F>
F gen_float(Rng& r) {
  switch (r() % 50) {  // 2% each: the special values
    case 0: return std::numeric_limits<F>::quiet_NaN();
    case 1: return std::numeric_limits<F>::infinity();
    case 2: return -std::numeric_limits<F>::infinity();
    case 3: return F(-0.0);
    default: return static_cast<F>(static_cast<int>(r() % 129) - 64) / F(8);  // exact in every float type
  }
}

template <typename F>
F ref_float(Kind k, F a, F b) {
  switch (k) {
    case ReduceOp::SUM: case ReduceOp::AVG: case ReduceOp::PREMUL_SUM: return a + b;
    case ReduceOp::PRODUCT: return a * b;
    // torch.minimum/maximum: NaN if either is NaN; for equal values the second one.
    case ReduceOp::MIN: return std::isnan(a) ? a : std::isnan(b) ? b : (a < b ? a : b);
    case ReduceOp::MAX: return std::isnan(a) ? a : std::isnan(b) ? b : (a > b ? a : b);
    default: ADD_FAILURE() << "no float reference"; return 0;
  }
}

template <typename F>
struct FloatTraits {
  using T = F;
  static T gen(Rng& r) { return gen_float<F>(r); }
  static T ref(Kind k, T a, T b) { return ref_float<F>(k, a, b); }
  static T finalize(ReduceOp op, T x, int c) {
    if (op == ReduceOp::AVG) return x / static_cast<F>(c);
    if (op == ReduceOp::PREMUL_SUM) return x * static_cast<F>(op.factor());
    return x;
  }
  static bool same(T x, T y) { return same_float(x, y); }
  static std::string show(T x) {
    std::ostringstream s;
    s << x;
    return s.str();
  }
};

// float16 / bfloat16: the operation in float, rounded back (what the kernels promise).
template <typename H>
struct HalfTraits {
  using T = H;
  static float f(H h) { return to_float(h); }
  static H h(float x) {
    if constexpr (std::is_same_v<H, Half>) {
      return to_half(x);
    } else {
      return to_bfloat16(x);
    }
  }
  static T gen(Rng& r) { return h(gen_float<float>(r)); }
  static T ref(Kind k, T a, T b) { return h(ref_float<float>(k, f(a), f(b))); }
  static T finalize(ReduceOp op, T x, int c) {
    if (op == ReduceOp::AVG) return h(f(x) / static_cast<float>(c));
    if (op == ReduceOp::PREMUL_SUM) return h(f(x) * static_cast<float>(op.factor()));
    return x;
  }
  static bool same(T x, T y) { return same_float(f(x), f(y)) && (std::isnan(f(x)) || x.bits == y.bits); }
  static std::string show(T x) {
    std::ostringstream s;
    s << f(x) << " (0x" << std::hex << x.bits << ")";
    return s.str();
  }
};

template <typename C>
struct ComplexTraits {
  using T = C;
  using R = typename C::value_type;
  static T gen(Rng& r) {
    auto part = [&] { return r() % 40 == 0 ? gen_float<R>(r) : static_cast<R>(static_cast<int>(r() % 33) - 16) / R(4); };
    const R re = part();
    return T(re, part());
  }
  static T ref(Kind k, T a, T b) {
    switch (k) {
      case ReduceOp::SUM: case ReduceOp::AVG: case ReduceOp::PREMUL_SUM: return a + b;
      case ReduceOp::PRODUCT: return a * b;
      default: ADD_FAILURE() << "no complex reference"; return 0;
    }
  }
  static T finalize(ReduceOp op, T x, int c) {
    if (op == ReduceOp::AVG) return x / static_cast<R>(c);
    if (op == ReduceOp::PREMUL_SUM) return x * static_cast<R>(op.factor());
    return x;
  }
  static bool same(T x, T y) { return same_float(x.real(), y.real()) && same_float(x.imag(), y.imag()); }
  static std::string show(T x) {
    std::ostringstream s;
    s << x;
    return s.str();
  }
};

// ---- the generic check ----------------------------------------------------------------------

constexpr size_t kGuard = 16;  // elements after the end that must stay untouched

template <typename Tr>
struct Buffers {
  using T = typename Tr::T;
  std::vector<T> v;
  size_t n;
  Buffers(size_t count, Rng& r) : v(count + kGuard), n(count) {
    for (auto& x : v) x = Tr::gen(r);
  }
  T* data() { return v.data(); }
};

template <typename Tr>
void expect_matches(const char* what, const std::vector<typename Tr::T>& got,
                    const std::vector<typename Tr::T>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!Tr::same(got[i], want[i])) {
      ADD_FAILURE() << what << ": element " << i << " of " << got.size() << " is " << Tr::show(got[i])
                    << ", expected " << Tr::show(want[i]);
      return;  // one report per buffer is enough
    }
  }
}

template <typename Tr>
void check_supported(ReduceOp op, DType dtype, size_t count) {
  using T = typename Tr::T;
  SCOPED_TRACE("count " + std::to_string(count));
  Rng rng(count * 131 + static_cast<unsigned>(dtype) * 17 + op.kind());
  Buffers<Tr> a(count, rng), b(count, rng), c(count, rng);
  // Expected: the reference on [0, count), the original values on the guard.
  std::vector<T> want_ab = b.v;
  for (size_t i = 0; i < count; ++i) want_ab[i] = Tr::ref(op.kind(), a.v[i], b.v[i]);

  {  // out distinct from the inputs
    std::vector<T> out = c.v;
    std::vector<T> want = c.v;
    std::copy(want_ab.begin(), want_ab.begin() + count, want.begin());
    reduction::combine(op, dtype, out.data(), a.data(), b.data(), count);
    expect_matches<Tr>("combine(out, a, b)", out, want);
  }
  {  // out == a (accumulate, and combine with the first operand aliased)
    std::vector<T> acc = a.v;
    std::vector<T> want = a.v;
    std::copy(want_ab.begin(), want_ab.begin() + count, want.begin());
    reduction::accumulate(op, dtype, acc.data(), b.data(), count);
    expect_matches<Tr>("accumulate(a, b)", acc, want);
    acc = a.v;
    reduction::combine(op, dtype, acc.data(), acc.data(), b.data(), count);
    expect_matches<Tr>("combine(a, a, b)", acc, want);
  }
  {  // out == b keeps the operand order a (op) b
    std::vector<T> acc = b.v;
    std::vector<T> want = b.v;
    std::copy(want_ab.begin(), want_ab.begin() + count, want.begin());
    reduction::combine(op, dtype, acc.data(), a.data(), acc.data(), count);
    expect_matches<Tr>("combine(b, a, b)", acc, want);
  }
  {  // three contributors, then finalize
    std::vector<T> acc = a.v;
    std::vector<T> want = a.v;
    for (size_t i = 0; i < count; ++i) {
      want[i] = Tr::finalize(op, Tr::ref(op.kind(), Tr::ref(op.kind(), a.v[i], b.v[i]), c.v[i]), 3);
    }
    reduction::accumulate(op, dtype, acc.data(), b.data(), count);
    reduction::accumulate(op, dtype, acc.data(), c.data(), count);
    reduction::finalize(op, dtype, acc.data(), count, 3);
    expect_matches<Tr>("3 contributors + finalize", acc, want);
  }
}

template <typename F>
std::string value_error(F&& f) {
  try {
    f();
  } catch (const DistValueError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no DistValueError";
  return "";
}

void check_unsupported(ReduceOp op, DType dtype) {
  alignas(16) unsigned char x[64] = {}, y[64] = {};
  const std::string op_name(op.name()), dtype_str(dtype_name(dtype));
  for (size_t count : {size_t{0}, size_t{2}}) {
    EXPECT_THAT(value_error([&] { reduction::accumulate(op, dtype, x, y, count); }),
                HasSubstr("ReduceOp." + op_name + " is not defined for " + dtype_str + " ("));
    EXPECT_THAT(value_error([&] { reduction::combine(op, dtype, x, x, y, count); }),
                HasSubstr("ReduceOp." + op_name + " is not defined for " + dtype_str + " ("));
    EXPECT_THAT(value_error([&] { reduction::finalize(op, dtype, x, count, 2); }),
                HasSubstr("ReduceOp." + op_name + " is not defined for " + dtype_str + " ("));
  }
}

template <typename Tr>
void check_all_counts(ReduceOp op, DType dtype) {
  for (size_t count : kCounts) check_supported<Tr>(op, dtype, count);
}

void check_combination(ReduceOp op, DType dtype) {
  if (!reduce_op_supported(op, dtype)) {
    check_unsupported(op, dtype);
    return;
  }
  switch (dtype) {
    case DType::Bool: return check_all_counts<BoolTraits>(op, dtype);
    case DType::UInt8: return check_all_counts<IntTraits<uint8_t>>(op, dtype);
    case DType::Int8: return check_all_counts<IntTraits<int8_t>>(op, dtype);
    case DType::Int16: return check_all_counts<IntTraits<int16_t>>(op, dtype);
    case DType::Int32: return check_all_counts<IntTraits<int32_t>>(op, dtype);
    case DType::Int64: return check_all_counts<IntTraits<int64_t>>(op, dtype);
    case DType::Float16: return check_all_counts<HalfTraits<Half>>(op, dtype);
    case DType::BFloat16: return check_all_counts<HalfTraits<BFloat16>>(op, dtype);
    case DType::Float32: return check_all_counts<FloatTraits<float>>(op, dtype);
    case DType::Float64: return check_all_counts<FloatTraits<double>>(op, dtype);
    case DType::Complex64: return check_all_counts<ComplexTraits<std::complex<float>>>(op, dtype);
    case DType::Complex128: return check_all_counts<ComplexTraits<std::complex<double>>>(op, dtype);
  }
  FAIL() << "unknown dtype";
}

// ---- every (op x dtype), one test case each --------------------------------------------------

struct Combo {
  ReduceOp op;
  DType dtype;
};

std::vector<Combo> all_combos() {
  std::vector<Combo> v;
  for (int k = 0; k <= ReduceOp::PREMUL_SUM; ++k) {
    for (int d = 0; d < kNumDTypes; ++d) {
      const auto kind = static_cast<Kind>(k);
      // PREMUL_SUM with a factor that is not 1, so that finalize visibly does something.
      v.push_back({kind == ReduceOp::PREMUL_SUM ? ReduceOp::premul_sum(-0.5) : ReduceOp(kind), static_cast<DType>(d)});
    }
  }
  return v;
}

class ReduceCombo : public ::testing::TestWithParam<Combo> {};

TEST_P(ReduceCombo, MatchesReference) { check_combination(GetParam().op, GetParam().dtype); }

INSTANTIATE_TEST_SUITE_P(Combos, ReduceCombo, ::testing::ValuesIn(all_combos()),
                         [](const ::testing::TestParamInfo<Combo>& info) {
                           return std::string(info.param.op.name()) + "_" +
                                  std::string(dtype_name(info.param.dtype)) +
                                  (reduce_op_supported(info.param.op, info.param.dtype) ? "" : "_unsupported");
                         });

// ---- hand-picked edge cases ------------------------------------------------------------------

template <typename T>
std::vector<T> run(ReduceOp op, DType dtype, std::vector<T> a, const std::vector<T>& b) {
  reduction::accumulate(op, dtype, a.data(), b.data(), a.size());
  return a;
}

TEST(ReduceKernel, FloatMinMaxPropagateNaN) {
  const std::vector<float> a{kNaN, 1, kNaN, 2, -kInf, 3, -0.0f};
  const std::vector<float> b{1, kNaN, kNaN, -kInf, 5, 3, 0.0f};
  auto mn = run(ReduceOp::MIN, DType::Float32, a, b);
  auto mx = run(ReduceOp::MAX, DType::Float32, a, b);
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]) && std::isnan(mn[2]));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]) && std::isnan(mx[2]));
  EXPECT_EQ(mn[3], -kInf);
  EXPECT_EQ(mn[4], -kInf);
  EXPECT_EQ(mn[5], 3);
  EXPECT_EQ(mx[3], 2);
  EXPECT_EQ(mx[4], 5);
  EXPECT_EQ(mx[5], 3);

  const double dn = std::numeric_limits<double>::quiet_NaN();
  auto dmn = run(ReduceOp::MIN, DType::Float64, std::vector<double>{dn, 1, 4}, std::vector<double>{0, dn, 2});
  EXPECT_TRUE(std::isnan(dmn[0]) && std::isnan(dmn[1]));
  EXPECT_EQ(dmn[2], 2);

  // A long run so that the vector loop, not only its scalar tail, sees the NaNs.
  std::vector<float> x(1003, 1.0f), y(1003, 2.0f);
  for (size_t i = 0; i < x.size(); i += 7) x[i] = kNaN;
  for (size_t i = 3; i < y.size(); i += 11) y[i] = kNaN;
  auto big = run(ReduceOp::MAX, DType::Float32, x, y);
  for (size_t i = 0; i < big.size(); ++i) {
    EXPECT_EQ(std::isnan(big[i]), std::isnan(x[i]) || std::isnan(y[i])) << i;
    if (!std::isnan(big[i])) {
      EXPECT_EQ(big[i], 2.0f) << i;
    }
  }
}

TEST(ReduceKernel, HalfMinMaxPropagateNaN) {
  for (DType d : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(d));
    auto h = [&](float f) { return d == DType::Float16 ? to_half(f).bits : to_bfloat16(f).bits; };
    auto f = [&](uint16_t bits) { return d == DType::Float16 ? to_float(Half{bits}) : to_float(BFloat16{bits}); };
    std::vector<uint16_t> a{h(kNaN), h(1), h(-2), h(kInf)};
    std::vector<uint16_t> b{h(1), h(kNaN), h(3), h(-kInf)};
    auto mx = run(ReduceOp::MAX, d, a, b);
    auto mn = run(ReduceOp::MIN, d, a, b);
    EXPECT_TRUE(std::isnan(f(mx[0])) && std::isnan(f(mx[1])));
    EXPECT_TRUE(std::isnan(f(mn[0])) && std::isnan(f(mn[1])));
    EXPECT_EQ(f(mx[2]), 3);
    EXPECT_EQ(f(mn[2]), -2);
    EXPECT_EQ(f(mx[3]), kInf);
    EXPECT_EQ(f(mn[3]), -kInf);
  }
}

TEST(ReduceKernel, HalfArithmeticRoundsToNearestEven) {
  auto sum = [](float x, float y) {
    std::vector<Half> a{to_half(x)}, b{to_half(y)};
    return run(ReduceOp::SUM, DType::Float16, a, b)[0].bits;
  };
  EXPECT_EQ(sum(1, 2), to_half(3).bits);
  EXPECT_EQ(sum(65504, 8), 0x7BFF);   // 65512 rounds down to the largest half
  EXPECT_EQ(sum(65504, 16), 0x7C00);  // 65520: the tie goes to even, which is Inf
  EXPECT_EQ(sum(1, 0x1p-11f), 0x3C00);  // 1 + half an ulp: tie to even (1.0)
  EXPECT_EQ(sum(kInf, -kInf) & 0x7C00, 0x7C00);  // NaN
  auto bsum = [](float x, float y) {
    std::vector<BFloat16> a{to_bfloat16(x)}, b{to_bfloat16(y)};
    return run(ReduceOp::SUM, DType::BFloat16, a, b)[0].bits;
  };
  EXPECT_EQ(bsum(1, 2), to_bfloat16(3).bits);
  EXPECT_EQ(bsum(256, 1), to_bfloat16(256).bits);  // 257 is a tie: even mantissa wins
  EXPECT_EQ(bsum(256, 3), to_bfloat16(260).bits);  // 259 ties between 258 and 260: even is 260
}

TEST(ReduceKernel, IntegersWrapAround) {
  EXPECT_EQ(run(ReduceOp::SUM, DType::Int8, std::vector<int8_t>{127}, {1})[0], -128);
  EXPECT_EQ(run(ReduceOp::SUM, DType::UInt8, std::vector<uint8_t>{200}, {100})[0], 44);
  EXPECT_EQ(run(ReduceOp::PRODUCT, DType::UInt8, std::vector<uint8_t>{16}, {16})[0], 0);
  EXPECT_EQ(run(ReduceOp::PRODUCT, DType::Int16, std::vector<int16_t>{300}, {300})[0], 24464);
  EXPECT_EQ(run(ReduceOp::PRODUCT, DType::Int16, std::vector<int16_t>{-32768}, {-1})[0], -32768);
  const int32_t imax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(run(ReduceOp::SUM, DType::Int32, std::vector<int32_t>{imax}, {1})[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(run(ReduceOp::PRODUCT, DType::Int32, std::vector<int32_t>{65536}, {65536})[0], 0);
  const int64_t lmax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(run(ReduceOp::SUM, DType::Int64, std::vector<int64_t>{lmax}, {1})[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(run(ReduceOp::PRODUCT, DType::Int64, std::vector<int64_t>{lmax}, {2})[0], -2);
}

TEST(ReduceKernel, BoolIsLogical) {
  const std::vector<uint8_t> a{2, 0, 255, 0, 1};
  const std::vector<uint8_t> b{1, 1, 4, 0, 0};
  EXPECT_EQ(run(ReduceOp::BAND, DType::Bool, a, b), (std::vector<uint8_t>{1, 0, 1, 0, 0}));
  EXPECT_EQ(run(ReduceOp::PRODUCT, DType::Bool, a, b), (std::vector<uint8_t>{1, 0, 1, 0, 0}));
  EXPECT_EQ(run(ReduceOp::MIN, DType::Bool, a, b), (std::vector<uint8_t>{1, 0, 1, 0, 0}));
  EXPECT_EQ(run(ReduceOp::BOR, DType::Bool, a, b), (std::vector<uint8_t>{1, 1, 1, 0, 1}));
  EXPECT_EQ(run(ReduceOp::SUM, DType::Bool, a, b), (std::vector<uint8_t>{1, 1, 1, 0, 1}));
  EXPECT_EQ(run(ReduceOp::MAX, DType::Bool, a, b), (std::vector<uint8_t>{1, 1, 1, 0, 1}));
  EXPECT_EQ(run(ReduceOp::BXOR, DType::Bool, a, b), (std::vector<uint8_t>{0, 1, 0, 0, 1}));
}

TEST(ReduceKernel, AvgFinalize) {
  std::vector<int32_t> i{7, -7, 9, 0, std::numeric_limits<int32_t>::min()};
  reduction::finalize(ReduceOp::AVG, DType::Int32, i.data(), i.size(), 2);
  EXPECT_EQ(i, (std::vector<int32_t>{3, -3, 4, 0, std::numeric_limits<int32_t>::min() / 2}));  // truncation
  std::vector<int8_t> s{100, -100};
  reduction::finalize(ReduceOp::AVG, DType::Int8, s.data(), s.size(), 300);  // contributors beyond int8
  EXPECT_EQ(s, (std::vector<int8_t>{0, 0}));
  std::vector<float> f{3, -1, 1};
  reduction::finalize(ReduceOp::AVG, DType::Float32, f.data(), f.size(), 4);
  EXPECT_EQ(f, (std::vector<float>{0.75f, -0.25f, 0.25f}));
  std::vector<std::complex<double>> c{{2, -4}};
  reduction::finalize(ReduceOp::AVG, DType::Complex128, c.data(), c.size(), 2);
  EXPECT_EQ(c[0], std::complex<double>(1, -2));
  std::vector<Half> h{to_half(6)};
  reduction::finalize(ReduceOp::AVG, DType::Float16, h.data(), h.size(), 4);
  EXPECT_EQ(to_float(h[0]), 1.5f);
  EXPECT_THAT(value_error([&] { reduction::finalize(ReduceOp::AVG, DType::Float32, f.data(), f.size(), 0); }),
              HasSubstr("contributors"));
  EXPECT_THROW(reduction::finalize(ReduceOp::AVG, DType::Float32, f.data(), f.size(), -1), DistValueError);
}

TEST(ReduceKernel, PremulSumFinalize) {
  std::vector<float> f{2, -4, 1};
  reduction::finalize(ReduceOp::premul_sum(0.5), DType::Float32, f.data(), f.size(), 3);
  EXPECT_EQ(f, (std::vector<float>{1, -2, 0.5f}));
  std::vector<BFloat16> b{to_bfloat16(3)};
  reduction::finalize(ReduceOp::premul_sum(-2), DType::BFloat16, b.data(), b.size(), 1);
  EXPECT_EQ(to_float(b[0]), -6.0f);
  std::vector<std::complex<float>> c{{1, 2}};
  reduction::finalize(ReduceOp::premul_sum(3), DType::Complex64, c.data(), c.size(), 1);
  EXPECT_EQ(c[0], std::complex<float>(3, 6));
  // Other ops: finalize leaves the data alone.
  std::vector<int32_t> i{5, 6};
  for (Kind k : {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX, ReduceOp::BAND}) {
    reduction::finalize(k, DType::Int32, i.data(), i.size(), 7);
  }
  EXPECT_EQ(i, (std::vector<int32_t>{5, 6}));
}

TEST(ReduceKernel, NullBuffers) {
  float x[2] = {};
  EXPECT_NO_THROW(reduction::accumulate(ReduceOp::SUM, DType::Float32, nullptr, nullptr, 0));
  EXPECT_NO_THROW(reduction::finalize(ReduceOp::AVG, DType::Float32, nullptr, 0, 2));
  EXPECT_THROW(reduction::accumulate(ReduceOp::SUM, DType::Float32, x, nullptr, 2), DistValueError);
  EXPECT_THROW(reduction::combine(ReduceOp::SUM, DType::Float32, nullptr, x, x, 2), DistValueError);
  EXPECT_THROW(reduction::finalize(ReduceOp::AVG, DType::Float32, nullptr, 2, 2), DistValueError);
}

TEST(ReduceKernel, InvalidCodes) {
  float x[2] = {};
  EXPECT_THROW(reduction::accumulate(static_cast<Kind>(30), DType::Float32, x, x + 1, 1), DistValueError);
  EXPECT_THROW(reduction::accumulate(ReduceOp::SUM, static_cast<DType>(30), x, x + 1, 1), DistValueError);
}

TEST(ReduceKernel, TensorForms) {
  std::vector<float> a{1, 2, 3}, b{10, 20, 30}, out(3);
  reduction::accumulate(ReduceOp::SUM, Tensor(a), Tensor(b));
  EXPECT_EQ(a, (std::vector<float>{11, 22, 33}));
  reduction::combine(ReduceOp::MAX, Tensor(out), Tensor(a), Tensor(b));
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33}));
  reduction::finalize(ReduceOp::AVG, Tensor(out), 11);
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3}));
  std::vector<double> d(3);
  std::vector<float> shorter(2);
  EXPECT_THAT(value_error([&] { reduction::accumulate(ReduceOp::SUM, Tensor(a), Tensor(d)); }),
              AllOf(HasSubstr("float32[3]"), HasSubstr("float64[3]")));
  EXPECT_THROW(reduction::accumulate(ReduceOp::SUM, Tensor(a), Tensor(shorter)), DistValueError);
  Tensor gpu(reinterpret_cast<void*>(0x100), DType::Float32, {3}, Device{DeviceType::CUDA, 0});
  EXPECT_THROW(reduction::accumulate(ReduceOp::SUM, gpu, gpu), DistValueError);
  EXPECT_THROW(reduction::finalize(ReduceOp::AVG, gpu, 2), DistValueError);
}

// float16 goes through F16C where the CPU has it, else through the portable branch-free code:
// both must give the same results, including for every one of the 65536 bit patterns.
TEST(ReduceKernel, Float16ConversionPaths) {
  struct Restore {
    ~Restore() { reduction::internal::set_float16_f16c(true); }
  } restore;
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<std::vector<uint16_t>> results;
  for (bool f16c : {true, false}) {
    reduction::internal::set_float16_f16c(f16c);
    SCOPED_TRACE(reduction::internal::float16_conversion());
    // MAX(x, x) is x: a round trip of every pattern through the kernel's conversions.
    auto same = run(ReduceOp::MAX, DType::Float16, all, all);
    for (size_t i = 0; i < all.size(); ++i) {
      const bool nan = (i & 0x7C00) == 0x7C00 && (i & 0x03FF) != 0;
      if (nan) {
        ASSERT_TRUE((same[i] & 0x7C00) == 0x7C00 && (same[i] & 0x03FF) != 0) << std::hex << i;
      } else {
        ASSERT_EQ(same[i], all[i]) << std::hex << i;
      }
    }
    // Sums of every pattern with a spread of others: rounding, overflow, subnormals.
    std::vector<uint16_t> other(all.size());
    for (size_t i = 0; i < other.size(); ++i) other[i] = static_cast<uint16_t>(i * 40503u);
    auto sum = run(ReduceOp::SUM, DType::Float16, all, other);
    for (size_t i = 0; i < all.size(); ++i) {
      const float want = to_float(Half{all[i]}) + to_float(Half{other[i]});
      const uint16_t want_bits = to_half(want).bits;
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(to_float(Half{sum[i]}))) << std::hex << i;
      } else {
        ASSERT_EQ(sum[i], want_bits) << std::hex << i;
      }
    }
    for (int k = 0; k <= ReduceOp::PREMUL_SUM; ++k) {
      const auto kind = static_cast<Kind>(k);
      check_combination(kind == ReduceOp::PREMUL_SUM ? ReduceOp::premul_sum(3) : ReduceOp(kind), DType::Float16);
    }
  }
}

TEST(ReduceKernel, NeedsFinalize) {
  EXPECT_TRUE(reduction::needs_finalize(ReduceOp::AVG));
  EXPECT_TRUE(reduction::needs_finalize(ReduceOp::premul_sum(2)));
  EXPECT_FALSE(reduction::needs_finalize(ReduceOp::SUM));
  EXPECT_FALSE(reduction::needs_finalize(ReduceOp::MAX));
}

}  // namespace
}  // namespace tdist
