.methods <- c("auto", "nb", "nb-permutation", "cv-permutation-q2", "permutation-score", "jackknife")
.method_names <- c("", "Held-out subspace test (NB-corrected t on Fisher z)",
                   "Held-out subspace test (NB permutation)", "CV permutation test (pooled Q2)",
                   "CV permutation test (mean fold R2)", "Jackknife test of PLS coefficients")

.splits_arg <- function(splits, n) {
  if (is.null(splits)) return(list(train_indices = NULL, train_offsets = NULL))
  if (!is.list(splits) || length(splits) < 2L) {
    stop("splits must be a list of at least 2 integer vectors of train rows (1-based)", call. = FALSE)
  }
  for (j in seq_along(splits)) {
    s <- splits[[j]]
    if (!is.numeric(s) || length(s) == 0L || anyNA(s) || any(s != round(s))) {
      stop(sprintf("splits[[%d]] must be a non-empty vector of whole row numbers", j), call. = FALSE)
    }
    if (any(s < 1 | s > n)) stop(sprintf("splits[[%d]] has rows outside 1..%d", j, n), call. = FALSE)
    if (anyDuplicated(s)) stop(sprintf("splits[[%d]] repeats a row", j), call. = FALSE)
    if (n - length(s) < 3L) {
      stop(sprintf("splits[[%d]] leaves %d test rows; at least 3 are needed", j, n - length(s)),
           call. = FALSE)
    }
  }
  list(train_indices = as.double(unlist(splits)) - 1,
       train_offsets = as.double(c(0, cumsum(lengths(splits)))))
}

# The core's words for a route (the C ABI's thrifty_last_warning / thrifty_last_gate_reasons):
# its warning, or NULL, and the gate's reasons as a character vector.
.route_warning <- function(notes) if (nzchar(notes$warning)) notes$warning else NULL
.route_reasons <- function(notes) if (nzchar(notes$reasons)) strsplit(notes$reasons, "\n", fixed = TRUE)[[1]] else character(0)

# spls_keep as the C ABI's keep-count: 0 for NULL or "cv" (the cross-validated keep-count).
.spls_keep <- function(spls_keep, is_spls, p) {
  if (!is_spls) {
    if (!is.null(spls_keep)) stop('spls_keep is only used with learner = "spls"', call. = FALSE)
    return(0)
  }
  if (is.null(spls_keep) || identical(spls_keep, "cv")) return(0)
  .count(spls_keep, "spls_keep", 1, p)
}

