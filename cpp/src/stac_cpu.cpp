// STAC-R CPU kernels.
//
// compress: rows are processed in tiles of kRows rows. Per tile the coefficients are quantized (and
// dequantized into a small buffer), then per feature block the residual tile E = X - deq(C)·Uᵀ is formed in
// registers (kRows rows x 16 columns of accumulators, t = 0..r-1 in order, one multiply and one add per
// step: bit-identical to the CUDA twin and the NumPy reference), selected, quantized and packed. E never
// exists beyond one kRows x block tile.
//
// residual_grad: per (feature block, tile of 64 output rows) a block x 64 float32 accumulator gathers
// q*scale*g[row, :] over the rows in ascending order, then is added (transposed) into the output.
//
// Work is split over std::threads by contiguous ranges of independent tasks, so results do not depend on
// the thread count.
#include "thrifty/stac_cpu.h"

#include <algorithm>
#include <climits>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "thrifty/stac_common.h"

namespace thrifty {
namespace stac {
namespace {

typedef float v8f __attribute__((vector_size(32)));

inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, v8f v) { std::memcpy(p, &v, sizeof v); }
inline v8f splat8(float a) { return v8f{a, a, a, a, a, a, a, a}; }

// Run fn(begin, end) over [0, ntasks) split into at most nthreads contiguous ranges.
template <class F>
void parallel_for(int64_t ntasks, int nthreads, F&& fn) {
  if (ntasks <= 0) return;
  int nt = std::max(1, nthreads);
  if (nt > ntasks) nt = static_cast<int>(ntasks);
  if (nt == 1) {
    fn(int64_t{0}, ntasks);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(nt - 1);
  const int64_t per = ntasks / nt, extra = ntasks % nt;
  int64_t begin = 0;
  int64_t first_end = 0;
  for (int t = 0; t < nt; ++t) {
    const int64_t end = begin + per + (t < extra ? 1 : 0);
    if (t == 0) {
      first_end = end;
    } else {
      pool.emplace_back([&fn, begin, end] { fn(begin, end); });
    }
    begin = end;
  }
  fn(int64_t{0}, first_end);
  for (auto& th : pool) th.join();
}

template <int DT>
void load_row_f32(const void* base, int64_t offset, int64_t count, float* out) {
  if (DT == kF32) {
    std::memcpy(out, static_cast<const float*>(base) + offset, sizeof(float) * count);
    return;
  }
  for (int64_t j = 0; j < count; ++j) out[j] = load_as_float<DT>(base, offset + j);
}

void load_row_any(int dt, const void* base, int64_t offset, int64_t count, float* out) {
  switch (dt) {
    case kF32: load_row_f32<kF32>(base, offset, count, out); break;
    case kBF16: load_row_f32<kBF16>(base, offset, count, out); break;
    default: load_row_f32<kF16>(base, offset, count, out); break;
  }
}

// Quantize one coefficient row into the stored format and write deq(c) (float32) into cdeq.
// Returns the number of non-finite inputs.
int64_t coef_row(const CompressParams& p, int64_t row, float* cdeq) {
  const float* src = p.xu + row * p.r;
  int64_t bad = 0;
  for (int64_t t = 0; t < p.r; ++t) bad += (float_to_bits(src[t]) & 0x7fffffffu) >= 0x7f800000u;
  switch (p.coef) {
    case kCoefF32: {
      float* dst = static_cast<float*>(p.c) + row * p.r;
      if (dst != src) std::memcpy(dst, src, sizeof(float) * p.r);
      std::memcpy(cdeq, src, sizeof(float) * p.r);
      break;
    }
    case kCoefBF16: {
      uint16_t* dst = static_cast<uint16_t*>(p.c) + row * p.r;
      for (int64_t t = 0; t < p.r; ++t) {
        dst[t] = float_to_bf16(src[t]);
        cdeq[t] = bf16_to_float(dst[t]);
      }
      break;
    }
    default: {
      int8_t* dst = static_cast<int8_t*>(p.c) + row * p.r;
      uint32_t amax_bits = 0;
      for (int64_t t = 0; t < p.r; ++t) amax_bits = std::max(amax_bits, float_to_bits(src[t]) & 0x7fffffffu);
      const float scale = group_scale(bits_to_float(amax_bits), 127.0f);
      p.c_scale[row] = scale;
      for (int64_t t = 0; t < p.r; ++t) {
        const int q = quantize_value(src[t], scale, 127.0f, false, 0.0f);
        dst[t] = static_cast<int8_t>(q);
        cdeq[t] = mul_rn(static_cast<float>(q), scale);
      }
      break;
    }
  }
  return bad;
}

// U panels: for every full chunk of 16 columns inside a block, the r x 16 slice of Uᵀ stored contiguously
// (t-major), so the micro-kernel streams 64 bytes per t instead of touching r cache lines d*4 bytes apart
// (which all land in the same L1 set when d is a multiple of 1024).
constexpr int kChunk = 16;

struct Panels {
  std::vector<float> data;
  int64_t per_block = 0;  // chunks per block (block / 16)
  int64_t r = 0;
  const float* chunk(int64_t b, int64_t c) const { return data.data() + ((b * per_block + c) * r) * kChunk; }
};

Panels pack_panels(const float* ut, int64_t d, int64_t r, int block) {
  Panels p;
  p.per_block = block / kChunk;
  p.r = r;
  const int64_t nb = ceil_div(d, block);
  p.data.assign(static_cast<size_t>(nb * p.per_block * r * kChunk), 0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t j0 = b * block;
    const int64_t L = std::min<int64_t>(block, d - j0);
    for (int64_t c = 0; c < L / kChunk; ++c) {
      float* dst = p.data.data() + ((b * p.per_block + c) * r) * kChunk;
      for (int64_t t = 0; t < r; ++t) std::memcpy(dst + t * kChunk, ut + t * d + j0 + c * kChunk, sizeof(float) * kChunk);
    }
  }
  return p;
}

// e[i*kMaxBlock + j] = xb[i*kMaxBlock + j] - sum_t cdeq[i*r + t] * Uᵀ[t, j0 + j], t in order (one multiply and
// one add per step), for i < RT and j < L. Full 16-column chunks read the packed panels.
template <int RT>
void residual_tile(const float* cdeq, const float* ut, const Panels& panels, int64_t b, int64_t d, int64_t r,
                   int64_t j0, int L, const float* xb, float* e) {
  int j = 0;
  for (; j + kChunk <= L; j += kChunk) {
    v8f a[RT][2];
    for (int i = 0; i < RT; ++i) a[i][0] = a[i][1] = splat8(0.0f);
    const float* up = panels.chunk(b, j / kChunk);
    for (int64_t t = 0; t < r; ++t, up += kChunk) {
      const v8f u0 = load8(up), u1 = load8(up + 8);
      for (int i = 0; i < RT; ++i) {
        const v8f cb = splat8(cdeq[i * r + t]);
        a[i][0] = a[i][0] + cb * u0;
        a[i][1] = a[i][1] + cb * u1;
      }
    }
    for (int i = 0; i < RT; ++i) {
      const float* xr = xb + i * kMaxBlock + j;
      float* er = e + i * kMaxBlock + j;
      store8(er, load8(xr) - a[i][0]);
      store8(er + 8, load8(xr + 8) - a[i][1]);
    }
  }
  for (; j < L; ++j) {
    for (int i = 0; i < RT; ++i) {
      float acc = 0.0f;
      const float* up = ut + j0 + j;
      for (int64_t t = 0; t < r; ++t, up += d) acc = acc + cdeq[i * r + t] * *up;
      e[i * kMaxBlock + j] = xb[i * kMaxBlock + j] - acc;
    }
  }
}

typedef int32_t v8i __attribute__((vector_size(32)));

inline v8i load8i(const int32_t* p) {
  v8i v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline v8i max8i(v8i a, v8i b) { return a > b ? a : b; }

#if defined(__AVX2__)
// For each 8-bit mask, the lane indices of its set bits packed to the front (for branch-free compaction).
struct CompactTable {
  alignas(32) int32_t perm[256][8];
  CompactTable() {
    for (int m = 0; m < 256; ++m) {
      int c = 0;
      for (int l = 0; l < 8; ++l)
        if (m & (1 << l)) perm[m][c++] = l;
      for (; c < 8; ++c) perm[m][c] = 0;
    }
  }
};
const CompactTable kCompact;
#endif

// Positions (ascending) of keys[j] >= lb, j < Lp (keys padded with -1 up to a multiple of 8); cand must
// have room for Lp + 8 entries.
inline int candidates(const int32_t* keys, int Lp, int32_t lb, int* cand) {
  int cnt = 0;
#if defined(__AVX2__)
  const __m256i lbv = _mm256_set1_epi32(lb - 1);
  __m256i pos = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i eight = _mm256_set1_epi32(8);
  for (int c = 0; c < Lp; c += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + c));
    const int mask = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(v, lbv)));
    const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i*>(kCompact.perm[mask]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(cand + cnt), _mm256_permutevar8x32_epi32(pos, perm));
    cnt += __builtin_popcount(static_cast<unsigned>(mask));
    pos = _mm256_add_epi32(pos, eight);
  }
#else
  for (int j = 0; j < Lp; ++j) {
    cand[cnt] = j;
    cnt += keys[j] >= lb;
  }
#endif
  return cnt;
}

