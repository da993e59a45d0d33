hartigan_optimal <- function(x, fit) {
  # No single point move lowers the SSE: n_b/(n_b+1) d(x, c_b)^2 >= n_a/(n_a-1) d(x, c_a)^2.
  k <- nrow(fit$centers)
  d2 <- sapply(seq_len(k), function(j) colSums((t(x) - fit$centers[j, ])^2))
  n <- tabulate(fit$cluster, k)
  a <- unname(fit$cluster)
  remove <- ifelse(n[a] > 1, n[a] / (n[a] - 1) * d2[cbind(seq_along(a), a)], Inf)
  add <- d2 * rep(n / (n + 1), each = nrow(x))
  add[cbind(seq_along(a), a)] <- Inf
  # a point alone in its cluster cannot move (clusters are never emptied)
  all(n[a] == 1 | apply(add, 1, min) >= remove * (1 - 1e-9))
}

test_that("hartigan_kmeans returns what stats::kmeans returns, consistently", {
  x <- as.matrix(iris[, 1:4])
  fit <- hartigan_kmeans(x, 3, seed = 1, threads = 1)
  expect_s3_class(fit, c("hartigan_kmeans", "kmeans"))
  expect_named(fit, c("cluster", "centers", "totss", "withinss", "tot.withinss", "betweenss", "size",
                      "iter", "ifault", "converged", "seed", "algorithm", "init_centers"), ignore.order = TRUE)
  expect_identical(sum(fit$size), nrow(x))
  expect_equal(sum(fit$withinss), fit$tot.withinss, tolerance = 1e-12)
  expect_equal(fit$totss, sum(scale(x, scale = FALSE)^2), tolerance = 1e-12)
  expect_equal(fit$betweenss + fit$tot.withinss, fit$totss, tolerance = 1e-12)
  # the centres are the means of the partition
  expect_equal(unname(fit$centers), unname(rowsum(x, fit$cluster) / fit$size), tolerance = 1e-12)
  expect_identical(fit$ifault, 0L)
  expect_identical(fitted(fit, "classes"), fit$cluster)
  expect_identical(dim(fitted(fit)), dim(x))
  expect_identical(colnames(fit$centers), colnames(x))
  out <- capture.output(print(fit))
  expect_match(out[1], "thrifty hartigan k-means")
  expect_true(any(grepl("K-means clustering with 3 clusters", out)))
  # predict: nearest centres, distances; data frames accepted as in stats
  expect_identical(predict(fit, iris[, 1:4]), predict(fit, x))
  dist <- predict(fit, x[1:5, ], type = "distances")
  expect_equal(unname(dist), unname(sqrt(sapply(1:3, function(j) colSums((t(x[1:5, ]) - fit$centers[j, ])^2)))),
               tolerance = 1e-12)
  expect_identical(unname(apply(dist, 1, which.min)), unname(predict(fit, x[1:5, ])))
  expect_identical(hartigan_kmeans(iris[, 1:4], 3, seed = 1, threads = 1)$cluster, fit$cluster)
})

test_that("seeds reproduce fits, thread counts never change them, set.seed drives seed = NULL", {
  x <- scale(as.matrix(quakes))
  a <- hartigan_kmeans(x, 6, nstart = 3, seed = 7, threads = 1)
  b <- hartigan_kmeans(x, 6, nstart = 3, seed = 7, threads = 2)
  expect_identical(a$cluster, b$cluster)
  expect_identical(a$centers, b$centers)
  set.seed(3)
  c1 <- hartigan_kmeans(x, 6, threads = 1)
  set.seed(3)
  c2 <- hartigan_kmeans(x, 6, threads = 1)
  expect_identical(c1$seed, c2$seed)
  expect_identical(c1$cluster, c2$cluster)
  expect_identical(hartigan_kmeans(x, 6, seed = c1$seed, threads = 1)$cluster, c1$cluster)
  # weights: integer weights equal duplicated rows
  w <- rep(1:2, length.out = nrow(x))
  fw <- hartigan_kmeans(x, 4, seed = 2, weights = w, algorithm = "lloyd", tol = 0, threads = 1)
  xd <- x[rep(seq_len(nrow(x)), w), ]
  fd <- hartigan_kmeans(xd, fw$init_centers, algorithm = "lloyd", tol = 0, threads = 1)
  expect_equal(fw$tot.withinss, fd$tot.withinss, tolerance = 1e-9)
  expect_equal(unname(fw$centers), unname(fd$centers), tolerance = 1e-9)
})

