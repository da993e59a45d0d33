// STAC-R CUDA kernels: host launchers over raw device pointers and a stream (cudaStream_t passed as void*).
// `device` is the CUDA ordinal the pointers and the stream belong to (made current before launching).
// Same parameters and the same numerical contract as the CPU twins in stac_cpu.h: compress is bit-identical,
// the contraction agrees to float32 rounding (its summation order differs). All launches are asynchronous
// on the given stream; errors of the launch itself throw std::runtime_error.
#pragma once

#include <cstdint>

#include "thrifty/stac_cpu.h"

namespace thrifty {
namespace stac {

// Same as compress_cpu (the non-finite count is not computed on the device: it would need a sync).
void compress_cuda(const CompressParams& p, int device, void* stream);

// Elements of float32 workspace residual_grad_cuda needs for these sizes (0: none).
int64_t residual_grad_workspace(const ResidualParams& p, int64_t m);

// out (m, d) float32 (row stride out_stride) += Gᵀ·R; G (n, m) of type g_dtype, row stride g_stride.
// Deterministic: fixed per-thread summation order, partial sums (workspace) reduced in a fixed order.
void residual_grad_cuda(const ResidualParams& p, const void* g, int g_dtype, int64_t m, int64_t g_stride,
                        float* out, int64_t out_stride, float* workspace, int device, void* stream);

// out (n, d) float32 (row stride out_stride) += R.
void residual_scatter_cuda(const ResidualParams& p, float* out, int64_t out_stride, int device, void* stream);

// Number of CUDA devices visible (0 when there is no driver or no GPU); never throws.
int cuda_device_count();

}  // namespace stac
}  // namespace thrifty
