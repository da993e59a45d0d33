# Behaviour of the inference additions in R: planted structure is recovered, the learner rules
# route as in Python, bad input gives errors naming the argument, long calls stop on Ctrl-C.
# (Bit-for-bit parity with Python: test-inference-extra-fixtures.R.)

planted <- function(n = 200, p = 12, seed = 1) {
  set.seed(seed)
  x <- matrix(rnorm(n * p), n, p)
  list(x = x, y = 2 * x[, 3] - 1.5 * x[, 8] + rnorm(n, sd = 0.5))
}

test_that("sparse PLS in subspace_test selects the planted variables", {
  d <- planted()
  res <- subspace_test(d$x, d$y, learner = "spls", spls_keep = 2, n_perm = 49, n_splits = 20, seed = 1, threads = 1)
  expect_s3_class(res, "htest")
  expect_identical(which(res$basis[, 1] != 0), c(3L, 8L))
  expect_identical(dim(res$basis), c(12L, 1L))
  expect_identical(res$spls_keep, 2L)
  # the learner rule: "auto" runs the NB-permutation test, silently, and says why
  expect_match(res$method, "NB permutation")
  expect_true(res$gate$rerouted)
  expect_true(any(grepl("learner='spls'", res$gate$reasons, fixed = TRUE)))
  expect_identical(res$p.value, 1 / 50)
  # the cross-validated keep-count (the default) also finds them
  cv <- subspace_test(d$x, d$y, learner = "spls", n_perm = 9, n_splits = 6, seed = 1, threads = 1)
  expect_true(all(c(3L, 8L) %in% which(cv$basis[, 1] != 0)))
  expect_lte(cv$spls_keep, 12L)
  # "nb" is rerouted with the core's warning; force = TRUE runs it
  expect_warning(subspace_test(d$x, d$y, learner = "spls", spls_keep = 2, method = "nb", n_perm = 9, n_splits = 6,
                               seed = 1, threads = 1), "NB-asymptotic approximation not trusted")
  f <- subspace_test(d$x, d$y, learner = "spls", spls_keep = 2, method = "nb", force = TRUE, seed = 1, threads = 1)
  expect_true(f$gate$forced && f$p.value < 1e-6)
  expect_error(subspace_test(d$x, d$y, learner = "spls", spls_keep = 13), "spls_keep")
  expect_error(subspace_test(d$x, d$y, learner = "spls", spls_keep = "all"), "spls_keep")
  expect_error(subspace_test(d$x, d$y, spls_keep = 2), "spls_keep is only used")
})

test_that("pls_svd_test finds the shared latent variable of two blocks and routes by the learner rule", {
  set.seed(2)
  z <- rnorm(200)
  x <- matrix(rnorm(200 * 8), 200, 8); x[, 2] <- x[, 2] + 1.5 * z
  y <- matrix(rnorm(200 * 4), 200, 4); y[, 3] <- y[, 3] + 1.5 * z
  res <- pls_svd_test(x, y, ncomp = 2, n_perm = 99, n_splits = 20, seed = 1, threads = 1)
  expect_s3_class(res, "htest")
  expect_match(res$method, "PLS-SVD")
  expect_identical(res$p.value, 1 / 100)
  expect_identical(which.max(abs(res$x_weights[, 1])), 2L)
  expect_identical(which.max(abs(res$y_weights[, 1])), 3L)
  expect_equal(crossprod(res$x_weights), diag(2), tolerance = 1e-10)
  expect_true(res$singular_values[1] > res$singular_values[2])
  expect_true(any(grepl("PLS-SVD", res$gate$reasons, fixed = TRUE)))
  expect_warning(pls_svd_test(x, y, method = "nb", n_perm = 9, n_splits = 6, seed = 1, threads = 1), "PLS-SVD")
  nb <- pls_svd_test(x, y, method = "nb", force = TRUE, seed = 1, threads = 1)
  expect_true(nb$gate$forced && nb$p.value < 1e-6 && length(nb$null.distribution) == 0)
  # the null: no shared variable, the p-value is not small
  set.seed(3)
  null <- pls_svd_test(matrix(rnorm(100 * 5), 100), matrix(rnorm(100 * 3), 100), n_perm = 99, n_splits = 10,
                       seed = 2, threads = 1)
  expect_gt(null$p.value, 0.01)
  expect_error(pls_svd_test(x, y[1:100, ]), "rows")
  expect_error(pls_svd_test(x, y, ncomp = 5), "ncomp")
  expect_error(pls_svd_test(x, matrix(1, 200, 2)), "constant")
  expect_error(pls_svd_test(x, y, method = "jackknife"), "method")
})

