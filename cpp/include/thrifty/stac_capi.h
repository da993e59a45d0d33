// The one binding header of the STAC-R kernel libraries: a plain C ABI (no Python, no pybind11, no
// libtorch), implemented by each library and loaded with ctypes by thrifty.compress._kernels:
//   libthrifty_stac_cpu.so        CPU kernels, baseline instruction set (any x86-64 / the platform default)
//   libthrifty_stac_cpu_avx2.so   CPU kernels compiled for x86-64-v3 (AVX2 + FMA), chosen at run time when
//                                 the CPU has them (thrifty_stac_cpu_supports_avx2 of the baseline library)
//   libthrifty_stac_cuda.so       CUDA kernels (static CUDA runtime), loaded only when a CUDA tensor arrives
// Being a C ABI, one build serves every Python version (the wheel stays abi3) and every torch version.
//
// Every kernel entry point has the same signature in every library; the execution context says where it
// runs (nthreads for the CPU, device and stream - a cudaStream_t - for CUDA; the other fields are ignored).
// Return value: THRIFTY_STAC_OK, or an error code with a message naming the argument in
// thrifty_stac_last_error() (thread-local, valid until the next call on the same thread). No C++ exception
// crosses this boundary.
#pragma once

#include <stdint.h>

#if defined(__GNUC__)
#define THRIFTY_STAC_API __attribute__((visibility("default")))  // the libraries build with -fvisibility=hidden
#else
#define THRIFTY_STAC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define THRIFTY_STAC_ABI_VERSION 1

enum {
  THRIFTY_STAC_OK = 0,
  THRIFTY_STAC_INVALID_ARGUMENT = 1,  // ValueError in Python
  THRIFTY_STAC_RUNTIME_ERROR = 2,     // RuntimeError (a CUDA launch failed, out of memory, ...)
};

typedef struct {
  int32_t nthreads;  // CPU worker threads (>= 1)
  int32_t device;    // CUDA ordinal the pointers and the stream belong to
  void* stream;      // cudaStream_t the kernels are queued on (asynchronously)
} thrifty_stac_exec;

THRIFTY_STAC_API int thrifty_stac_abi_version(void);
THRIFTY_STAC_API const char* thrifty_stac_last_error(void);
// "avx2" or "generic" (CPU libraries, the instruction set compiled in), "cuda" (the CUDA library).
THRIFTY_STAC_API const char* thrifty_stac_simd(void);
// 1 when this CPU runs the x86-64-v3 library (AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE), else 0.
THRIFTY_STAC_API int thrifty_stac_cpu_supports_avx2(void);
// CUDA devices visible to the runtime (0 without a driver or a GPU, and always 0 in the CPU libraries).
THRIFTY_STAC_API int thrifty_stac_device_count(void);

// Quantize the coefficients and pack the top-k residual (layout: thrifty/stac_cpu.h, CompressParams).
// *nonfinite (CPU only; 0 on CUDA) counts non-finite coefficients plus residual blocks.
THRIFTY_STAC_API int thrifty_stac_compress(const void* x, int32_t x_dtype, int64_t n, int64_t d, int64_t x_stride, const float* ut,
                          const float* xu, int64_t r, int32_t coef, void* c, float* c_scale, int32_t block,
                          int32_t k, int32_t bits, int32_t stochastic, uint64_t seed, void* vals, uint8_t* idx,
                          float* scales, const thrifty_stac_exec* exec, int64_t* nonfinite);

// float32 elements of workspace thrifty_stac_residual_grad needs (always 0 on the CPU).
THRIFTY_STAC_API int thrifty_stac_residual_grad_workspace(int64_t n, int64_t d, int32_t block, int32_t k, int64_t m,
                                         int64_t* elements);

// out (m, d) float32, row stride out_stride: out += G^T R, G (n, m) of type g_dtype, row stride g_stride.
THRIFTY_STAC_API int thrifty_stac_residual_grad(const void* vals, const uint8_t* idx, const float* scales, int64_t n, int64_t d,
                               int32_t block, int32_t k, int32_t bits, const void* g, int32_t g_dtype, int64_t m,
                               int64_t g_stride, float* out, int64_t out_stride, float* workspace,
                               const thrifty_stac_exec* exec);