// The kk-th largest of 16 values (kk in [1, 16]), branch-free: the value whose descending rank (ties by
// position) is kk - 1.
inline int32_t kth_largest16(const int32_t* v, int kk) {
  int32_t out = 0;
  for (int i = 0; i < 16; ++i) {
    int rank = 0;
    for (int j = 0; j < 16; ++j) rank += (v[j] > v[i]) | ((v[j] == v[i]) & (j < i));
    out = rank == kk - 1 ? v[i] : out;
  }
  return out;
}

inline v8i splat8i(int32_t a) { return v8i{a, a, a, a, a, a, a, a}; }
inline int hsum8i(v8i a) { return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7]; }

// #{j < np : v[j] >= t} (np a multiple of 8; padding holds -1, t >= 0).
inline int count_ge(const int32_t* v, int np, int32_t t) {
#if defined(__AVX2__)
  // movemask + popcount: a short dependency chain (the bisection below is latency-bound)
  const __m256i tv = _mm256_set1_epi32(t - 1);
  int cnt = 0;
  for (int c = 0; c < np; c += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + c));
    cnt += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(x, tv)))));
  }
  return cnt;
#else
  v8i acc = splat8i(0);
  const v8i tv = splat8i(t);
  for (int c = 0; c < np; c += 8) acc -= (load8i(v + c) >= tv);  // a true lane compares as -1
  return hsum8i(acc);
