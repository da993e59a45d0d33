# Ctrl-C: the C ABI polls R's interrupt check every 100 ms while a long call runs on a worker
# thread. thrifty_r_test_interrupt_after(n) makes the check report an interrupt from poll n on
# (deterministic, no real signal), and returns how many polls happened since the last reset.
fake_interrupt_after <- function(n) .Call(thrifty:::thrifty_r_test_interrupt_after, as.integer(n))

# Evaluate `expr` with a fake interrupt from poll `n` on: the condition caught, the seconds it took
# and the number of polls made.
interrupted_after <- function(n, expr) {
  fake_interrupt_after(n)
  on.exit(fake_interrupt_after(-1L))
  t0 <- proc.time()[["elapsed"]]
  cond <- tryCatch(expr, interrupt = function(c) c)
  list(cond = cond, waited = proc.time()[["elapsed"]] - t0, polls = fake_interrupt_after(-1L))
}

test_that("an interrupt reported by the check stops a long k-means fit within about a second", {
  set.seed(1)
  x <- matrix(rnorm(20000 * 8), ncol = 8)
  # 500 Lloyd runs to a fixed point: many seconds without the interrupt
  res <- interrupted_after(3L, hartigan_kmeans(x, 40, nstart = 500, algorithm = "lloyd", tol = 0, seed = 1,
                                               threads = 2))
  expect_s3_class(res$cond, "interrupt")
  expect_s3_class(res$cond, "thrifty_interrupt")
  # the check was asked three times (so the call had run ~300 ms) and not again after it said stop
  expect_identical(res$polls, 3L)
  expect_lt(res$waited, 1.5)
})

test_that("an interrupt stops DPP sampling, and calls work normally afterwards", {
  set.seed(2)
  phi <- matrix(rnorm(200 * 20), ncol = 20)
  res <- interrupted_after(2L, dpp_sample(features = phi, n_samples = 1e6, kind = "kdpp", k = 5, seed = 1))
  expect_s3_class(res$cond, "interrupt")
  expect_lt(res$waited, 1.5)
  expect_identical(res$polls, 2L)
  # with R's real (absent) interrupts, the same kind of call runs to the end
  fit <- hartigan_kmeans(x = phi, centers = 3, seed = 1, threads = 1)
  expect_identical(sum(fit$size), nrow(phi))
})

test_that("an interrupt stops a long subspace test (sparse PLS with keep by CV, NB-permutation)", {
  set.seed(3)
  x <- matrix(rnorm(400 * 60), ncol = 60)
  y <- x[, 1] + rnorm(400)
  # every permutation refits and cross-validates the keep-count: many seconds without the interrupt
  res <- interrupted_after(2L, subspace_test(x, y, learner = "spls", method = "nb-permutation", n_perm = 100000L,
                                             seed = 1, threads = 2))
  expect_s3_class(res$cond, "interrupt")
  expect_lt(res$waited, 1.5)
  expect_identical(res$polls, 2L)
})
