#' thrifty: k-means, supervised-subspace tests and DPPs over a shared Rust core
#'
#' The R face of thrifty. Every function calls the Rust core through its stable C ABI
#' (\code{thrifty.h}); for a fixed seed the results are identical to those of the Python package.
#' Main functions: \code{\link{hartigan_kmeans}}, \code{\link{subspace_test}},
#' \code{\link{component_tests}}, \code{\link{dpp_sample}}, \code{\link{dpp_coreset}},
#' \code{\link{select_entropy}}. The default thread count is \code{getOption("thrifty.threads", 2)}
#' (\code{NULL} for all cores); results never depend on it.
#'
#' @keywords internal
#' @useDynLib thrifty, .registration = TRUE
#' @importFrom stats fitted predict
"_PACKAGE"