test_that("select_n_components picks the planted number of components", {
  set.seed(4)
  t1 <- rnorm(300) * 4; t2 <- rnorm(300) * 2
  P <- qr.Q(qr(matrix(rnorm(20 * 2), 20, 2)))
  x <- cbind(t1, t2) %*% t(P) + 0.05 * matrix(rnorm(300 * 20), 300, 20)
  y <- 0.25 * t1 + 0.5 * t2 + 0.5 * rnorm(300)
  for (rule in c("one-se", "max")) {
    s <- select_n_components(x, y, k_max = 6, rule = rule, seed = 1, threads = 1)
    expect_s3_class(s, "thrifty_n_components")
    expect_identical(s$n_components, 2L, label = rule)
  }
  expect_identical(dim(s$fold_r2), c(6L, 5L))
  expect_equal(s$cv_r2, rowMeans(s$fold_r2), tolerance = 1e-12)
  # (one factor dominates this x: the gate reroutes the sequence, with the core's warning)
  expect_warning(seq <- select_n_components(x, y, k_max = 4, rule = "sequence", n_splits = 20, n_perm = 49, seed = 1,
                                            threads = 1), "the whole sequence uses the NB-permutation test")
  expect_identical(seq$n_components, seq$sequence$k_star)
  expect_gte(seq$n_components, 2L)
  expect_output(print(s), "Number of PLS1 components")
  expect_error(select_n_components(x, y, k_max = 21), "k_max")
  expect_error(select_n_components(x, y, rule = "aic"), "rule")
  expect_error(select_n_components(x, y, alpha = 0.1), "sequence")
  expect_error(select_n_components(x, y, n_folds = 1), "n_folds")
})

test_that("rotation_stability tells a replicating axis from one that does not", {
  set.seed(5)
  x <- matrix(rnorm(300 * 12), 300, 12)
  y <- x[, 1] + x[, 7] + rnorm(300, sd = 0.5)
  rs <- rotation_stability(x, y, 2, n_boot = 100, seed = 1, threads = 1)
  expect_s3_class(rs, "thrifty_rotation_stability")
  expect_identical(dim(rs$congruence), c(100L, 2L))
  expect_true(all(rs$congruence >= 0 & rs$congruence <= 1 + 1e-12, na.rm = TRUE))
  expect_gt(rs$mean[1], 0.95)
  expect_lt(rs$mean[2], 0.85)
  expect_true(rs$ci[1, 1] <= rs$mean[1] && rs$mean[1] <= rs$ci[1, 2])
  expect_equal(crossprod(rs$weights), diag(2), tolerance = 1e-10)
  expect_output(print(rs), "Rotation stability")
  expect_error(rotation_stability(x, y, 1), "ncomp")
  expect_error(rotation_stability(x, y, 2, n_boot = 0), "n_boot")
  sub <- rotation_stability(x, y, 2, n_boot = 100, seed = 1, threads = 1, resample = "subsample")
  expect_identical(c(sub$m, rs$m), c(55L, 300L))
  expect_identical(sub$resample, "subsample")
  expect_gt(sub$mean[1], 0.9)
  expect_lt(sub$mean[2], 0.85)
  expect_error(rotation_stability(x, y, 2, resample = "subsample", subsample_rate = 0.1), "subsample_rate")
  expect_error(rotation_stability(x, y, 2, resample = "subsample", subsample_rate = 1.5), "subsample_rate")
  expect_error(rotation_stability(x, y, 2, resample = "jackknife"), "resample")
})

test_that("coefficient_intervals cover the planted coefficients and flag the null ones", {
  set.seed(6)
  x <- matrix(rnorm(400 * 5), 400, 5)
  y <- 2 * x[, 1] + rnorm(400)
  ci <- coefficient_intervals(x, y, n_boot = 300, seed = 1, threads = 1)
  expect_s3_class(ci, "thrifty_coefficient_intervals")
  expect_true(ci$coef_ci[1, 1] < 2 && 2 < ci$coef_ci[1, 2])
  expect_gt(abs(ci$coef_z[1]), 5)
  expect_equal(sum(ci$leverage), 1, tolerance = 1e-10) # trace of the projection on one weight
  expect_identical(ci$m, as.integer(ceiling(400^0.7)))
  expect_output(print(ci), "subsampling intervals")
  expect_error(coefficient_intervals(x, y, m_rate = 1), "m_rate")
  expect_error(coefficient_intervals(x, y, m_rate = 0.01), "m_rate")
  expect_error(coefficient_intervals(x, y, weights = -(1:400)), "weights")
})

test_that("a long PLS-SVD permutation test stops on Ctrl-C", {
  fake <- function(n) .Call(thrifty:::thrifty_r_test_interrupt_after, as.integer(n))
  set.seed(7)
  x <- matrix(rnorm(2000 * 8), 2000)
  y <- matrix(rnorm(2000 * 8), 2000)
  fake(2L)
  on.exit(fake(-1L))
  cond <- tryCatch(pls_svd_test(x, y, n_perm = 2e5, seed = 1, threads = 2), interrupt = function(c) c)
  expect_s3_class(cond, "interrupt")
  expect_identical(fake(-1L), 2L)
})