#endif
}

// The kk-th largest of v[0..np) given lo <= it <= hi: bisection over the bits below the common prefix of lo
// and hi, with vectorised counts (branch-free apart from the loop).
inline int32_t kth_largest(const int32_t* v, int np, int kk, int32_t lo, int32_t hi) {
  const uint32_t diff = static_cast<uint32_t>(lo ^ hi);
  if (diff == 0) return lo;
  const int top = 31 - __builtin_clz(diff);
  int32_t thr = lo & ~static_cast<int32_t>((uint32_t{2} << top) - 1u);
  for (int bit = top; bit >= 0; --bit) {
    const int32_t cand = thr | (int32_t{1} << bit);
    thr = count_ge(v, np, cand) >= kk ? cand : thr;
  }
  return thr;
}

// Append the positions pos[q] whose key beats thr, plus the first `ties` whose key equals thr (branch-free).
inline int emit(const int32_t* key, const int* pos, int count, int32_t thr, int ties, uint8_t* out) {
  uint8_t buf[kMaxBlock + 1];  // the branch-free store may write one slot past the kept count
  int got = 0;
  for (int q = 0; q < count; ++q) {
    const int32_t kq = key[q];
    const int eq = kq == thr;
    const int take = (kq > thr) | (eq & (ties > 0));
    ties -= take & eq;
    buf[got] = static_cast<uint8_t>(pos[q]);
    got += take;
  }
  std::memcpy(out, buf, static_cast<size_t>(got));
  return got;
}