#' Held-out test of a supervised subspace (PLS, supervised PCA, ridge probe or a fixed basis)
#'
#' Tests whether \code{ncomp} directions learned from \code{x} predict \code{y} on held-out data.
#' On each of \code{n_splits} balanced random splits the learner fits its directions on the train
#' part (x standardised with train moments), y is refitted on the train scores by OLS, the test
#' part is predicted and scored by the Pearson r. The default NB test averages Fisher's z over the
#' splits and uses the Nadeau-Bengio corrected t with J - 1 degrees of freedom (one-sided); a
#' pre-run gate reroutes it to the permutation test (same splits, y permuted \code{n_perm} times)
#' when the asymptotics are not trusted (effective n < 25, stable rank < 3 or at most 4 columns),
#' with a warning, unless \code{force = TRUE}. As in Python, \code{method = "auto"} also runs the
#' permutation test, silently, where the NB test is not calibrated: other learners than PLS, PLS
#' with \code{ncomp} > 1 or a multi-column y, effective n < 60, stable rank in [3, 8)
#' (\code{method = "nb"} warns then). Baselines: pooled K-fold Q2 or mean fold R2 with
#' permuted y, and the jackknife of the PLS coefficients (R \code{pls::jack.test}).
#'
#' For the same \code{seed} the p-value, the per-split correlations and the splits are identical
#' to those of the Python function \code{thrifty.inference.subspace_test(..., random_state = seed)}.
#'
#' @param x Numeric matrix or data frame (n x p), no missing values.
#' @param y Numeric response of length n (not constant), or an n x m matrix: then the learner is
#'   PLS2 (\code{learner = "pls"}, methods \code{"auto"}, \code{"nb"}, \code{"nb-permutation"}):
#'   the directions are fitted to all columns and a split's r pools the columns.
#' @param ncomp Number of directions k (1 <= k <= p, n >= k + 5).
#' @param learner \code{"pls"}, \code{"spca"}, \code{"ridge"} (one direction), \code{"spls"}
#'   (sparse PLS1: every direction loads on \code{spls_keep} variables; \code{method = "auto"} runs
#'   the NB-permutation test), or a numeric p x k matrix: a fixed basis applied to x centred by the
#'   train mean.
#' @param method One of \code{"auto"}, \code{"nb"}, \code{"nb-permutation"},
#'   \code{"cv-permutation-q2"}, \code{"permutation-score"}, \code{"jackknife"}.
#' @param n_splits Number of random splits J (>= 2); ignored when \code{splits} is given.
#' @param n_perm Number of permutations of the permutation methods.
#' @param splits Optional list of integer vectors: the train rows (1-based) of every split.
#' @param weights Optional non-negative case weights.
#' @param rotate \code{"none"} or \code{"varimax"} (rotates the learned basis; r and p unchanged).
#' @param force Run the NB test even when the gate would reroute it.
#' @param seed Seed of the splits, permutations and folds (\code{NULL}: drawn from R's generator).
#' @param threads Number of threads (\code{NULL}: all cores). Results do not depend on it.
#' @param conf.level Level of the Wald interval on the correlation scale.
#' @param n_folds Folds of the CV baselines, segments of the jackknife.
#' @param ridge_alpha Ridge penalty of the ridge probe (standardised units).
#' @param spca_n_features Features kept by supervised PCA (default min(p, max(5k, ceiling(p/10)))).
#' @param spls_keep \code{learner = "spls"} only: variables every direction keeps (1..p), or
#'   \code{NULL} / \code{"cv"} (default) for the keep-count chosen by 5-fold CV (one-SE rule) on
#'   every train part and permutation, so the choice never sees held-out rows.
#' @return An object of class \code{"htest"}: \code{statistic} (the NB t; the CV score; the largest
#'   |t| for the jackknife), \code{parameter} (degrees of freedom), \code{p.value},
#'   \code{conf.int} and \code{estimate} (the held-out correlation tanh(mean z)), \code{method},
#'   \code{alternative = "greater"}, \code{data.name}; and \code{r} (per-split correlations),
#'   \code{null.distribution}, \code{seed}, \code{rho_hat}, \code{gate} and \code{splits} (the
#'   train rows used, 1-based); \code{gate$reasons} holds the core's reasons for a reroute. With
#'   \code{learner = "spls"}, \code{basis} is the sparse p x k weight matrix fitted on all rows
#'   (the selected variables are its non-zero rows) and \code{spls_keep} the keep-count it used.
#'   \code{print} and \code{broom::tidy} work as for any \code{htest}.
#' @examples
#' set.seed(1)
#' x <- matrix(rnorm(200 * 20), 200, 20)
#' y <- x[, 1] + rnorm(200)
#' subspace_test(x, y, seed = 1, threads = 1)
#' sp <- subspace_test(x, y, learner = "spls", spls_keep = 2, n_perm = 99, seed = 1, threads = 1)
#' which(sp$basis[, 1] != 0) # the selected variables
#' @export
subspace_test <- function(x, y, ncomp = 1L, learner = "pls",
                          method = c("auto", "nb", "nb-permutation", "cv-permutation-q2",
                                     "permutation-score", "jackknife"),
                          n_splits = 50L, n_perm = 1000L, splits = NULL, weights = NULL,
                          rotate = c("none", "varimax"), force = FALSE, seed = NULL,
                          threads = getOption("thrifty.threads", 2L), conf.level = 0.95,
                          n_folds = 5L, ridge_alpha = 1, spca_n_features = NULL, spls_keep = NULL) {
  dname <- paste(deparse1(substitute(x)), "and", deparse1(substitute(y)))
  xm <- .as_data_matrix(x, "x")
  n <- nrow(xm)
  if ((is.matrix(y) || is.data.frame(y)) && NCOL(y) > 1L) {
    yv <- .as_data_matrix(y, "y")
    if (nrow(yv) != n) stop(sprintf("y has %d rows, x has %d", nrow(yv), n), call. = FALSE)
    if (all(apply(yv, 2, function(v) diff(range(v)) == 0))) {
      stop("every column of y is constant (zero variance); there is nothing to predict", call. = FALSE)
    }
  } else {
    yv <- .as_vector(y, "y", n)
    if (diff(range(yv)) == 0) stop("y is constant (zero variance); there is nothing to predict", call. = FALSE)
  }
  w <- .as_weights(weights, n)
  m <- .match(method, .methods, "method")
  basis <- NULL
  if (is.character(learner)) {
    # the C ABI's THRIFTY_LEARNER_* codes (3 is a basis matrix)
    lr <- c(0L, 1L, 2L, 4L)[.match(learner, c("pls", "spca", "ridge", "spls"), "learner") + 1L]
  } else {
    basis <- .as_data_matrix(learner, "learner")
    if (nrow(basis) != ncol(xm)) {
      stop(sprintf("a basis learner must have ncol(x) = %d rows, got %d", ncol(xm), nrow(basis)),
           call. = FALSE)
    }
    lr <- 3L
  }
  opts <- c(list(
    n_components = .count(ncomp, "ncomp", 1), learner = lr, method = m,
    n_splits = .count(n_splits, "n_splits", 2), n_perm = .count(n_perm, "n_perm", 1),
    n_folds = .count(n_folds, "n_folds", 2), rotate = .match(rotate, c("none", "varimax"), "rotate"),
    force = as.double(.flag(force, "force")),
    spca_n_features = if (is.null(spca_n_features)) 0 else .count(spca_n_features, "spca_n_features", 1),
    spls_keep = .spls_keep(spls_keep, identical(lr, 4L), ncol(xm)),
    threads = .threads(threads), seed = .seed(seed),
    confidence_level = .number(conf.level, "conf.level", 0, 1),
    ridge_alpha = .number(ridge_alpha, "ridge_alpha", 0, Inf), basis = basis),
    .splits_arg(splits, n))
  r <- .Call(thrifty_r_subspace_test, xm, yv, w, opts)
  out <- .as_htest(r, opts, dname, n)
  if (identical(lr, 4L)) { # the sparse basis on all rows: the selected variables
    b <- .Call(thrifty_r_spls_basis, xm, yv, w, opts$n_components, opts$spls_keep)
    out$basis <- b$basis
    out$spls_keep <- b$keep
  }
  out
}

