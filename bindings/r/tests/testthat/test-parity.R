# R and Python give identical results for fixed seeds: the Python package writes shared fixtures
# (inputs and its results) at test time, R recomputes them through the C ABI. Needs the Python
# package: set THRIFTY_PYTHON to a Python with thrifty installed (scripts/test.sh does); without it
# the tests are skipped (e.g. under R CMD check).

fixtures <- local({
  cache <- NULL
  function() {
    if (!is.null(cache)) return(cache)
    py <- Sys.getenv("THRIFTY_PYTHON")
    if (!nzchar(py)) skip("THRIFTY_PYTHON is not set (Python parity fixtures need the Python package)")
    skip_if_not_installed("jsonlite")
    out <- tempfile(fileext = ".json")
    log <- suppressWarnings(system2(py, c(shQuote(test_path("fixtures.py")), shQuote(out)),
                                    stdout = TRUE, stderr = TRUE))
    if (!file.exists(out)) stop("the Python fixture script failed:\n", paste(log, collapse = "\n"))
    cache <<- jsonlite::fromJSON(out, simplifyVector = TRUE, simplifyMatrix = TRUE)
    cache
  }
})

same_matrix <- function(r, py) {
  dimnames(r) <- NULL
  expect_identical(r, py)
}

test_that("k-means: labels, centres and inertia are identical to Python", {
  fx <- fixtures()
  x <- fx$kmeans_x
  fit <- hartigan_kmeans(x, 4, nstart = 3, seed = 11, threads = 2)
  py <- fx$kmeans_hartigan
  expect_identical(unname(fit$cluster), as.integer(py$labels + 1L))
  same_matrix(fit$centers, py$centers)
  expect_identical(fit$tot.withinss, py$inertia)
  expect_identical(fit$iter, as.integer(py$n_iter))

  fit <- hartigan_kmeans(x, 4, algorithm = "lloyd", iter.max = 100, tol = 0, weights = fx$kmeans_w,
                         seed = 12, threads = 1)
  py <- fx$kmeans_lloyd_weighted
  expect_identical(unname(fit$cluster), as.integer(py$labels + 1L))
  same_matrix(fit$centers, py$centers)
  expect_identical(fit$tot.withinss, py$inertia)

  fit0 <- hartigan_kmeans(x, fx$kmeans_init$init, tol = 0, threads = 2)
  expect_identical(unname(fit0$cluster), as.integer(fx$kmeans_init$labels + 1L))
  same_matrix(fit0$centers, fx$kmeans_init$centers)
  expect_identical(fit0$tot.withinss, fx$kmeans_init$inertia)

  fit <- hartigan_kmeans(x, 4, nstart = 3, seed = 11)
  expect_identical(unname(predict(fit, x[1:50, ] + 0.3)), as.integer(fx$kmeans_predict + 1L))
})