// The kk in-block indices (ascending) of the entries of largest |e|, ties -> lower index. Keys are the bit
// patterns of |e| as non-negative int32 (monotone in |e|); keys must hold kMaxBlock + 16 ints.
//   kk <= 16: the kk-th largest of 16 lane-wise maxima is a lower bound of the threshold (those maxima are
//   distinct entries), so one vectorised max pass and one compaction pass leave a few candidates; for
//   kk <= 8 an insertion top list over them gives the threshold;
//   otherwise the kk-th largest key by bisection with vectorised counts; then one branch-free scan keeps the
//   keys above the threshold and the lowest-index ties.
int select_topk(const float* e, int L, int kk, int32_t* keys, uint8_t* out) {
  if (kk >= L) {
    for (int j = 0; j < L; ++j) out[j] = static_cast<uint8_t>(j);
    return L;
  }
  const int Lp = (L + 15) & ~15;
  for (int j = 0; j < L; ++j) keys[j] = static_cast<int32_t>(float_to_bits(e[j]) & 0x7fffffffu);
  for (int j = L; j < Lp; ++j) keys[j] = -1;
  v8i m0 = load8i(keys), m1 = load8i(keys + 8);
  for (int c = 16; c < Lp; c += 16) {
    m0 = max8i(m0, load8i(keys + c));
    m1 = max8i(m1, load8i(keys + c + 8));
  }
  int32_t lanes[16];
  for (int l = 0; l < 8; ++l) {
    lanes[l] = m0[l];
    lanes[8 + l] = m1[l];
  }
  const v8i mm = max8i(m0, m1);
  int32_t hi = mm[0];
  for (int l = 1; l < 8; ++l) hi = std::max(hi, mm[l]);
  if (kk <= 16) {
    const int32_t lb = std::max<int32_t>(kth_largest16(lanes, kk), 0);
    int cand[kMaxBlock + 16];
    alignas(32) int32_t ck[kMaxBlock + 16];
    const int nc = candidates(keys, Lp, lb, cand);
    const int ncp = (nc + 7) & ~7;
    for (int q = 0; q < nc; ++q) ck[q] = keys[cand[q]];
    for (int q = nc; q < ncp; ++q) ck[q] = -1;
    if (kk <= 8) {
      // few candidates (about 2 kk): a descending top list on the (key, -index) order; its last entry is the
      // threshold, and the candidates are already in ascending index order
      uint64_t top[8] = {};
      int cnt = 0;
      for (int q = 0; q < nc; ++q) {
        const uint64_t key = (static_cast<uint64_t>(ck[q]) << 8) | static_cast<uint64_t>(255 - cand[q]);
        if (cnt == kk) {
          if (key <= top[kk - 1]) continue;
          --cnt;
        }
        int at = cnt;
        while (at > 0 && top[at - 1] < key) {
          top[at] = top[at - 1];
          --at;
        }
        top[at] = key;
        ++cnt;
      }
      const int32_t thr = static_cast<int32_t>(top[kk - 1] >> 8);
      const int above = thr == INT32_MAX ? 0 : count_ge(ck, ncp, thr + 1);
      return emit(ck, cand, nc, thr, kk - above, out);
    }
    const int32_t thr = kth_largest(ck, ncp, kk, lb, hi);
    const int above = thr == INT32_MAX ? 0 : count_ge(ck, ncp, thr + 1);
    return emit(ck, cand, nc, thr, kk - above, out);
  }
  int pos[kMaxBlock];
  for (int j = 0; j < L; ++j) pos[j] = j;
  const int32_t thr = kth_largest(keys, Lp, kk, 0, hi);
  const int above = thr == INT32_MAX ? 0 : count_ge(keys, Lp, thr + 1);
  return emit(keys, pos, L, thr, kk - above, out);
}

