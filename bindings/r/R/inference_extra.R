#' Two-block PLS-SVD test: do two blocks of variables covary?
#'
#' Symmetric two-block PLS (PLS-SVD, PLSC, plskit's PLS3): neither block is the outcome. On each
#' of \code{n_splits} balanced random splits both blocks are standardised with train moments, the
#' first singular pair (u, v) of the train cross-product is found and the split is scored by the
#' held-out correlation of the latent scores \code{cor(X_te u, Y_te v)}. The NB-asymptotic test
#' averages Fisher's z and applies the Nadeau-Bengio corrected t (one-sided); the NB-permutation
#' test permutes the rows of \code{y} against \code{x} with the splits fixed. \code{method =
#' "auto"} runs the NB-permutation test (the NB reference is conservative for two blocks; the
#' reason is in \code{gate$reasons}); \code{"nb"} runs only with \code{force = TRUE}. The gate looks
#' at \code{x} only. Identical to the Python \code{thrifty.inference.pls_svd_test} for the same
#' seed.
#'
#' @inheritParams subspace_test
#' @param x,y Numeric matrices (or data frames; \code{y} may be a vector) with the same n >= 6
#'   rows, no missing values, neither all constant.
#' @param ncomp Pairs reported in \code{x_weights} / \code{y_weights} (1 <= ncomp <= min(p, q));
#'   the test is of the first pair.
#' @param method \code{"auto"}, \code{"nb"} or \code{"nb-permutation"}.
#' @return An \code{"htest"} as \code{\link{subspace_test}} returns (\code{estimate} is the
#'   held-out latent correlation) with \code{x_weights} (p x ncomp) and \code{y_weights}
#'   (q x ncomp): both blocks' weights fitted on all rows (orthonormal columns, the largest entry of
#'   each x column positive), and \code{singular_values} (the covariances of the latent pairs).
#' @examples
#' set.seed(3)
#' z <- rnorm(200)
#' x <- matrix(rnorm(200 * 8), 200, 8); x[, 1] <- x[, 1] + z
#' y <- matrix(rnorm(200 * 3), 200, 3); y[, 2] <- y[, 2] + z
#' res <- pls_svd_test(x, y, n_perm = 199, seed = 1, threads = 1)
#' res$p.value
#' which.max(abs(res$y_weights[, 1]))
#' @export
pls_svd_test <- function(x, y, ncomp = 1L, method = c("auto", "nb", "nb-permutation"),
                         n_splits = 50L, n_perm = 1000L, splits = NULL, force = FALSE, seed = NULL,
                         threads = getOption("thrifty.threads", 2L), conf.level = 0.95) {
  dname <- paste(deparse1(substitute(x)), "and", deparse1(substitute(y)))
  xm <- .as_data_matrix(x, "x", min_rows = 6L)
  ym <- .as_data_matrix(y, "y", min_rows = 6L)
  n <- nrow(xm)
  if (nrow(ym) != n) stop(sprintf("y has %d rows, but x has %d", nrow(ym), n), call. = FALSE)
  k <- .count(ncomp, "ncomp", 1, min(ncol(xm), ncol(ym)))
  opts <- c(list(
    n_components = k, learner = 0L, method = .match(method, c("auto", "nb", "nb-permutation"), "method"),
    n_splits = .count(n_splits, "n_splits", 2), n_perm = .count(n_perm, "n_perm", 1), n_folds = 5,
    rotate = 0L, force = as.double(.flag(force, "force")), spca_n_features = 0, spls_keep = 0,
    threads = .threads(threads), seed = .seed(seed),
    confidence_level = .number(conf.level, "conf.level", 0, 1), ridge_alpha = 1, basis = NULL),
    .splits_arg(splits, n))
  r <- .Call(thrifty_r_pls_svd_test, xm, ym, opts)
  out <- .as_htest(r$test, opts, dname, n)
  out$method <- sub("subspace", "PLS-SVD", out$method)
  out$x_weights <- r$x_weights
  out$y_weights <- r$y_weights
  out$singular_values <- r$singular_values
  out
}