test_that("subspace tests: p-values, statistics and per-split r are identical to Python", {
  fx <- fixtures()
  x <- fx$sub_x
  y <- fx$sub_y
  splits <- fx$splits # jsonlite makes equal-length splits a matrix: one split per row
  splits <- if (is.matrix(splits)) lapply(seq_len(nrow(splits)), function(i) splits[i, ] + 1) else
    lapply(splits, function(s) s + 1)
  runs <- list(
    nb = function() subspace_test(x, y, seed = 5),
    nb_k2_weighted = function() subspace_test(x, y, ncomp = 2, weights = fx$sub_w, seed = 6),
    nb_permutation = function() subspace_test(x, y, method = "nb-permutation", n_perm = 199,
                                              n_splits = 20, seed = 7),
    spca = function() subspace_test(x, y, learner = "spca", ncomp = 2, seed = 8, n_splits = 30),
    ridge = function() subspace_test(x, y, learner = "ridge", seed = 9, ridge_alpha = 3),
    pls_varimax = function() subspace_test(x, y, ncomp = 3, rotate = "varimax", seed = 9),
    cv_q2 = function() subspace_test(x, y, method = "cv-permutation-q2", n_perm = 99, seed = 10),
    perm_score = function() subspace_test(x, y, method = "permutation-score", n_perm = 99,
                                          learner = "spca", seed = 10),
    jackknife = function() subspace_test(x, y, method = "jackknife", ncomp = 2, n_folds = 10, seed = 11),
    basis = function() subspace_test(x, y, learner = diag(15)[, 1:2], seed = 12),
    explicit_splits = function() subspace_test(x, y, splits = splits, seed = 13),
    pls2 = function() subspace_test(x, fx$sub_y2, ncomp = 2, seed = 15),
    pls2_perm = function() subspace_test(x, fx$sub_y2, method = "nb-permutation", n_perm = 49, n_splits = 10,
                                         weights = fx$sub_w, seed = 16),
    gate = function() {
      expect_warning(res <- subspace_test(x[, 1:3], y, seed = 14, n_perm = 99), "NB-permutation")
      res
    }
  )
  for (name in names(runs)) {
    py <- fx$subspace[[name]]
    res <- runs[[name]]()
    expect_identical(res$p.value, py$p_value, label = paste(name, "p-value"))
    if (py$method %in% c("nb", "nb-permutation")) {
      expect_identical(unname(res$estimate), py$statistic, label = paste(name, "statistic"))
      expect_identical(unname(res$statistic), py$t, label = paste(name, "t"))
      expect_identical(unname(res$parameter), py$df, label = paste(name, "df"))
      expect_identical(as.numeric(res$conf.int), py$ci, label = paste(name, "ci"))
      expect_identical(res$r, py$r, label = paste(name, "r"))
    } else {
      expect_identical(unname(res$statistic), py$statistic, label = paste(name, "statistic"))
    }
    if (!is.null(py$null)) expect_identical(res$null.distribution, py$null, label = paste(name, "null"))
  }
  ct <- component_tests(x, y, seed = 3, n_splits = 30)
  expect_identical(ct$k_star, as.integer(fx$components$k_star))
  expect_identical(ct$p_values, fx$components$p_values)
})

test_that("DPP samples, coresets and greedy selections are identical to Python", {
  fx <- fixtures()
  s <- dpp_sample(fx$dpp_f, n_samples = 5, seed = 9, threads = 2)$samples
  expect_identical(as.vector(t(s)), as.integer(fx$projection + 1L))
  s <- dpp_sample(fx$dpp_f, n_samples = 3, method = "chain", seed = 10, threads = 1)$samples
  expect_identical(as.vector(t(s)), as.integer(fx$projection_chain + 1L))
  le <- dpp_sample(features = fx$dpp_fl, n_samples = 6, kind = "lensemble", seed = 4)$samples
  expect_identical(le, lapply(fx$lensemble, function(v) as.integer(v + 1L)))
  le <- dpp_sample(L = fx$dpp_l, n_samples = 4, kind = "lensemble", seed = 5)$samples
  expect_identical(le, lapply(fx$lensemble_kernel, function(v) as.integer(v + 1L)))
  kd <- dpp_sample(L = fx$dpp_l, n_samples = 5, kind = "kdpp", k = 3, seed = 2)$samples
  expect_identical(as.vector(t(kd)), as.integer(fx$kdpp + 1L))

  args <- list(haar = list(seed = 1), haar_quantile = list(seed = 2, split = "quantile"),
               ope = list(kernel = "ope", seed = 3),
               ope_jacobi_selfnorm = list(kernel = "ope", seed = 4, jacobi = c(0.5, -0.5),
                                          weights = "self_normalized"),
               daubechies = list(kernel = "daubechies", seed = 5))
  for (name in names(args)) {
    py <- fx$coresets[[name]]
    cs <- do.call(dpp_coreset, c(list(fx$coreset_x, py$m), args[[name]]))
    expect_identical(cs$indices, as.integer(py$indices + 1L), label = paste(name, "indices"))
    expect_identical(cs$weights, py$weights, label = paste(name, "weights"))
  }

  se <- select_entropy(fx$cov, 5)
  expect_identical(se$indices, as.integer(fx$select_entropy$indices + 1L))
  expect_identical(se$conditional_variances, fx$select_entropy$pivots)
  gm <- greedy_map(fx$dpp_z, 4)
  expect_identical(gm$indices, as.integer(fx$greedy_map$indices + 1L))
  expect_identical(gm$conditional_variances, fx$greedy_map$pivots)
  mi <- select_mutual_information(fx$cov + diag(50), 4)
  expect_identical(mi$indices, as.integer(fx$select_mi$indices + 1L))
  expect_identical(mi$gains, fx$select_mi$gains)
})