.as_htest <- function(r, opts, dname, n) {
  method <- as.integer(r$method)
  # the core's route warning (a design rule rerouted, or "nb" was asked for and rerouted)
  if (!is.null(msg <- .route_warning(r$notes))) warning(msg, call. = FALSE)
  if (r$n_constant_columns > 0) {
    warning(sprintf("x has %d constant column(s); they are dropped from every fit",
                    as.integer(r$n_constant_columns)), call. = FALSE)
  }
  splits <- NULL
  if (method %in% c(1L, 2L)) {
    splits <- if (!is.null(opts$train_indices)) {
      lapply(seq_len(length(opts$train_offsets) - 1L), function(j)
        as.integer(opts$train_indices[(opts$train_offsets[j] + 1):opts$train_offsets[j + 1]] + 1))
    } else {
      NULL # random balanced splits, drawn by the core from the seed
    }
  }
  out <- list(method = .method_names[method + 1L], data.name = dname, p.value = r$p_value,
              alternative = "greater", seed = r$seed, r = r$r,
              null.distribution = r$null_distribution, rho_hat = r$rho_hat,
              ncomp = as.integer(r$n_components),
              gate = list(n_eff = r$gate_n_eff, stable_rank = r$gate_stable_rank,
                          n_columns = as.integer(r$gate_n_columns), reroute = r$gate_reroute == 1,
                          rerouted = r$gate_rerouted == 1, forced = r$gate_forced == 1,
                          reasons = .route_reasons(r$notes)),
              splits = splits)
  if (method %in% c(1L, 2L)) {
    out$statistic <- c(t = r$t)
    out$parameter <- c(df = r$df)
    out$estimate <- c(r = r$statistic)
    out$conf.int <- structure(c(r$ci_low, r$ci_high), conf.level = opts$confidence_level)
    out$n_train <- r$n_train
    out$n_test <- r$n_test
  } else if (method == 5L) {
    out$statistic <- c("max |t|" = r$statistic)
    out$parameter <- c(df = r$df)
  } else {
    out$statistic <- structure(r$statistic, names = if (method == 3L) "Q2" else "mean R2")
    out$parameter <- c(n_perm = r$n_perm)
  }
  class(out) <- "htest"
  out
}

