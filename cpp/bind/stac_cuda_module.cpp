// pybind11 module thrifty._stac_cuda: binds the STAC-R CUDA kernels. Arguments are plain integers (device
// pointers from tensor.data_ptr(), sizes, strides, the cudaStream_t of torch.cuda.current_stream()). Kernels
// are queued asynchronously on that stream; no tensor library is linked and the CUDA runtime is static, so
// importing this module needs no CUDA library (only calling it needs a driver).
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>

#include "thrifty/stac_cuda.h"

namespace py = pybind11;
using namespace thrifty::stac;

namespace {

template <class T>
T* ptr(std::uintptr_t p) {
  return reinterpret_cast<T*>(p);
}

ResidualParams residual(std::uintptr_t vals, std::uintptr_t idx, std::uintptr_t scales, int64_t n, int64_t d,
                        int block, int k, int bits) {
  ResidualParams p;
  p.vals = ptr<const void>(vals);
  p.idx = ptr<const uint8_t>(idx);
  p.scales = ptr<const float>(scales);
  p.n = n;
  p.d = d;
  p.block = block;
  p.k = k;
  p.bits = bits;
  return p;
}

}  // namespace

PYBIND11_MODULE(_stac_cuda, m) {
  m.doc() = "STAC-R CUDA kernels (compress, residual contraction, dequantize-scatter) over raw device pointers.";
  m.def("device_count", &cuda_device_count, "CUDA devices visible to the runtime (0 without a driver or GPU).");

  m.def(
      "compress",
      [](std::uintptr_t x, int x_dtype, int64_t n, int64_t d, int64_t x_stride, std::uintptr_t ut,
         std::uintptr_t xu, int64_t r, int coef, std::uintptr_t c, std::uintptr_t c_scale, int block, int k,
         int bits, bool stochastic, std::uint64_t seed, std::uintptr_t vals, std::uintptr_t idx,
         std::uintptr_t scales, int device, std::uintptr_t stream) {
        CompressParams p;
        p.x = ptr<const void>(x);
        p.x_dtype = x_dtype;
        p.n = n;
        p.d = d;
        p.x_stride = x_stride;
        p.ut = ptr<const float>(ut);
        p.xu = ptr<const float>(xu);
        p.r = r;
        p.coef = coef;
        p.c = ptr<void>(c);
        p.c_scale = ptr<float>(c_scale);
        p.block = block;
        p.k = k;
        p.bits = bits;
        p.stochastic = stochastic;
        p.seed = seed;
        p.vals = ptr<void>(vals);
        p.idx = ptr<uint8_t>(idx);
        p.scales = ptr<float>(scales);
        compress_cuda(p, device, ptr<void>(stream));
      },
      py::arg("x"), py::arg("x_dtype"), py::arg("n"), py::arg("d"), py::arg("x_stride"), py::arg("ut"),
      py::arg("xu"), py::arg("r"), py::arg("coef"), py::arg("c"), py::arg("c_scale"), py::arg("block"),
      py::arg("k"), py::arg("bits"), py::arg("stochastic"), py::arg("seed"), py::arg("vals"), py::arg("idx"),
      py::arg("scales"), py::arg("device"), py::arg("stream"), "Quantize coefficients and pack the top-k residual (asynchronous).");

  m.def(
      "residual_grad_workspace",
      [](int64_t n, int64_t d, int block, int k, int64_t mdim) {
        ResidualParams p;
        p.n = n;
        p.d = d;
        p.block = block;
        p.k = k;
        check_residual_params(p, /*pointers=*/false);
        if (mdim < 0) throw std::invalid_argument("m: must be >= 0");
        return residual_grad_workspace(p, mdim);
      },
      py::arg("n"), py::arg("d"), py::arg("block"), py::arg("k"), py::arg("m"),
      "float32 elements of workspace residual_grad needs (0: none).");

  m.def(
      "residual_grad",
      [](std::uintptr_t vals, std::uintptr_t idx, std::uintptr_t scales, int64_t n, int64_t d, int block, int k,
         int bits, std::uintptr_t g, int g_dtype, int64_t mdim, int64_t g_stride, std::uintptr_t out,
         int64_t out_stride, std::uintptr_t workspace, int device, std::uintptr_t stream) {
        residual_grad_cuda(residual(vals, idx, scales, n, d, block, k, bits), ptr<const void>(g), g_dtype, mdim,
                           g_stride, ptr<float>(out), out_stride, ptr<float>(workspace), device, ptr<void>(stream));
      },
      py::arg("vals"), py::arg("idx"), py::arg("scales"), py::arg("n"), py::arg("d"), py::arg("block"),
      py::arg("k"), py::arg("bits"), py::arg("g"), py::arg("g_dtype"), py::arg("m"), py::arg("g_stride"),
      py::arg("out"), py::arg("out_stride"), py::arg("workspace"), py::arg("device"), py::arg("stream"),
      "out (m, d) float32 += G^T R (asynchronous).");

  m.def(
      "residual_scatter",
      [](std::uintptr_t vals, std::uintptr_t idx, std::uintptr_t scales, int64_t n, int64_t d, int block, int k,
         int bits, std::uintptr_t out, int64_t out_stride, int device, std::uintptr_t stream) {
        residual_scatter_cuda(residual(vals, idx, scales, n, d, block, k, bits), ptr<float>(out), out_stride, device,
                              ptr<void>(stream));
      },
      py::arg("vals"), py::arg("idx"), py::arg("scales"), py::arg("n"), py::arg("d"), py::arg("block"),
      py::arg("k"), py::arg("bits"), py::arg("out"), py::arg("out_stride"), py::arg("device"), py::arg("stream"),
      "out (n, d) float32 += R (asynchronous).");
}
