#' Exact samples of a determinantal point process
#'
#' \describe{
#'   \item{\code{"projection"}}{The projection DPP onto the column space of \code{features}
#'     (orthonormalised first, unless \code{orthonormal = TRUE} says the columns already are):
#'     every sample has exactly rank items. As Python's \code{ProjectionDPP.from_features}
#'     (or \code{ProjectionDPP(U)}) \code{$sample_many}.}
#'   \item{\code{"lensemble"}}{The L-ensemble P(S) proportional to det(L_S), from \code{L} (n x n
#'     symmetric positive semi-definite) or from \code{features} (L = FF'); sample sizes are random.
#'     As Python's \code{LEnsemble(...)$sample_many}.}
#'   \item{\code{"kdpp"}}{The k-DPP (the L-ensemble restricted to |S| = k). As Python's
#'     \code{LEnsemble(...)$sample_k_many}.}
#' }
#' Sample s draws from its own random stream of \code{seed}: identical on any number of threads,
#' and identical to the Python package for the same seed.
#'
#' @param features Numeric matrix n x d (items in rows), or \code{NULL} when \code{L} is given.
#' @param n_samples Number of samples.
#' @param kind \code{"projection"}, \code{"lensemble"} or \code{"kdpp"}.
#' @param L Optional n x n kernel matrix (L-ensembles and k-DPPs).
#' @param k Sample size of the k-DPP.
#' @param method Projection sampler: \code{"accept_reject"} (default) or \code{"chain"}.
#' @param orthonormal Projection DPP: \code{TRUE} when the columns of \code{features} are already
#'   orthonormal (checked to 1e-6).
#' @param seed Seed (\code{NULL}: drawn from R's generator). Recorded as attribute \code{"seed"}.
#' @param threads Number of threads (\code{NULL}: all cores).
#' @return A list of class \code{"thrifty_dpp_samples"}: \code{samples} (projection and k-DPP:
#'   an integer matrix with one sample of 1-based row indices per row; L-ensemble: a list of integer
#'   vectors), \code{seed}, \code{inclusion} (the inclusion probabilities P(i in S), for projection
#'   DPPs and L-ensembles; \code{NULL} for k-DPPs) and \code{kind}.
#' @examples
#' f <- matrix(rnorm(500 * 5), 500, 5)
#' dpp_sample(f, n_samples = 3, seed = 1, threads = 1)
#' dpp_sample(f, n_samples = 2, kind = "kdpp", k = 3, seed = 1, threads = 1)
#' @export
dpp_sample <- function(features = NULL, n_samples = 1L, kind = c("projection", "lensemble", "kdpp"),
                       L = NULL, k = NULL, method = c("accept_reject", "chain"), orthonormal = FALSE,
                       seed = NULL, threads = getOption("thrifty.threads", 2L)) {
  kind <- c("projection", "lensemble", "kdpp")[.match(kind, c("projection", "lensemble", "kdpp"), "kind") + 1L]
  count <- .count(n_samples, "n_samples", 1)
  nthreads <- .threads(threads)
  if (kind == "projection") {
    if (is.null(features)) stop("features must be given for a projection DPP", call. = FALSE)
    f <- .as_data_matrix(features, "features")
    if (ncol(f) > nrow(f)) {
      stop(sprintf("features must have at most as many columns as rows, got %d x %d", nrow(f), ncol(f)),
           call. = FALSE)
    }
    m <- .match(method, c("accept_reject", "chain"), "method")
    u <- if (.flag(orthonormal, "orthonormal")) f else .Call(thrifty_r_orthonormalize, f, 0)
    seed <- .seed(seed)
    r <- .Call(thrifty_r_projection_sample, u, as.integer(orthonormal), m, count, seed, nthreads)
    return(.samples(r$samples, seed, r$inclusion, kind))
  }
  if (is.null(L) == is.null(features)) stop("give exactly one of L and features", call. = FALSE)
  lm <- NULL
  fm <- NULL
  if (!is.null(L)) {
    lm <- .as_data_matrix(L, "L")
    if (nrow(lm) != ncol(lm)) stop(sprintf("L must be square, got %d x %d", nrow(lm), ncol(lm)), call. = FALSE)
  } else {
    fm <- .as_data_matrix(features, "features")
  }
  if (kind == "lensemble") {
    seed <- .seed(seed)
    r <- .Call(thrifty_r_lensemble_sample, lm, fm, count, seed, nthreads)
    return(.samples(r$samples, seed, r$inclusion, kind))
  }
  if (is.null(k)) stop("k must be given for a k-DPP", call. = FALSE)
  kk <- .count(k, "k", 1)
  seed <- .seed(seed)
  .samples(.Call(thrifty_r_kdpp_sample, lm, fm, kk, count, seed, nthreads), seed, NULL, kind)
}

