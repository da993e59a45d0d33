#' K-means clustering by batched Hartigan moves (or bounded Lloyd iterations)
#'
#' A drop-in for \code{\link[stats]{kmeans}} over thrifty's Rust core. Hartigan's rule moves a
#' point from cluster a to b whenever that lowers the within-cluster sum of squares; thrifty applies
#' the moves to a strictly nearer centre in parallel batches and the remaining Hartigan-only moves
#' one by one, with triangle-inequality bounds that skip most distance computations. The result
#' is a Hartigan local optimum (with \code{tol = 0}) like \code{stats::kmeans(algorithm =
#' "Hartigan-Wong")}, usually several times faster on large data. \code{algorithm = "lloyd"}
#' runs Lloyd's algorithm with the same bounds.
#'
#' For the same \code{seed} and parameters the labels and centres are identical to those of the
#' Python class \code{thrifty.cluster.HartiganKMeans(n_clusters = k, random_state = seed,
#' n_init = nstart, max_iter = iter.max, tol = tol)}, on any number of threads.
#'
#' @param x Numeric matrix or data frame of shape n x p (rows are points). Not modified.
#' @param centers Either the number of clusters k (initial centres by greedy k-means++, drawn
#'   from \code{seed}), or a k x p matrix of initial centres.
#' @param iter.max Maximum number of iterations of a run (default 300).
#' @param nstart Number of k-means++ starts when \code{centers} is a number; the run with the
#'   lowest total within-cluster sum of squares is kept. Ignored for a matrix of centres.
#' @param algorithm \code{"hartigan"} (default) or \code{"lloyd"}.
#' @param weights Optional non-negative case weights (length n, not all zero).
#' @param seed Seed of the k-means++ starts: a whole number in [0, 2^53], or \code{NULL} to draw
#'   one from R's random generator (so \code{set.seed()} reproduces the fit). Recorded in the result.
#' @param threads Number of threads (\code{NULL}: all cores). Results do not depend on it.
#' @param tol Stop when the squared centre shift is at most \code{tol} times the mean per-feature
#'   variance (scikit-learn's rule); \code{0} runs to a fixed point.
#' @return An object of class \code{c("hartigan_kmeans", "kmeans")} with the components of
#'   \code{stats::kmeans} (\code{cluster}, \code{centers}, \code{totss}, \code{withinss},
#'   \code{tot.withinss}, \code{betweenss}, \code{size}, \code{iter}, \code{ifault}: 0, or 2 when
#'   \code{iter.max} was reached) plus \code{converged}, \code{seed}, \code{algorithm} and
#'   \code{init_centers} (the starting centres of the kept run). Sums of squares are weighted when
#'   \code{weights} are given.
#' @seealso \code{\link{predict.hartigan_kmeans}}, \code{\link[stats]{kmeans}}
#' @examples
#' x <- as.matrix(iris[, 1:4])
#' fit <- hartigan_kmeans(x, 3, seed = 1, threads = 1)
#' fit
#' table(fit$cluster, iris$Species)
#' # from the same starting centres as stats::kmeans
#' start <- x[c(1, 51, 101), ]
#' c(thrifty = hartigan_kmeans(x, start, threads = 1)$tot.withinss,
#'   stats = kmeans(x, start, algorithm = "Hartigan-Wong")$tot.withinss)
#' @export
hartigan_kmeans <- function(x, centers, iter.max = 300L, nstart = 1L,
                            algorithm = c("hartigan", "lloyd"), weights = NULL, seed = NULL,
                            threads = getOption("thrifty.threads", 2L), tol = 1e-4) {
  xm <- .as_data_matrix(x, "x", finite = FALSE) # checked by the core's first pass (see below)
  n <- nrow(xm)
  if (missing(centers)) stop("centers must be given: a number of clusters or a matrix", call. = FALSE)
  alg <- .match(algorithm, c("hartigan", "lloyd"), "algorithm")
  iter.max <- .count(iter.max, "iter.max", 1)
  w <- .as_weights(weights, n)
  tol <- .number(tol, "tol", 0, Inf, open_low = FALSE)
  nthreads <- .threads(threads)
  if (is.matrix(centers) || is.data.frame(centers)) {
    cm <- .as_data_matrix(centers, "centers")
    if (ncol(cm) != ncol(xm)) {
      stop(sprintf("centers has %d columns, x has %d", ncol(cm), ncol(xm)), call. = FALSE)
    }
    k <- nrow(cm)
    init <- 2L
    nstart <- 1
  } else {
    k <- .count(centers, "centers (the number of clusters)", 1)
    cm <- NULL
    init <- 0L
    nstart <- .count(nstart, "nstart", 1)
  }
  if (k > n) stop(sprintf("more cluster centers (%d) than data points (%d)", k, n), call. = FALSE)
  seed <- .seed(seed)
  # R's own finiteness check reads x three times (15 ms of a 2e5 x 32 fit); the core's row-norm
  # pass finds a non-finite value anyway, so R looks only when the core has refused.
  r <- tryCatch(.Call(thrifty_r_kmeans_fit, xm, w, k, init, cm, nstart, iter.max, tol, alg, seed, nthreads),
                error = function(e) { .finite_or_stop(xm, "x"); stop(e) })
  if (r$n_distinct < k) {
    warning(sprintf("only %d distinct cluster centres for k = %d (duplicate points in x?)",
                    r$n_distinct, k), call. = FALSE)
  }
  if (!r$converged) {
    warning(sprintf("did not converge in %d iterations", as.integer(iter.max)), call. = FALSE)
  }
  dimnames(r$centers) <- list(seq_len(k), colnames(xm))
  dimnames(r$init_centers) <- list(seq_len(k), colnames(xm))
  cluster <- r$cluster
  if (!is.null(rownames(xm))) names(cluster) <- rownames(xm)
  size <- tabulate(cluster, k)
  structure(list(cluster = cluster, centers = r$centers, totss = r$totss,
                 withinss = r$withinss, tot.withinss = r$inertia,
                 betweenss = r$totss - r$inertia, size = size, iter = r$iter,
                 ifault = if (r$converged) 0L else 2L, converged = r$converged, seed = seed,
                 algorithm = c("hartigan", "lloyd")[alg + 1L], init_centers = r$init_centers),
            class = c("hartigan_kmeans", "kmeans"))
}