#' Per-component fixed-sequence tests over the PLS extraction order
#'
#' Step h fits h - 1 PLS components on all rows, deflates x and y, and tests the residual with a
#' one-component \code{\link{subspace_test}} on the same splits; the sequence stops at the first
#' p >= \code{alpha} and claims the components before it (family-wise error at \code{alpha}).
#' The gate is decided once, on the undeflated x. Identical to the Python
#' \code{thrifty.inference.component_tests} for the same seed.
#'
#' @inheritParams subspace_test
#' @param max_components Longest sequence (default min(10, p, n - 6)).
#' @param alpha Level of every step.
#' @param method \code{"auto"}, \code{"nb"} or \code{"nb-permutation"}.
#' @return A list of class \code{"thrifty_component_tests"}: \code{k_star}, \code{p_values} (one
#'   per tested step), \code{alpha}, \code{method}, \code{seed}, \code{gate_rerouted}.
#' @examples
#' set.seed(2)
#' x <- matrix(rnorm(300 * 20), 300, 20)
#' y <- x[, 1] + x[, 2] + rnorm(300)
#' component_tests(x, y, seed = 1, threads = 1)
#' @export
component_tests <- function(x, y, max_components = NULL, alpha = 0.05,
                            method = c("auto", "nb", "nb-permutation"), n_splits = 50L,
                            n_perm = 1000L, splits = NULL, weights = NULL, force = FALSE,
                            seed = NULL, threads = getOption("thrifty.threads", 2L)) {
  xm <- .as_data_matrix(x, "x")
  n <- nrow(xm)
  yv <- .as_vector(y, "y", n)
  if (diff(range(yv)) == 0) stop("y is constant (zero variance); there is nothing to predict", call. = FALSE)
  w <- .as_weights(weights, n)
  opts <- c(list(
    n_components = 1, learner = 0L, method = .match(method, c("auto", "nb", "nb-permutation"), "method"),
    n_splits = .count(n_splits, "n_splits", 2), n_perm = .count(n_perm, "n_perm", 1), n_folds = 5,
    rotate = 0L, force = as.double(.flag(force, "force")), spca_n_features = 0,
    threads = .threads(threads), seed = .seed(seed), confidence_level = 0.95, ridge_alpha = 1,
    spls_keep = 0, basis = NULL), .splits_arg(splits, n))
  hmax <- if (is.null(max_components)) 0 else .count(max_components, "max_components", 1)
  alpha <- .number(alpha, "alpha", 0, 1)
  r <- .Call(thrifty_r_component_tests, xm, yv, w, opts, hmax, alpha)
  if (!is.null(msg <- .route_warning(r$notes))) warning(msg, call. = FALSE)
  structure(list(k_star = r$k_star, p_values = r$p_values, alpha = alpha,
                 method = c("auto", "nb", "nb-permutation")[r$method + 1], seed = r$seed,
                 gate_rerouted = r$gate_rerouted),
            class = "thrifty_component_tests")
}

#' @export
print.thrifty_component_tests <- function(x, ...) {
  cat(sprintf("Per-component tests (%s, alpha = %g, seed %s): %d component(s) claimed\n",
              x$method, x$alpha, format(x$seed, scientific = FALSE), x$k_star))
  if (length(x$p_values)) {
    print(data.frame(component = seq_along(x$p_values), p.value = x$p_values), row.names = FALSE)
  }
  invisible(x)
}