// Select, quantize and pack one row of one block. Returns 1 when the block holds a non-finite residual
// (NaN and inf have the largest keys, so they are always selected and show in the maximum).
int pack_block(const CompressParams& p, int64_t row, int64_t b, int64_t nb, const float* e, int L,
                int32_t* keys) {
  const int kk = std::min(p.k, L);
  uint8_t* idx = p.idx + (row * nb + b) * p.k;
  const int got = select_topk(e, L, kk, keys, idx);
  (void)got;
  uint32_t amax_bits = 0;  // max of |e| as bit patterns: same as the float max for finite values, keeps NaN
  for (int s = 0; s < kk; ++s) amax_bits = std::max(amax_bits, float_to_bits(e[idx[s]]) & 0x7fffffffu);
  const float amax = bits_to_float(amax_bits);
  const float qmax = p.bits == 8 ? 127.0f : 7.0f;
  const float scale = group_scale(amax, qmax);
  p.scales[row * nb + b] = scale;
  const int64_t col0 = b * p.block;
  if (p.bits == 8) {
    int8_t* v = static_cast<int8_t*>(p.vals) + (row * nb + b) * p.k;
    for (int s = 0; s < kk; ++s) {
      const float u = p.stochastic ? uniform01(p.seed, row, col0 + idx[s]) : 0.0f;
      v[s] = static_cast<int8_t>(quantize_value(e[idx[s]], scale, qmax, p.stochastic, u));
    }
    for (int s = kk; s < p.k; ++s) v[s] = 0;
  } else {
    const int kb = (p.k + 1) / 2;
    uint8_t* v = static_cast<uint8_t*>(p.vals) + (row * nb + b) * kb;
    for (int s = 0; s < kb; ++s) v[s] = 0;
    for (int s = 0; s < kk; ++s) {
      const float u = p.stochastic ? uniform01(p.seed, row, col0 + idx[s]) : 0.0f;
      const int q = quantize_value(e[idx[s]], scale, qmax, p.stochastic, u);
      v[s >> 1] = static_cast<uint8_t>(v[s >> 1] | ((q & 0xf) << ((s & 1) * 4)));
    }
  }
  for (int s = kk; s < p.k; ++s) idx[s] = 0;
  return !(amax <= 3.4028234663852886e+38f);
}

constexpr int kRows = 4;

template <int RT>
int64_t compress_rows(const CompressParams& p, const Panels& panels, int64_t row0, std::vector<float>& cdeq,
                      std::vector<float>& xb, std::vector<float>& e, std::vector<int32_t>& keys) {
  int64_t bad = 0;
  for (int i = 0; i < RT; ++i) bad += coef_row(p, row0 + i, cdeq.data() + i * p.r);
  if (p.k == 0) return bad;
  const int64_t nb = ceil_div(p.d, p.block);
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t j0 = b * p.block;
    const int L = static_cast<int>(std::min<int64_t>(p.block, p.d - j0));
    for (int i = 0; i < RT; ++i)
      load_row_any(p.x_dtype, p.x, (row0 + i) * p.x_stride + j0, L, xb.data() + i * kMaxBlock);
    residual_tile<RT>(cdeq.data(), p.ut, panels, b, p.d, p.r, j0, L, xb.data(), e.data());
    for (int i = 0; i < RT; ++i) bad += pack_block(p, row0 + i, b, nb, e.data() + i * kMaxBlock, L, keys.data());
  }
  return bad;
}

