// C ABI of the STAC-R CUDA kernels (cpp/include/thrifty/stac_capi.h): device pointers, the CUDA ordinal and
// the cudaStream_t of torch.cuda.current_stream(); kernels are queued asynchronously on that stream. The
// CUDA runtime is linked statically, so loading this library needs no CUDA library (calling it needs a driver).
#include "thrifty/stac_capi.h"
#include "thrifty/stac_cuda.h"

using namespace thrifty::stac;

THRIFTY_STAC_CAPI_COMMON("cuda")

extern "C" {

int thrifty_stac_device_count(void) { return cuda_device_count(); }

int thrifty_stac_compress(const void* x, int32_t x_dtype, int64_t n, int64_t d, int64_t x_stride, const float* ut,
                          const float* xu, int64_t r, int32_t coef, void* c, float* c_scale, int32_t block,
                          int32_t k, int32_t bits, int32_t stochastic, uint64_t seed, void* vals, uint8_t* idx,
                          float* scales, const thrifty_stac_exec* exec, int64_t* nonfinite) {
  return capi::guard([&] {
    const thrifty_stac_exec& e = capi::exec_or_throw(exec);
    const CompressParams p = capi::compress_params(x, x_dtype, n, d, x_stride, ut, xu, r, coef, c, c_scale, block,
                                                   k, bits, stochastic, seed, vals, idx, scales);
    compress_cuda(p, e.device, e.stream);
    if (nonfinite != nullptr) *nonfinite = 0;  // not counted on the device (it would need a sync)
  });
}

int thrifty_stac_residual_grad_workspace(int64_t n, int64_t d, int32_t block, int32_t k, int64_t m,
                                         int64_t* elements) {
  return capi::guard([&] {
    const ResidualParams p = capi::residual_params(nullptr, nullptr, nullptr, n, d, block, k, 8);
    check_residual_params(p, /*pointers=*/false);
    if (m < 0) throw std::invalid_argument("m: must be >= 0");
    if (elements == nullptr) throw std::invalid_argument("elements: null pointer");
    *elements = residual_grad_workspace(p, m);
  });
}

int thrifty_stac_residual_grad(const void* vals, const uint8_t* idx, const float* scales, int64_t n, int64_t d,
                               int32_t block, int32_t k, int32_t bits, const void* g, int32_t g_dtype, int64_t m,
                               int64_t g_stride, float* out, int64_t out_stride, float* workspace,
                               const thrifty_stac_exec* exec) {
  return capi::guard([&] {
    const thrifty_stac_exec& e = capi::exec_or_throw(exec);
    residual_grad_cuda(capi::residual_params(vals, idx, scales, n, d, block, k, bits), g, g_dtype, m, g_stride, out,
                       out_stride, workspace, e.device, e.stream);
  });
}

int thrifty_stac_residual_scatter(const void* vals, const uint8_t* idx, const float* scales, int64_t n, int64_t d,
                                  int32_t block, int32_t k, int32_t bits, float* out, int64_t out_stride,
                                  const thrifty_stac_exec* exec) {
  return capi::guard([&] {
    const thrifty_stac_exec& e = capi::exec_or_throw(exec);
    residual_scatter_cuda(capi::residual_params(vals, idx, scales, n, d, block, k, bits), out, out_stride, e.device,
                          e.stream);
  });
}

}  // extern "C"