// out (n, d) float32, row stride out_stride: out += R (dequantize-scatter).
THRIFTY_STAC_API int thrifty_stac_residual_scatter(const void* vals, const uint8_t* idx, const float* scales, int64_t n, int64_t d,
                                  int32_t block, int32_t k, int32_t bits, float* out, int64_t out_stride,
                                  const thrifty_stac_exec* exec);

#ifdef __cplusplus
}  // extern "C"

#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "thrifty/stac_cpu.h"

namespace thrifty {
namespace stac {
namespace capi {

// The parts every library's binding shares (one definition, included by cpp/bind/*.cpp).
inline std::string& last_error() {
  thread_local std::string msg;
  return msg;
}

// Run f, turning C++ exceptions into a status code and the thread's last error message.
template <class F>
int guard(F&& f) noexcept {
  try {
    f();
    last_error().clear();
    return THRIFTY_STAC_OK;
  } catch (const std::invalid_argument& e) {
    last_error() = e.what();
    return THRIFTY_STAC_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    last_error() = "out of memory";
    return THRIFTY_STAC_RUNTIME_ERROR;
  } catch (const std::exception& e) {
    last_error() = e.what();
    return THRIFTY_STAC_RUNTIME_ERROR;
  } catch (...) {
    last_error() = "unknown C++ exception";
    return THRIFTY_STAC_RUNTIME_ERROR;
  }
}

inline const thrifty_stac_exec& exec_or_throw(const thrifty_stac_exec* e) {
  if (e == nullptr) throw std::invalid_argument("exec: null execution context");
  return *e;
}

inline CompressParams compress_params(const void* x, int32_t x_dtype, int64_t n, int64_t d, int64_t x_stride,
                                      const float* ut, const float* xu, int64_t r, int32_t coef, void* c,
                                      float* c_scale, int32_t block, int32_t k, int32_t bits, int32_t stochastic,
                                      uint64_t seed, void* vals, uint8_t* idx, float* scales) {
  CompressParams p;
  p.x = x;
  p.x_dtype = x_dtype;
  p.n = n;
  p.d = d;
  p.x_stride = x_stride;
  p.ut = ut;
  p.xu = xu;
  p.r = r;
  p.coef = coef;
  p.c = c;
  p.c_scale = c_scale;
  p.block = block;
  p.k = k;
  p.bits = bits;
  p.stochastic = stochastic != 0;
  p.seed = seed;
  p.vals = vals;
  p.idx = idx;
  p.scales = scales;
  return p;
}

inline ResidualParams residual_params(const void* vals, const uint8_t* idx, const float* scales, int64_t n,
                                      int64_t d, int32_t block, int32_t k, int32_t bits) {
  ResidualParams p;
  p.vals = vals;
  p.idx = idx;
  p.scales = scales;
  p.n = n;
  p.d = d;
  p.block = block;
  p.k = k;
  p.bits = bits;
  return p;
}

inline int supports_x86_64_v3() {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
                 __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("f16c") &&
                 __builtin_cpu_supports("lzcnt") && __builtin_cpu_supports("movbe")
             ? 1
             : 0;
#else
  return 0;
#endif
}

}  // namespace capi
}  // namespace stac
}  // namespace thrifty

// The entry points every library defines the same way (the kernels differ, not the plumbing).
#define THRIFTY_STAC_CAPI_COMMON(SIMD_NAME)                                                \
  extern "C" {                                                                             \
  int thrifty_stac_abi_version(void) { return THRIFTY_STAC_ABI_VERSION; }                  \
  const char* thrifty_stac_last_error(void) { return thrifty::stac::capi::last_error().c_str(); } \
  const char* thrifty_stac_simd(void) { return SIMD_NAME; }                                \
  int thrifty_stac_cpu_supports_avx2(void) { return thrifty::stac::capi::supports_x86_64_v3(); } \
  }
#endif  // __cplusplus
