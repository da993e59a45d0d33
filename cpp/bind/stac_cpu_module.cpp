// pybind11 module thrifty._stac_cpu: binds the STAC-R CPU kernels. Arguments are plain integers (data
// pointers from tensor.data_ptr(), sizes, strides); no tensor library is linked. The GIL is released while
// a kernel runs. Invalid sizes raise ValueError (std::invalid_argument) naming the argument.
#include <pybind11/pybind11.h>

#include <cstdint>

#include "thrifty/stac_cpu.h"

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

PYBIND11_MODULE(_stac_cpu, m) {
  m.doc() = "STAC-R CPU kernels (compress, residual contraction, dequantize-scatter) over raw pointers.";
#if defined(__AVX2__)
  m.attr("simd") = "avx2";
#else
  m.attr("simd") = "generic";
#endif

  m.def(
      "compress",
      [](std::uintptr_t x, int x_dtype, int64_t n, int64_t d, int64_t x_stride, std::uintptr_t ut,
         std::uintptr_t xu, int64_t r, int coef, std::uintptr_t c, std::uintptr_t c_scale, int block, int k,
         int bits, bool stochastic, std::uint64_t seed, std::uintptr_t vals, std::uintptr_t idx,
         std::uintptr_t scales, int nthreads) {
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
        check_compress_params(p);
        py::gil_scoped_release nogil;
        return compress_cpu(p, nthreads);
      },
      py::arg("x"), py::arg("x_dtype"), py::arg("n"), py::arg("d"), py::arg("x_stride"), py::arg("ut"),
      py::arg("xu"), py::arg("r"), py::arg("coef"), py::arg("c"), py::arg("c_scale"), py::arg("block"),
      py::arg("k"), py::arg("bits"), py::arg("stochastic"), py::arg("seed"), py::arg("vals"), py::arg("idx"),
      py::arg("scales"), py::arg("nthreads"),
      "Quantize coefficients and pack the top-k residual; returns the count of non-finite X·U entries.");

  m.def(
      "residual_grad",
      [](std::uintptr_t vals, std::uintptr_t idx, std::uintptr_t scales, int64_t n, int64_t d, int block, int k,
         int bits, std::uintptr_t g, int g_dtype, int64_t mdim, int64_t g_stride, std::uintptr_t out,
         int64_t out_stride, int nthreads) {
        const ResidualParams p = residual(vals, idx, scales, n, d, block, k, bits);
        check_residual_params(p);
        py::gil_scoped_release nogil;
        residual_grad_cpu(p, ptr<const void>(g), g_dtype, mdim, g_stride, ptr<float>(out), out_stride, nthreads);
      },
      py::arg("vals"), py::arg("idx"), py::arg("scales"), py::arg("n"), py::arg("d"), py::arg("block"),
      py::arg("k"), py::arg("bits"), py::arg("g"), py::arg("g_dtype"), py::arg("m"), py::arg("g_stride"),
      py::arg("out"), py::arg("out_stride"), py::arg("nthreads"), "out (m, d) float32 += G^T R.");

  m.def(
      "residual_scatter",
      [](std::uintptr_t vals, std::uintptr_t idx, std::uintptr_t scales, int64_t n, int64_t d, int block, int k,
         int bits, std::uintptr_t out, int64_t out_stride, int nthreads) {
        const ResidualParams p = residual(vals, idx, scales, n, d, block, k, bits);
        check_residual_params(p);
        py::gil_scoped_release nogil;
        residual_scatter_cpu(p, ptr<float>(out), out_stride, nthreads);
      },
      py::arg("vals"), py::arg("idx"), py::arg("scales"), py::arg("n"), py::arg("d"), py::arg("block"),
      py::arg("k"), py::arg("bits"), py::arg("out"), py::arg("out_stride"), py::arg("nthreads"),
      "out (n, d) float32 += R.");
}