#' Choose the number of PLS1 components
#'
#' The CV curve: \code{n_folds}-fold cross-validation (folds drawn from \code{seed}); every fold
#' standardises its train rows, fits \code{k_max} components once and scores each k <= k_max on its
#' held-out rows by R2 = 1 - SSE/SST. \code{rule = "max"} picks the k of the largest mean R2;
#' \code{"one-se"} (the default, plskit's \code{r2_se}) the smallest k within one standard error of
#' it; \code{"sequence"} the \code{k_star} of \code{\link{component_tests}} (the fixed-sequence
#' test, family-wise error controlled; the CV curve is reported alongside). Identical to the Python
#' \code{thrifty.inference.select_n_components} for the same seed.
#'
#' @inheritParams subspace_test
#' @param k_max Largest k (at most min(n, p)).
#' @param rule \code{"one-se"}, \code{"max"} or \code{"sequence"}.
#' @param n_folds Number of folds (2..n).
#' @param spls_keep Use sparse PLS1 with this keep-count (1..p) instead of PLS1 (the CV curve only).
#' @param ... Passed to \code{\link{component_tests}} for \code{rule = "sequence"} (\code{alpha},
#'   \code{method}, \code{n_splits}, ...).
#' @return A list of class \code{"thrifty_n_components"}: \code{n_components} (the choice),
#'   \code{rule}, \code{k} (1..k_max), \code{cv_r2} and \code{cv_se} (mean held-out R2 per k and its
#'   standard error; -Inf where a fold had fewer components), \code{fold_r2} (k_max x n_folds),
#'   \code{sequence} (the \code{component_tests} result for \code{"sequence"}, else \code{NULL}) and
#'   \code{seed}.
#' @examples
#' set.seed(4)
#' t1 <- rnorm(300) * 4; t2 <- rnorm(300) * 2
#' P <- qr.Q(qr(matrix(rnorm(20 * 2), 20, 2)))
#' x <- cbind(t1, t2) %*% t(P) + 0.05 * matrix(rnorm(300 * 20), 300, 20)
#' y <- 0.25 * t1 + 0.5 * t2 + 0.5 * rnorm(300)
#' select_n_components(x, y, k_max = 6, seed = 1, threads = 1)$n_components
#' @export
select_n_components <- function(x, y, k_max = 10L, rule = c("one-se", "max", "sequence"),
                                n_folds = 5L, spls_keep = NULL, seed = NULL,
                                threads = getOption("thrifty.threads", 2L), ...) {
  xm <- .as_data_matrix(x, "x")
  n <- nrow(xm)
  p <- ncol(xm)
  yv <- .as_vector(y, "y", n)
  if (diff(range(yv)) == 0) stop("y is constant (zero variance); there is nothing to predict", call. = FALSE)
  kmax <- .count(k_max, "k_max", 1, min(n, p))
  folds <- .count(n_folds, "n_folds", 2, n)
  rule <- c("one-se", "max", "sequence")[.match(rule, c("one-se", "max", "sequence"), "rule") + 1L]
  if (length(list(...)) && rule != "sequence") {
    stop(sprintf("options %s are for rule = \"sequence\" only", paste(names(list(...)), collapse = ", ")),
         call. = FALSE)
  }
  keep <- if (is.null(spls_keep)) 0 else .count(spls_keep, "spls_keep", 1, p)
  seed <- .seed(seed)
  threads <- .threads(threads)
  curve <- .Call(thrifty_r_select_n_components, xm, yv, kmax, keep, folds, seed, threads)
  sequence <- NULL
  if (rule == "sequence") {
    sequence <- component_tests(xm, yv, max_components = kmax, seed = seed,
                                threads = if (threads == 0) NULL else threads, ...)
    choice <- sequence$k_star
  } else {
    choice <- if (rule == "max") curve$choice_max else curve$choice_one_se
    if (choice == 0L) {
      stop("no number of components could be scored by cross-validation (too few rows per fold)", call. = FALSE)
    }
  }
  structure(list(n_components = as.integer(choice), rule = rule, k = seq_len(kmax), cv_r2 = curve$mean,
                 cv_se = curve$se, fold_r2 = curve$fold_r2, sequence = sequence, seed = seed),
            class = "thrifty_n_components")
}

#' @export
print.thrifty_n_components <- function(x, ...) {
  cat(sprintf("Number of PLS1 components (rule \"%s\", seed %s): %d\n", x$rule,
              format(x$seed, scientific = FALSE), x$n_components))
  print(data.frame(k = x$k, cv_r2 = x$cv_r2, cv_se = x$cv_se), row.names = FALSE)
  invisible(x)
}

