// C++ tests of the STAC-R CPU kernels (run by ctest from scripts/test.sh). Checks the scalar contract
// (rounding, conversions, RNG), top-k selection with ties, and compress / contraction / scatter against
// straightforward double-precision or scalar re-implementations, plus thread-count independence.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "thrifty/stac_common.h"
#include "thrifty/stac_cpu.h"

using namespace thrifty::stac;

static int failures = 0;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      ++failures;                                          \
      std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                   \
      std::fprintf(stderr, "\n");                          \
    }                                                      \
  } while (0)

static void test_scalars() {
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-300.f, 300.f);
  for (int i = 0; i < 200000; ++i) {
    float y = dist(gen);
    if (i % 7 == 0) y = std::round(y) + 0.5f * ((i & 8) ? 1.f : -1.f);  // exact halves
    CHECK(round_half_away(y) == std::round(y), "round_half_away(%.9g)", y);
    CHECK(floor_f(y) == std::floor(y), "floor_f(%.9g)", y);
  }
  CHECK(round_half_away(0.49999997f) == 0.0f, "0.49999997 rounds to 0");
  CHECK(round_half_away(-2.5f) == -3.0f, "-2.5 rounds away from zero");
  // bfloat16: round to nearest even
  CHECK(float_to_bf16(1.0f) == 0x3f80, "bf16(1)");
  CHECK(float_to_bf16(bits_to_float(0x3f808000u)) == 0x3f80, "bf16 tie to even (down)");
  CHECK(float_to_bf16(bits_to_float(0x3f818000u)) == 0x3f82, "bf16 tie to even (up)");
  CHECK(float_to_bf16(bits_to_float(0x3f808001u)) == 0x3f81, "bf16 above tie");
  // float16: every finite half converts to the value its fields describe
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint32_t ex = (h >> 10) & 31, man = h & 1023;
    if (ex == 31) continue;
    const double mag = ex == 0 ? man * std::ldexp(1.0, -24) : (1.0 + man / 1024.0) * std::ldexp(1.0, int(ex) - 15);
    const double want = (h & 0x8000u) ? -mag : mag;
    CHECK(static_cast<double>(f16_to_float(static_cast<uint16_t>(h))) == want, "f16 %04x", h);
  }
  // uniform01: in [0,1), distinct keys give different draws, mean near 1/2
  double s = 0;
  for (int i = 0; i < 100000; ++i) {
    const float u = uniform01(42, i / 300, i % 300);
    CHECK(u >= 0.f && u < 1.f, "uniform01 range");
    s += u;
  }
  CHECK(std::fabs(s / 100000 - 0.5) < 0.005, "uniform01 mean %g", s / 100000);
  CHECK(uniform01(1, 2, 3) != uniform01(1, 3, 2), "uniform01 depends on the order of row and column");
  CHECK(quantize_value(5.f, 0.f, 127.f, false, 0.f) == 0, "zero scale");
  CHECK(quantize_value(127.f, 1.f, 127.f, true, 0.99f) == 127, "clamp");
}

struct Packed {
  std::vector<uint8_t> c, idx, vals;
  std::vector<float> c_scale, scales;
  int64_t bad = 0;
};

static Packed run_compress(const std::vector<float>& x, const std::vector<float>& ut, const std::vector<float>& xu,
                           int64_t n, int64_t d, int64_t r, int coef, int block, int k, int bits, bool stoch,
                           int nthreads) {
  const int64_t nb = ceil_div(d, block);
  Packed o;
  o.c.resize(n * r * 4);
  o.c_scale.resize(n);
  o.idx.resize(n * nb * k);
  o.vals.resize(n * nb * (bits == 8 ? k : (k + 1) / 2));
  o.scales.resize(n * nb);
  CompressParams p;
  p.x = x.data();
  p.x_dtype = kF32;
  p.n = n;
  p.d = d;
  p.x_stride = d;
  p.ut = ut.data();
  p.xu = xu.data();
  p.r = r;
  p.coef = coef;
  p.c = o.c.data();
  p.c_scale = o.c_scale.data();
  p.block = block;
  p.k = k;
  p.bits = bits;
  p.stochastic = stoch;
  p.seed = 7;
  p.vals = o.vals.data();
  p.idx = o.idx.data();
  p.scales = o.scales.data();
  o.bad = compress_cpu(p, nthreads);
  return o;
}