int unpack_q(const void* vals, int64_t base_row_block, int k, int bits, int s) {
  if (bits == 8) return static_cast<const int8_t*>(vals)[base_row_block * k + s];
  const int kb = (k + 1) / 2;
  const uint8_t byte = static_cast<const uint8_t*>(vals)[base_row_block * kb + (s >> 1)];
  const int nib = (s & 1) ? (byte >> 4) : (byte & 0xf);
  return (nib ^ 8) - 8;
}

[[noreturn]] void bad_arg(const std::string& msg) { throw std::invalid_argument(msg); }

}  // namespace

void check_compress_params(const CompressParams& p) {
  if (p.n < 0 || p.d < 1) bad_arg("x: need shape (n, d) with n >= 0 and d >= 1");
  if (p.x_stride < p.d) bad_arg("x: row stride smaller than the row length");
  if (p.x_dtype < kF32 || p.x_dtype > kF16) bad_arg("x: unsupported dtype code");
  if (p.r < 1) bad_arg("u: need at least one column (r >= 1)");
  if (p.coef < kCoefF32 || p.coef > kCoefI8) bad_arg("coef: unsupported coefficient format code");
  if (p.block < 1 || p.block > kMaxBlock) bad_arg("block: must be in [1, 256]");
  if (p.k < 0 || p.k > p.block) bad_arg("k: must be in [0, block]");
  if (p.bits != 4 && p.bits != 8) bad_arg("bits: must be 4 or 8");
  if (p.n > 0 && (!p.x || !p.ut || !p.xu || !p.c)) bad_arg("compress: null data pointer");
  if (p.n > 0 && p.coef == kCoefI8 && !p.c_scale) bad_arg("c_scale: null data pointer");
  if (p.n > 0 && p.k > 0 && (!p.vals || !p.idx || !p.scales)) bad_arg("compress: null residual pointer");
}

void check_residual_params(const ResidualParams& p, bool pointers) {
  if (p.n < 0 || p.d < 1) bad_arg("d: need n >= 0 rows and d >= 1 features");
  if (p.block < 1 || p.block > kMaxBlock) bad_arg("block: must be in [1, 256]");
  if (p.k < 0 || p.k > p.block) bad_arg("k: must be in [0, block]");
  if (p.bits != 4 && p.bits != 8) bad_arg("bits: must be 4 or 8");
  if (pointers && p.n > 0 && p.k > 0 && (!p.vals || !p.idx || !p.scales)) bad_arg("residual: null data pointer");
}

int64_t compress_cpu(const CompressParams& p, int nthreads) {
  check_compress_params(p);
  const int64_t ntiles = ceil_div(p.n, kRows);
  const Panels panels = p.k > 0 && p.n > 0 ? pack_panels(p.ut, p.d, p.r, p.block) : Panels{};
  std::vector<int64_t> bad_per_task(std::max(1, nthreads), 0);
  const int nt = static_cast<int>(std::min<int64_t>(std::max(1, nthreads), std::max<int64_t>(ntiles, 1)));
  // one range per worker so each allocates its scratch once
  parallel_for(nt, nt, [&](int64_t w0, int64_t w1) {
    std::vector<float> cdeq(kRows * p.r), xb(kRows * kMaxBlock), e(kRows * kMaxBlock);
    std::vector<int32_t> keys(kMaxBlock + 16);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t t0 = ntiles * w / nt, t1 = ntiles * (w + 1) / nt;
      int64_t bad = 0;
      for (int64_t tile = t0; tile < t1; ++tile) {
        const int64_t row0 = tile * kRows;
        if (row0 + kRows <= p.n) {
          bad += compress_rows<kRows>(p, panels, row0, cdeq, xb, e, keys);
        } else {
          for (int64_t row = row0; row < p.n; ++row) bad += compress_rows<1>(p, panels, row, cdeq, xb, e, keys);
        }
      }
      bad_per_task[w] = bad;
    }
  });
  int64_t bad = 0;
  for (int64_t b : bad_per_task) bad += b;
  return bad;
}