#' Resampling stability of the varimax axes of a PLS1 fit
#'
#' The subspace test is rotation invariant, so a p-value belongs to the subspace, not to an axis;
#' this diagnostic says whether the individual varimax axes replicate. The PLS1 weights of
#' \code{ncomp} components fitted on all rows (standardised) are varimax-rotated (Kaiser) into
#' the reference axes. Every resample (a bootstrap of n rows with replacement, or with
#' \code{resample = "subsample"} an m-out-of-n subsample of \code{m = ceiling(n^subsample_rate)}
#' rows without replacement; each with its own standardisation) is refitted and rotated, its axes
#' are matched to the reference by the signed permutation maximising the summed |Tucker
#' congruence|, and the congruence of each matched axis is recorded; the unrotated weights are
#' matched the same way. Identical to the Python \code{thrifty.inference.rotation_stability} for
#' the same seed.
#'
#' @inheritParams subspace_test
#' @param ncomp Number of axes, 2 <= ncomp <= min(8, p, n - 2).
#' @param n_boot Number of resamples.
#' @param conf.level Level of the percentile interval per axis.
#' @param resample \code{"bootstrap"} (n rows with replacement) or \code{"subsample"} (m rows
#'   without replacement).
#' @param subsample_rate Subsample size exponent in (0, 1], with ncomp + 2 <= m <= n (used only
#'   with \code{resample = "subsample"}).
#' @return A list of class \code{"thrifty_rotation_stability"}: \code{axes} and \code{weights}
#'   (p x ncomp: the reference varimax axes and the unrotated weights), \code{congruence} and
#'   \code{congruence_unrotated} (n_boot x ncomp; NA rows where a resample's fit degenerated),
#'   \code{mean} and \code{mean_unrotated} (per axis), \code{ci} (ncomp x 2 percentile interval),
#'   \code{share_fair} (share of resamples with congruence >= 0.85), \code{conf.level},
#'   \code{n_boot}, \code{resample}, \code{m} (rows per resample), \code{seed}.
#' @examples
#' set.seed(5)
#' x <- matrix(rnorm(300 * 12), 300, 12)
#' y <- x[, 1] + x[, 7] + rnorm(300, sd = 0.5)
#' rs <- rotation_stability(x, y, 2, n_boot = 200, seed = 1, threads = 1)
#' rs$mean
#' @export
rotation_stability <- function(x, y, ncomp, n_boot = 1000L, conf.level = 0.95, seed = NULL,
                               threads = getOption("thrifty.threads", 2L), resample = c("bootstrap", "subsample"),
                               subsample_rate = 0.7) {
  xm <- .as_data_matrix(x, "x")
  n <- nrow(xm)
  yv <- .as_vector(y, "y", n)
  if (diff(range(yv)) == 0) stop("y is constant (zero variance); there is nothing to predict", call. = FALSE)
  k <- .count(ncomp, "ncomp", 2, min(8, ncol(xm), n - 2))
  b <- .count(n_boot, "n_boot", 1)
  level <- .number(conf.level, "conf.level", 0, 1)
  if (identical(resample, c("bootstrap", "subsample"))) resample <- "bootstrap"
  if (!is.character(resample) || length(resample) != 1L || !resample %in% c("bootstrap", "subsample")) {
    stop('resample must be "bootstrap" or "subsample"', call. = FALSE)
  }
  if (!is.numeric(subsample_rate) || length(subsample_rate) != 1L || !is.finite(subsample_rate) ||
      subsample_rate <= 0 || subsample_rate > 1) {
    stop("subsample_rate must be a number in (0, 1]", call. = FALSE)
  }
  m <- n
  if (resample == "subsample") {
    m <- ceiling(n^subsample_rate)
    if (m < k + 2 || m > n) {
      stop(sprintf("subsample_rate = %g gives m = %d rows, outside [ncomp + 2, n] = [%d, %d]", subsample_rate, m,
                   k + 2, n), call. = FALSE)
    }
  }
  seed <- .seed(seed)
  r <- .Call(thrifty_r_rotation_stability, xm, yv, k, b, if (resample == "subsample") m else 0, seed,
             .threads(threads))
  rot <- r$congruence
  tail <- (1 - level) / 2
  structure(list(axes = r$axes, weights = r$weights, congruence = rot,
                 congruence_unrotated = r$congruence_unrotated,
                 mean = colMeans(rot, na.rm = TRUE), mean_unrotated = colMeans(r$congruence_unrotated, na.rm = TRUE),
                 ci = t(apply(rot, 2, stats::quantile, probs = c(tail, 1 - tail), na.rm = TRUE, names = FALSE)),
                 share_fair = colMeans(!is.na(rot) & rot >= 0.85), conf.level = level, n_boot = as.integer(b),
                 resample = resample, m = as.integer(m), seed = seed),
            class = "thrifty_rotation_stability")
}

#' @export
print.thrifty_rotation_stability <- function(x, ...) {
  cat(sprintf("Rotation stability of %d varimax axes (%d %s resamples of %d rows, seed %s)\n", ncol(x$axes),
              x$n_boot, x$resample, x$m, format(x$seed, scientific = FALSE)))
  print(data.frame(axis = seq_along(x$mean), mean = x$mean, ci_low = x$ci[, 1], ci_high = x$ci[, 2],
                   share_fair = x$share_fair, mean_unrotated = x$mean_unrotated), row.names = FALSE)
  invisible(x)
}