.samples <- function(samples, seed, inclusion, kind) {
  structure(list(samples = samples, seed = seed, inclusion = inclusion, kind = kind),
            class = "thrifty_dpp_samples")
}

#' @export
print.thrifty_dpp_samples <- function(x, ...) {
  n <- if (is.list(x$samples)) length(x$samples) else nrow(x$samples)
  cat(sprintf("%d %s DPP sample(s), seed %s\n", n, x$kind, format(x$seed, scientific = FALSE)))
  print(x$samples)
  invisible(x)
}

#' Weighted DPP coreset of a data set
#'
#' A discrete DPP of rank m is built on the rows of \code{x} from a continuous kernel (Haar
#' wavelets on a k-d box partition, the Jacobi/Legendre orthogonal-polynomial ensemble, or
#' periodised Daubechies scaling functions), one exact sample S is drawn, and every chosen point
#' gets the weight 1/P(i in S): \code{sum(weights * f(x[indices, ]))} estimates
#' \code{sum(f(x))} without bias. With the Haar kernel the weights integrate constants exactly.
#' Identical to Python's \code{thrifty.dpp.Coreset(X, m, ..., random_state = seed)}.
#'
#' @param x Numeric matrix or data frame (n x d).
#' @param m Coreset size (Haar with \code{split = "volume"} returns one point per non-empty box,
#'   so possibly fewer).
#' @param kernel \code{"haar"}, \code{"ope"} or \code{"daubechies"} (m a power of two).
#' @param density Estimate of the data density at the points: \code{NULL} or \code{"uniform"},
#'   \code{"histogram"} (Haar only: the histogram on the Haar cells), or a positive numeric vector.
#' @param split Haar: \code{"volume"} (equal-volume boxes) or \code{"quantile"} (equal counts).
#' @param order Daubechies order, 1 to 4.
#' @param jacobi Jacobi exponents (a, b), both > -1; (0, 0) is Legendre.
#' @param domain Optional d x 2 matrix (low, high per column of x) mapped onto the kernel's domain;
#'   default the data's bounding box.
#' @param weights \code{"unbiased"} or \code{"self_normalized"} (rescaled to sum to n).
#' @param seed Seed (\code{NULL}: drawn from R's generator).
#' @return A list of class \code{"thrifty_coreset"}: \code{indices} (1-based rows), \code{weights},
#'   \code{inclusion} (P(i in S) for every row), \code{seed}.
#' @examples
#' x <- as.matrix(faithful)
#' cs <- dpp_coreset(x, 16, seed = 1)
#' c(estimate = sum(cs$weights * x[cs$indices, "eruptions"]), exact = sum(x[, "eruptions"]))
#' @export
dpp_coreset <- function(x, m, kernel = c("haar", "ope", "daubechies"), density = NULL,
                        split = c("volume", "quantile"), order = 2L, jacobi = c(0, 0),
                        domain = NULL, weights = c("unbiased", "self_normalized"), seed = NULL) {
  xm <- .as_data_matrix(x, "x")
  n <- nrow(xm)
  kern <- .match(kernel, c("haar", "ope", "daubechies"), "kernel")
  mm <- .count(m, "m", 1, n)
  sp <- .match(split, c("volume", "quantile"), "split")
  wmode <- .match(weights, c("unbiased", "self_normalized"), "weights")
  dens <- NULL
  if (is.character(density)) {
    d <- .match(density, c("uniform", "histogram"), "density")
    if (d == 1L && kern != 0L) {
      stop('density = "histogram" is available for the Haar kernel only; pass density values instead',
           call. = FALSE)
    }
  } else if (!is.null(density)) {
    dens <- .as_vector(density, "density", n)
    if (any(dens <= 0)) stop("density values must be positive", call. = FALSE)
  }
  if (!is.numeric(jacobi) || length(jacobi) != 2L || any(!is.finite(jacobi)) || any(jacobi <= -1)) {
    stop("jacobi must be two numbers > -1", call. = FALSE)
  }
  dom <- NULL
  if (!is.null(domain)) {
    dom <- .as_data_matrix(domain, "domain")
    if (nrow(dom) != ncol(xm) || ncol(dom) != 2L) {
      stop(sprintf("domain must be a %d x 2 matrix", ncol(xm)), call. = FALSE)
    }
  }
  seed <- .seed(seed)
  r <- .Call(thrifty_r_coreset, xm, mm, kern, sp, .count(order, "order", 1, 4), as.double(jacobi),
             dens, dom, wmode == 1L, seed)
  structure(c(r, list(seed = seed, kernel = c("haar", "ope", "daubechies")[kern + 1L])),
            class = "thrifty_coreset")
}