#' @describeIn hartigan_kmeans Print like \code{stats::kmeans}, with the algorithm, iterations
#'   and seed.
#' @param ... Passed on to the \code{kmeans} print method.
#' @export
print.hartigan_kmeans <- function(x, ...) {
  cat(sprintf("thrifty %s k-means: %d iterations (%s), seed %s\n", x$algorithm, x$iter,
              if (isTRUE(x$converged)) "converged" else "not converged",
              format(x$seed, scientific = FALSE)))
  NextMethod()
}

#' @describeIn hartigan_kmeans The centre of every point's cluster (\code{method = "centers"},
#'   an n x p matrix) or the cluster labels (\code{"classes"}), as \code{fitted.kmeans}.
#' @param object A \code{hartigan_kmeans} fit.
#' @param method \code{"centers"} or \code{"classes"}.
#' @export
fitted.hartigan_kmeans <- function(object, method = c("centers", "classes"), ...) {
  method <- match.arg(method)
  if (method == "centers") object$centers[object$cluster, , drop = FALSE] else object$cluster
}

#' Nearest centres and distances for new data
#'
#' @param object A \code{hartigan_kmeans} fit.
#' @param newdata Numeric matrix or data frame with the columns of the training data.
#' @param type \code{"cluster"} (the index of the nearest centre, ties to the lowest) or
#'   \code{"distances"} (the n x k matrix of Euclidean distances to every centre).
#' @param threads Number of threads (\code{NULL}: all cores).
#' @param ... Unused.
#' @return An integer vector of cluster indices or a numeric matrix.
#' @examples
#' fit <- hartigan_kmeans(iris[, 1:4], 3, seed = 1, threads = 1)
#' predict(fit, iris[c(1, 51, 101), 1:4])
#' @export
predict.hartigan_kmeans <- function(object, newdata, type = c("cluster", "distances"),
                                    threads = getOption("thrifty.threads", 2L), ...) {
  type <- match.arg(type)
  xm <- .as_data_matrix(newdata, "newdata")
  if (ncol(xm) != ncol(object$centers)) {
    stop(sprintf("newdata has %d columns, the centres have %d", ncol(xm), ncol(object$centers)),
         call. = FALSE)
  }
  centers <- object$centers
  storage.mode(centers) <- "double"
  nthreads <- .threads(threads)
  if (type == "cluster") {
    out <- .Call(thrifty_r_kmeans_predict, xm, centers, nthreads)
    if (!is.null(rownames(xm))) names(out) <- rownames(xm)
  } else {
    out <- .Call(thrifty_r_kmeans_transform, xm, centers, nthreads)
    dimnames(out) <- list(rownames(xm), rownames(centers))
  }
  out
}
