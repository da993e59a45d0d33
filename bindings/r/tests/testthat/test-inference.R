make_data <- function(n = 150, p = 15, seed = 1) {
  set.seed(seed)
  x <- matrix(rnorm(n * p), n, p)
  list(x = x, y = x[, 1] + 0.5 * x[, 2] + rnorm(n))
}

test_that("subspace_test returns an htest that print and broom::tidy understand", {
  d <- make_data()
  res <- subspace_test(d$x, d$y, seed = 1, threads = 1)
  expect_s3_class(res, "htest")
  expect_named(res$statistic, "t")
  expect_named(res$parameter, "df")
  expect_identical(unname(res$parameter), 49)
  expect_true(res$p.value < 1e-6)
  expect_true(res$conf.int[1] < res$estimate && res$estimate < res$conf.int[2])
  expect_identical(attr(res$conf.int, "conf.level"), 0.95)
  expect_length(res$r, 50)
  expect_identical(res$data.name, "d$x and d$y")
  expect_output(print(res), "Held-out subspace test")
  # thread count and data frames do not change anything
  res2 <- subspace_test(as.data.frame(d$x), d$y, seed = 1, threads = 2)
  expect_identical(res2$p.value, res$p.value)
  expect_identical(res2$r, res$r)
  skip_if_not_installed("broom")
  tidy <- broom::tidy(res)
  expect_identical(tidy$p.value, res$p.value)
  expect_identical(unname(tidy$parameter), 49)
})

test_that("the NB test is calibrated under the null (two-sided check of its size)", {
  # 200 null data sets: the rejection rate at 10% stays inside a 99.9% binomial band
  set.seed(5)
  p <- vapply(1:200, function(i) {
    x <- matrix(rnorm(60 * 10), 60, 10)
    subspace_test(x, rnorm(60), n_splits = 20, seed = i, threads = 1)$p.value
  }, numeric(1))
  rate <- mean(p < 0.1)
  band <- qbinom(c(0.0005, 0.9995), 200, 0.1) / 200
  expect_gte(rate, band[1])
  expect_lte(rate, band[2])
})

test_that("every method and learner runs; the gate reroutes with a warning", {
  d <- make_data()
  expect_identical(subspace_test(d$x, d$y, method = "nb-permutation", n_perm = 49, seed = 2,
                                 threads = 1)$p.value, 1 / 50)
  q2 <- subspace_test(d$x, d$y, method = "cv-permutation-q2", n_perm = 49, seed = 2, threads = 1)
  expect_named(q2$statistic, "Q2")
  expect_length(q2$null.distribution, 49)
  jk <- subspace_test(d$x, d$y, method = "jackknife", ncomp = 2, n_folds = 10, seed = 2, threads = 1)
  expect_identical(unname(jk$parameter), 9)
  # supervised PCA runs (its values are checked against Python in test-parity.R)
  sp_p <- subspace_test(d$x, d$y, learner = "spca", ncomp = 2, seed = 2, threads = 1)$p.value
  expect_true(sp_p > 0 && sp_p <= 1)
  # method = "auto" runs the NB-permutation test (n_perm = 1000) for ridge and fixed bases, silently,
  # as Python does (the NB correction is calibrated for PLS1 with one component only): the strong
  # signal gives the smallest attainable p-value; the forced NB test gives a tiny one.
  expect_warning(rr <- subspace_test(d$x, d$y, learner = "ridge", seed = 2, threads = 1), NA)
  expect_identical(rr$p.value, 1 / 1001)
  expect_true(rr$gate$rerouted)
  expect_identical(subspace_test(d$x, d$y, learner = diag(15)[, 1:2], seed = 2, threads = 1)$p.value, 1 / 1001)
  expect_true(subspace_test(d$x, d$y, learner = "ridge", method = "nb", force = TRUE, seed = 2,
                            threads = 1)$p.value < 1e-4)
  expect_warning(subspace_test(d$x, d$y, learner = "ridge", method = "nb", seed = 2, n_perm = 49,
                               threads = 1), "NB-permutation")
  expect_warning(g <- subspace_test(d$x[, 1:3], d$y, seed = 2, n_perm = 49, threads = 1), "NB-permutation")
  expect_true(g$gate$rerouted)
  f <- subspace_test(d$x[, 1:3], d$y, seed = 2, force = TRUE, threads = 1)
  expect_true(f$gate$forced)
  sp <- list(1:80, 31:110, 61:150)
  e <- subspace_test(d$x, d$y, splits = sp, seed = 2, threads = 1)
  expect_length(e$r, 3)
  expect_identical(e$splits, lapply(sp, as.integer))
  ct <- component_tests(d$x, d$y, seed = 3, threads = 1)
  expect_s3_class(ct, "thrifty_component_tests")
  expect_gte(ct$k_star, 1L)
  expect_output(print(ct), "component")
})

test_that("bad input gives informative errors", {
  d <- make_data()
  expect_error(subspace_test(d$x, rep(1, 150)), "y is constant")
  expect_error(subspace_test(d$x, d$y[-1]), "y has length 149, expected 150")
  x <- d$x
  x[2, 2] <- NaN
  expect_error(subspace_test(x, d$y), "x contains NA")
  y <- d$y
  y[3] <- NA
  expect_error(subspace_test(d$x, y), "y contains NA")
  expect_error(subspace_test(d$x, d$y, ncomp = 16, seed = 1), "exceeds the number of features")
  expect_error(subspace_test(d$x[1:6, ], d$y[1:6], ncomp = 2, seed = 1), "too few")
  expect_error(subspace_test(d$x, d$y, method = "exact"), "method must be one of")
  expect_error(subspace_test(d$x, d$y, learner = "lasso"), "learner must be one of")
  expect_error(subspace_test(d$x, d$y, learner = diag(3)), "basis learner must have")
  expect_error(subspace_test(d$x, d$y, n_splits = 1), "n_splits")
  expect_error(subspace_test(d$x, d$y, conf.level = 1), "conf.level")
  expect_error(subspace_test(d$x, d$y, splits = list(1:10)), "at least 2")
  expect_error(subspace_test(d$x, d$y, splits = list(1:10, c(1, 1, 2))), "repeats")
  expect_error(subspace_test(d$x, d$y, splits = list(1:10, 0:5)), "outside")
  expect_error(subspace_test(d$x, d$y, splits = list(1:10, 1:149)), "test rows")
  expect_error(subspace_test(d$x, d$y, weights = rep(-1, 150)), "non-negative")
  expect_error(subspace_test(d$x, d$y, method = "jackknife", learner = "spca", seed = 1), "PLS learner only")
  expect_error(subspace_test(matrix(1, 150, 3), d$y, seed = 1), "every column is constant")
  expect_error(subspace_test(d$x, cbind(d$y, d$x[, 3]), learner = "spca", seed = 1), "PLS learner")
  expect_error(subspace_test(d$x, cbind(d$y, d$x[, 3]), method = "jackknife", seed = 1), "PLS2")
  expect_error(subspace_test(d$x, matrix(1, 150, 2)), "every column of y is constant")
  expect_error(subspace_test(d$x, cbind(d$y, d$y)[1:100, ]), "y has 100 rows")
  expect_error(component_tests(d$x, d$y, alpha = 2), "alpha")
  expect_error(component_tests(d$x, d$y, max_components = 50, seed = 1), "max_components")
})