void residual_grad_cpu(const ResidualParams& p, const void* g, int g_dtype, int64_t m, int64_t g_stride,
                       float* out, int64_t out_stride, int nthreads) {
  check_residual_params(p);
  if (m < 0 || g_stride < m) bad_arg("g: row stride smaller than the row length");
  if (out_stride < p.d) bad_arg("out: row stride smaller than d");
  if (p.k == 0 || p.n == 0 || m == 0) return;
  constexpr int MT = 64;
  const int64_t nb = ceil_div(p.d, p.block);
  const int64_t nmt = ceil_div(m, MT);
  parallel_for(nb * nmt, nthreads, [&](int64_t t0, int64_t t1) {
    std::vector<float> acc(static_cast<size_t>(kMaxBlock) * MT);
    float gbuf[MT];
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t b = task / nmt, m0 = (task % nmt) * MT;
      const int mw = static_cast<int>(std::min<int64_t>(MT, m - m0));
      const int L = static_cast<int>(std::min<int64_t>(p.block, p.d - b * p.block));
      const int kk = std::min(p.k, L);
      std::fill(acc.begin(), acc.begin() + static_cast<size_t>(L) * MT, 0.0f);
      for (int64_t row = 0; row < p.n; ++row) {
        const float scale = p.scales[row * nb + b];
        if (!(scale != 0.0f)) continue;
        bool loaded = false;
        const uint8_t* ix = p.idx + (row * nb + b) * p.k;
        for (int s = 0; s < kk; ++s) {
          const int q = unpack_q(p.vals, row * nb + b, p.k, p.bits, s);
          if (q == 0) continue;
          if (!loaded) {
            load_row_any(g_dtype, g, row * g_stride + m0, mw, gbuf);
            for (int mm = mw; mm < MT; ++mm) gbuf[mm] = 0.0f;
            loaded = true;
          }
          const float v = mul_rn(static_cast<float>(q), scale);
          float* a = acc.data() + static_cast<size_t>(ix[s]) * MT;
          const v8f vv = splat8(v);
          for (int mm = 0; mm < MT; mm += 8) store8(a + mm, load8(a + mm) + vv * load8(gbuf + mm));
        }
      }
      for (int mm = 0; mm < mw; ++mm) {
        float* o = out + (m0 + mm) * out_stride + b * p.block;
        for (int col = 0; col < L; ++col) o[col] += acc[static_cast<size_t>(col) * MT + mm];
      }
    }
  });
}

void residual_scatter_cpu(const ResidualParams& p, float* out, int64_t out_stride, int nthreads) {
  check_residual_params(p);
  if (out_stride < p.d) bad_arg("out: row stride smaller than d");
  if (p.k == 0 || p.n == 0) return;
  const int64_t nb = ceil_div(p.d, p.block);
  parallel_for(p.n, nthreads, [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      for (int64_t b = 0; b < nb; ++b) {
        const int L = static_cast<int>(std::min<int64_t>(p.block, p.d - b * p.block));
        const int kk = std::min(p.k, L);
        const float scale = p.scales[row * nb + b];
        const uint8_t* ix = p.idx + (row * nb + b) * p.k;
        float* o = out + row * out_stride + b * p.block;
        for (int s = 0; s < kk; ++s) {
          const int q = unpack_q(p.vals, row * nb + b, p.k, p.bits, s);
          o[ix[s]] += mul_rn(static_cast<float>(q), scale);
        }
      }
    }
  });
}

}  // namespace stac
}  // namespace thrifty