static void test_compress() {
  std::mt19937 gen(3);
  std::normal_distribution<float> nd;
  const int64_t n = 37, d = 300, r = 5;
  const int block = 128;
  const int64_t nb = ceil_div(d, block);
  std::vector<float> x(n * d), ut(r * d), xu(n * r);
  for (auto& v : x) v = nd(gen);
  for (auto& v : ut) v = nd(gen) * 0.05f;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < r; ++t) {
      double s = 0;
      for (int64_t j = 0; j < d; ++j) s += double(x[i * d + j]) * ut[t * d + j];
      xu[i * r + t] = float(s);
    }
  // k = 3 (small-k top list), 9 (candidates + bisection), 20 (bisection over the whole block)
  for (int k : {3, 9, 20})
  for (int coef : {kCoefF32, kCoefBF16, kCoefI8})
    for (int bits : {8, 4}) {
      const Packed a = run_compress(x, ut, xu, n, d, r, coef, block, k, bits, false, 1);
      const Packed b = run_compress(x, ut, xu, n, d, r, coef, block, k, bits, false, 3);
      CHECK(a.bad == 0, "finite input flagged");
      CHECK(a.idx == b.idx && a.vals == b.vals && a.scales == b.scales && a.c == b.c, "thread count changes result");
      // scalar re-implementation of the contract
      for (int64_t i = 0; i < n; ++i) {
        std::vector<float> cd(r);
        for (int64_t t = 0; t < r; ++t) {
          if (coef == kCoefF32) cd[t] = xu[i * r + t];
          else if (coef == kCoefBF16) cd[t] = bf16_to_float(float_to_bf16(xu[i * r + t]));
          else cd[t] = static_cast<float>(reinterpret_cast<const int8_t*>(a.c.data())[i * r + t]) * a.c_scale[i];
        }
        for (int64_t bb = 0; bb < nb; ++bb) {
          const int L = int(std::min<int64_t>(block, d - bb * block)), kk = std::min(k, L);
          std::vector<float> e(L);
          for (int j = 0; j < L; ++j) {
            float acc = 0.f;
            for (int64_t t = 0; t < r; ++t) acc = acc + cd[t] * ut[t * d + bb * block + j];
            e[j] = x[i * d + bb * block + j] - acc;
          }
          // brute-force top-k: an entry is kept iff fewer than kk entries beat it
          std::vector<int> want;
          for (int j = 0; j < L; ++j) {
            int beat = 0;
            for (int j2 = 0; j2 < L; ++j2)
              beat += std::fabs(e[j2]) > std::fabs(e[j]) || (std::fabs(e[j2]) == std::fabs(e[j]) && j2 < j);
            if (beat < kk) want.push_back(j);
          }
          float amax = 0;
          for (int j : want) amax = std::max(amax, std::fabs(e[j]));
          const float qmax = bits == 8 ? 127.f : 7.f;
          const float scale = amax / qmax;
          CHECK(a.scales[i * nb + bb] == scale, "scale row %ld block %ld", long(i), long(bb));
          for (int s = 0; s < k; ++s) {
            const int got_idx = a.idx[(i * nb + bb) * k + s];
            int q;
            if (bits == 8) {
              q = reinterpret_cast<const int8_t*>(a.vals.data())[(i * nb + bb) * k + s];
            } else {
              const uint8_t byte = a.vals[(i * nb + bb) * ((k + 1) / 2) + s / 2];
              const int nib = (s & 1) ? byte >> 4 : byte & 15;
              q = (nib ^ 8) - 8;
            }
            if (s < kk) {
              CHECK(got_idx == want[s], "idx row %ld block %ld slot %d: %d vs %d", long(i), long(bb), s, got_idx,
                    want[s]);
              const float wq = scale > 0 ? std::round(e[want[s]] / scale) : 0.f;
              CHECK(q == int(std::max(-qmax, std::min(qmax, wq))), "q row %ld slot %d", long(i), s);
            } else {
              CHECK(got_idx == 0 && q == 0, "padding slot");
            }
          }
        }
      }
    }
  const int k = 9;
  // stochastic rounding is reproducible and independent of the thread count
  const Packed s1 = run_compress(x, ut, xu, n, d, r, kCoefBF16, block, k, 4, true, 1);
  const Packed s2 = run_compress(x, ut, xu, n, d, r, kCoefBF16, block, k, 4, true, 2);
  CHECK(s1.vals == s2.vals && s1.idx == s2.idx, "stochastic rounding reproducible");
  // non-finite input is reported
  std::vector<float> xu_bad = xu;
  xu_bad[5] = std::nanf("");
  CHECK(run_compress(x, ut, xu_bad, n, d, r, kCoefF32, block, k, 8, false, 2).bad >= 1, "NaN reported");
  std::vector<float> x_bad = x;
  x_bad[77] = std::numeric_limits<float>::infinity();  // X·U finite (given), residual not
  CHECK(run_compress(x_bad, ut, xu, n, d, r, kCoefBF16, block, k, 4, false, 1).bad == 1, "inf in x reported");
}