#' @export
print.thrifty_coreset <- function(x, ...) {
  cat(sprintf("thrifty DPP coreset (%s kernel): %d of %d points, weights sum %.6g, seed %s\n",
              x$kernel, length(x$indices), length(x$inclusion), sum(x$weights),
              format(x$seed, scientific = FALSE)))
  invisible(x)
}

.selection <- function(r) {
  # greedy_map's log det comes from the core (exact where extreme features' variances overflow)
  log_det <- if (is.null(r$log_det)) sum(log(r$conditional_variances)) else r$log_det
  structure(list(indices = r$indices, log_det = log_det,
                 conditional_variances = r$conditional_variances, gains = r$gains),
            class = "thrifty_selection")
}

#' Greedy log-det selection: maximum entropy, DPP MAP and mutual information
#'
#' \code{select_entropy} adds, k times, the item with the largest conditional variance given the
#' chosen ones (greedy maximum entropy; stops early at the numerical rank). \code{greedy_map} is
#' the same greedy DPP MAP for L = FF' from the features, without forming L.
#' \code{select_mutual_information} maximises I(A; V \\ A) greedily (Krause, Singh & Guestrin).
#' Identical to Python's \code{thrifty.dpp.select_entropy}, \code{greedy_map} and
#' \code{select_mutual_information}.
#'
#' @param cov Symmetric positive semi-definite matrix (n x n).
#' @param k Number of items (1 <= k <= n).
#' @param tol Relative rank tolerance.
#' @param check \code{select_entropy}: \code{"read"} validates the entries the selection reads,
#'   \code{"full"} the whole matrix, \code{"skip"} nothing. \code{select_mutual_information}:
#'   \code{TRUE} validates the whole matrix.
#' @param features Numeric matrix n x d (\code{greedy_map}).
#' @param noise Nugget added to the diagonal (default 1e-6 times the mean diagonal).
#' @return A list of class \code{"thrifty_selection"}: \code{indices} (1-based, in order of
#'   selection), \code{log_det}, \code{conditional_variances}, and \code{gains} for mutual information.
#' @examples
#' z <- matrix(rnorm(50 * 8), 50, 8)
#' select_entropy(tcrossprod(z), 3)$indices
#' greedy_map(z, 3)$indices
#' select_mutual_information(tcrossprod(z) + diag(50), 3)$indices
#' @export
select_entropy <- function(cov, k, tol = 1e-10, check = c("read", "full", "skip")) {
  cm <- .square(cov)
  ck <- c(1L, 2L, 0L)[.match(check, c("read", "full", "skip"), "check") + 1L]
  kk <- .count(k, "k", 1, nrow(cm))
  .selection(.Call(thrifty_r_select_entropy, cm, kk, .number(tol, "tol", 0, Inf), ck))
}

#' @rdname select_entropy
#' @export
greedy_map <- function(features, k, tol = 1e-10) {
  f <- .as_data_matrix(features, "features")
  kk <- .count(k, "k", 1, nrow(f))
  .selection(.Call(thrifty_r_greedy_map, f, kk, .number(tol, "tol", 0, Inf)))
}

#' @rdname select_entropy
#' @export
select_mutual_information <- function(cov, k, noise = NULL, check = TRUE) {
  cm <- .square(cov)
  kk <- .count(k, "k", 1, nrow(cm))
  nz <- if (is.null(noise)) 0 else .number(noise, "noise", 0, Inf)
  .selection(.Call(thrifty_r_select_mi, cm, kk, nz, .flag(check, "check")))
}

.square <- function(cov) {
  if (!is.matrix(cov) || !is.numeric(cov)) stop("cov must be a numeric matrix", call. = FALSE)
  if (nrow(cov) != ncol(cov) || nrow(cov) == 0L) {
    stop(sprintf("cov must be square and non-empty, got %d x %d", nrow(cov), ncol(cov)), call. = FALSE)
  }
  storage.mode(cov) <- "double"
  cov
}

#' @export
print.thrifty_selection <- function(x, ...) {
  cat(sprintf("thrifty greedy selection of %d item(s), log det %.6g\n", length(x$indices), x$log_det))
  print(x$indices)
  invisible(x)
}