test_that("Hartigan-Wong comparison on data shipped with R, from the same starting centres", {
  sets <- list(iris = as.matrix(iris[, 1:4]), usarrests = scale(USArrests), faithful = as.matrix(faithful),
               quakes = scale(as.matrix(quakes)), swiss = scale(as.matrix(swiss)),
               mtcars = scale(as.matrix(mtcars)))
  res <- NULL
  for (nm in names(sets)) {
    x <- sets[[nm]]
    for (k in c(3, 5, 8)) for (s in 1:5) {
      init <- hartigan_kmeans(x, k, seed = s, threads = 1)$init_centers
      ours <- hartigan_kmeans(x, init, tol = 0, threads = 1)
      hw <- stats::kmeans(x, init, iter.max = 1000, algorithm = "Hartigan-Wong")
      lloyd <- stats::kmeans(x, init, iter.max = 1000, algorithm = "Lloyd")
      expect_true(hartigan_optimal(x, ours), label = sprintf("%s k=%d seed=%d is a Hartigan local optimum", nm, k, s))
      # Hartigan's local optima are Lloyd fixed points' subset: never worse than Lloyd from the same start
      expect_lte(ours$tot.withinss, lloyd$tot.withinss * (1 + 1e-12))
      res <- rbind(res, data.frame(nm = nm, k = k, ours = ours$tot.withinss, hw = hw$tot.withinss))
    }
  }
  rel <- (res$ours - res$hw) / res$hw
  # Both are Hartigan local optima; they coincide on most starts (measured: 75 of 90 equal, the
  # rest split both ways) and agree on average within 1%.
  expect_gte(mean(abs(rel) < 1e-10), 0.7)
  expect_lt(abs(mean(res$ours / res$hw) - 1), 0.01)
  # iris, k = 3: the same partition as R from every start
  x <- as.matrix(iris[, 1:4])
  for (s in 1:5) {
    init <- hartigan_kmeans(x, 3, seed = s, threads = 1)$init_centers
    ours <- hartigan_kmeans(x, init, tol = 0, threads = 1)
    hw <- stats::kmeans(x, init, algorithm = "Hartigan-Wong")
    expect_equal(ours$tot.withinss, hw$tot.withinss, tolerance = 1e-12)
    expect_identical(unname(ours$cluster), unname(hw$cluster))
  }
})

test_that("bad input gives informative errors", {
  x <- as.matrix(iris[, 1:4])
  expect_error(hartigan_kmeans(x), "centers must be given")
  expect_error(hartigan_kmeans(x[1:2, ], 3, threads = 1), "more cluster centers")
  expect_error(hartigan_kmeans(x, 0), "centers")
  expect_error(hartigan_kmeans(x, 2.5), "whole number")
  xna <- x
  xna[3, 2] <- NA
  expect_error(hartigan_kmeans(xna, 3), "x contains NA")
  xna[3, 2] <- Inf
  expect_error(hartigan_kmeans(xna, 3), "x contains NA, NaN or infinite")
  expect_error(hartigan_kmeans(iris, 3), "not numeric: Species")
  expect_error(hartigan_kmeans(x[0, ], 3), "at least 1 row")
  expect_error(hartigan_kmeans("a", 3), "numeric matrix")
  expect_error(hartigan_kmeans(x, x[1:3, 1:2]), "centers has 2 columns")
  expect_error(hartigan_kmeans(x, 3, algorithm = "macqueen"), "algorithm must be one of")
  expect_error(hartigan_kmeans(x, 3, iter.max = 0), "iter.max")
  expect_error(hartigan_kmeans(x, 3, weights = rep(-1, 150)), "non-negative")
  expect_error(hartigan_kmeans(x, 3, weights = rep(0, 150)), "not all be zero")
  expect_error(hartigan_kmeans(x, 3, weights = 1:3), "length 3, expected 150")
  expect_error(hartigan_kmeans(x, 3, seed = -1), "seed")
  expect_error(hartigan_kmeans(x, 3, seed = 1.5), "seed")
  expect_error(hartigan_kmeans(x, 3, threads = 0), "threads")
  expect_error(hartigan_kmeans(x, 3, tol = -1), "tol")
  expect_error(hartigan_kmeans(x, 3, nstart = 0), "nstart")
  fit <- hartigan_kmeans(x, 3, seed = 1, threads = 1)
  expect_error(predict(fit, x[, 1:2]), "newdata has 2 columns")
  expect_error(predict(fit, xna), "newdata contains NA")
  expect_warning(hartigan_kmeans(x, 3, iter.max = 1, seed = 1, threads = 1), "did not converge")
  expect_warning(hartigan_kmeans(rbind(x[1:5, ], x[1:5, ]), 6, seed = 1, threads = 1), "distinct")
})