#' Subsampling confidence intervals for PLS1's coefficients and per-variable leverage
#'
#' Both quantities are rotation invariant (the coefficients are the OLS refit on the k scores;
#' the leverage \eqn{h_j = \sum_a W_{ja}^2} is the diagonal of the projection on the weights'
#' span), so no alignment of components between resamples is needed. m-out-of-n subsampling
#' (Politis and Romano): \code{m = min(n - 1, ceiling(n^m_rate))} rows without replacement per
#' replicate; the root \eqn{\sqrt{m n / (n - m)}(\theta_m - \theta_n)} (finite-population corrected) estimates the law of
#' \eqn{\sqrt{n}(\theta_n - \theta)}, giving the symmetric interval
#' \eqn{\theta_n \pm q(|root|) / \sqrt{n}} and the subsampling z \eqn{\theta_n / (sd(root) / \sqrt{n})}.
#' The replicates are identical to those of the Python
#' \code{thrifty.inference.coefficient_intervals} for the same seed.
#'
#' @inheritParams subspace_test
#' @param ncomp Number of PLS1 components.
#' @param n_boot Subsamples.
#' @param m_rate Subsample size exponent in (0, 1).
#' @param conf.level Level of the intervals.
#' @return A list of class \code{"thrifty_coefficient_intervals"}: \code{coef} and \code{leverage}
#'   (p, on all rows), \code{coef_ci} and \code{leverage_ci} (p x 2), \code{coef_z} (p),
#'   \code{m}, \code{n_boot}, \code{n_failed} (degenerate subsamples, left out), \code{conf.level},
#'   \code{seed}.
#' @examples
#' set.seed(6)
#' x <- matrix(rnorm(400 * 5), 400, 5)
#' y <- 2 * x[, 1] + rnorm(400)
#' ci <- coefficient_intervals(x, y, n_boot = 300, seed = 1, threads = 1)
#' ci$coef_ci[1, ]
#' @export
coefficient_intervals <- function(x, y, ncomp = 1L, n_boot = 1000L, m_rate = 0.7, conf.level = 0.95,
                                  weights = NULL, seed = NULL, threads = getOption("thrifty.threads", 2L)) {
  xm <- .as_data_matrix(x, "x")
  n <- nrow(xm)
  p <- ncol(xm)
  yv <- .as_vector(y, "y", n)
  if (diff(range(yv)) == 0) stop("y is constant (zero variance); there is nothing to predict", call. = FALSE)
  w <- .as_weights(weights, n)
  k <- .count(ncomp, "ncomp", 1)
  b <- .count(n_boot, "n_boot", 1)
  rate <- .number(m_rate, "m_rate", 0, 1)
  level <- .number(conf.level, "conf.level", 0, 1)
  m <- min(n - 1, ceiling(n^rate))
  if (m < k + 2 || k > min(m, p)) {
    stop(sprintf("m_rate = %g gives subsamples of %d rows, too few for ncomp = %d", rate, m, k), call. = FALSE)
  }
  seed <- .seed(seed)
  r <- .Call(thrifty_r_subsample_replicates, xm, yv, w, k, b, m, seed, .threads(threads))
  ok <- rowSums(!is.finite(r$coef_sub)) == 0
  if (sum(ok) < max(2, b %/% 2)) {
    stop(sprintf("%d of %d subsamples gave a degenerate fit; increase m_rate", b - sum(ok), b), call. = FALSE)
  }
  root_interval <- function(full, subs) {
    root <- sqrt(m * n / (n - m)) * sweep(subs[ok, , drop = FALSE], 2, full)
    half <- apply(abs(root), 2, stats::quantile, probs = level, names = FALSE) / sqrt(n)
    list(ci = cbind(full - half, full + half), se = apply(root, 2, stats::sd) / sqrt(n))
  }
  cc <- root_interval(r$coef, r$coef_sub)
  lc <- root_interval(r$leverage, r$leverage_sub)
  structure(list(coef = r$coef, leverage = r$leverage, coef_ci = cc$ci, leverage_ci = lc$ci,
                 coef_z = ifelse(!is.na(cc$se) & cc$se > 0, r$coef / cc$se, NaN), m = as.integer(m), n_boot = as.integer(b),
                 n_failed = as.integer(b - sum(ok)), conf.level = level, seed = seed),
            class = "thrifty_coefficient_intervals")
}

#' @export
print.thrifty_coefficient_intervals <- function(x, ...) {
  cat(sprintf("PLS1 subsampling intervals (%d subsamples of %d rows, level %g, seed %s)\n", x$n_boot, x$m,
              x$conf.level, format(x$seed, scientific = FALSE)))
  print(data.frame(variable = seq_along(x$coef), coef = x$coef, ci_low = x$coef_ci[, 1], ci_high = x$coef_ci[, 2],
                   z = x$coef_z, leverage = x$leverage), row.names = FALSE)
  invisible(x)
}