static void test_ties() {
  // all |e| equal: the lowest indices are kept
  const int64_t n = 1, d = 16, r = 1;
  std::vector<float> x(d), ut(d, 0.f), xu(1, 0.f);
  for (int j = 0; j < d; ++j) x[j] = (j % 2) ? 1.f : -1.f;
  const Packed a = run_compress(x, ut, xu, n, d, r, kCoefF32, 16, 5, 8, false, 1);
  for (int s = 0; s < 5; ++s) CHECK(a.idx[s] == s, "tie slot %d -> %d", s, a.idx[s]);
  // k = block keeps everything, in order
  const Packed b = run_compress(x, ut, xu, n, d, r, kCoefF32, 16, 16, 8, false, 1);
  for (int s = 0; s < 16; ++s) CHECK(b.idx[s] == s && int8_t(b.vals[s]) == ((s % 2) ? 127 : -127), "keep all");
}

static void test_residual_ops() {
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> qd(-127, 127);
  std::uniform_real_distribution<float> ud(-1.f, 1.f);
  const int64_t n = 45, d = 200, m = 70;
  for (int bits : {8, 4})
    for (int block : {64, 256}) {
      const int k = 7;
      const int64_t nb = ceil_div(d, block);
      const int kb = bits == 8 ? k : (k + 1) / 2;
      std::vector<uint8_t> idx(n * nb * k), vals(n * nb * kb, 0);
      std::vector<float> scales(n * nb), g(n * m);
      std::vector<double> dense(n * d, 0.0);
      for (auto& v : g) v = ud(gen);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t b = 0; b < nb; ++b) {
          const int L = int(std::min<int64_t>(block, d - b * block));
          scales[i * nb + b] = std::fabs(ud(gen));
          std::vector<int> perm(L);
          for (int j = 0; j < L; ++j) perm[j] = j;
          std::shuffle(perm.begin(), perm.end(), gen);
          std::sort(perm.begin(), perm.begin() + std::min(k, L));
          for (int s = 0; s < std::min(k, L); ++s) {
            const int q = bits == 8 ? qd(gen) : qd(gen) % 8;
            idx[(i * nb + b) * k + s] = uint8_t(perm[s]);
            if (bits == 8) vals[(i * nb + b) * k + s] = uint8_t(int8_t(q));
            else vals[(i * nb + b) * kb + s / 2] |= uint8_t((q & 15) << ((s & 1) * 4));
            dense[i * d + b * block + perm[s]] += double(float(q) * scales[i * nb + b]);
          }
        }
      ResidualParams p;
      p.vals = vals.data();
      p.idx = idx.data();
      p.scales = scales.data();
      p.n = n;
      p.d = d;
      p.block = block;
      p.k = k;
      p.bits = bits;
      std::vector<float> out(n * d, 0.f);
      residual_scatter_cpu(p, out.data(), d, 2);
      for (int64_t t = 0; t < n * d; ++t) CHECK(double(out[t]) == dense[t], "scatter %ld", long(t));
      std::vector<float> gw(m * d, 1.f), gw3(m * d, 1.f);
      residual_grad_cpu(p, g.data(), kF32, m, m, gw.data(), d, 1);
      residual_grad_cpu(p, g.data(), kF32, m, m, gw3.data(), d, 3);
      CHECK(gw == gw3, "contraction independent of thread count");
      double num = 0, den = 0;
      for (int64_t a = 0; a < m; ++a)
        for (int64_t j = 0; j < d; ++j) {
          double s = 1.0;
          for (int64_t i = 0; i < n; ++i) s += double(g[i * m + a]) * dense[i * d + j];
          num += (s - gw[a * d + j]) * (s - gw[a * d + j]);
          den += s * s;
        }
      CHECK(std::sqrt(num / den) < 1e-6, "contraction rel err %g", std::sqrt(num / den));
    }
}

int main() {
  test_scalars();
  test_ties();
  test_compress();
  test_residual_ops();
  if (failures) {
    std::fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  std::printf("stac_cpu_test: all checks passed\n");
  return 0;
}
