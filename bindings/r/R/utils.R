# Argument checks shared by every function: informative stop() messages naming the argument,
# before anything reaches the C ABI (which checks again).

# finite = FALSE leaves the NA/NaN/Inf check to the core, which makes it in its first pass over x
# for free (k-means: its row norms); the caller then runs `.finite_or_stop` when the call fails.
.as_data_matrix <- function(x, name = "x", min_rows = 1L, finite = TRUE) {
  if (is.data.frame(x)) {
    bad <- !vapply(x, function(col) is.numeric(col) || is.logical(col), logical(1))
    if (any(bad)) {
      stop(sprintf("%s: all columns must be numeric; not numeric: %s", name,
                   paste(names(x)[bad], collapse = ", ")), call. = FALSE)
    }
    x <- as.matrix(x)
  }
  if (is.null(dim(x)) && (is.numeric(x) || is.logical(x))) x <- as.matrix(x)
  if (!(is.numeric(x) || is.logical(x)) || length(dim(x)) != 2L) {
    stop(sprintf("%s must be a numeric matrix or data frame", name), call. = FALSE)
  }
  if (nrow(x) < min_rows || ncol(x) < 1L) {
    stop(sprintf("%s must have at least %d row(s) and 1 column, got %d x %d", name, min_rows,
                 nrow(x), ncol(x)), call. = FALSE)
  }
  if (finite) .finite_or_stop(x, name)
  if (!is.double(x)) storage.mode(x) <- "double" # (it copies even a double matrix)
  x
}

# No NA, NaN or infinity in x: anyNA, min and max read x in place, where is.finite(x) would
# allocate two logical copies of it and range() one copy (c(x)) (issue 21: those and an
# unconditional storage.mode<- copy were ~2 ms of a 20000 x 8 k-means call).
.all_finite <- function(x) !anyNA(x) && is.finite(min(x)) && is.finite(max(x))

.finite_or_stop <- function(x, name) {
  if (!.all_finite(x)) stop(sprintf("%s contains NA, NaN or infinite values", name), call. = FALSE)
}

.as_vector <- function(v, name, n) {
  if (is.data.frame(v) && ncol(v) == 1L) v <- v[[1L]]
  if (is.matrix(v) && ncol(v) == 1L) v <- v[, 1L]
  if (!(is.numeric(v) || is.logical(v)) || !is.null(dim(v))) {
    stop(sprintf("%s must be a numeric vector", name), call. = FALSE)
  }
  if (!is.null(n) && length(v) != n) {
    stop(sprintf("%s has length %d, expected %d", name, length(v), n), call. = FALSE)
  }
  if (length(v) > 0L && !.all_finite(v)) {
    stop(sprintf("%s contains NA, NaN or infinite values", name), call. = FALSE)
  }
  as.double(v)
}

.as_weights <- function(weights, n) {
  if (is.null(weights)) return(NULL)
  w <- .as_vector(weights, "weights", n)
  if (any(w < 0)) stop("weights must be non-negative", call. = FALSE)
  if (!(sum(w) > 0)) stop("weights must not all be zero", call. = FALSE)
  w
}

.count <- function(v, name, min = 1, max = Inf) {
  if (!is.numeric(v) || length(v) != 1L || is.na(v) || v != round(v)) {
    stop(sprintf("%s must be a single whole number", name), call. = FALSE)
  }
  if (v < min || v > max) {
    stop(sprintf("%s must be in [%s, %s], got %s", name, format(min), format(max), format(v)),
         call. = FALSE)
  }
  as.double(v)
}

.number <- function(v, name, low, high, open_low = TRUE) {
  if (!is.numeric(v) || length(v) != 1L || !is.finite(v) ||
      (if (open_low) v <= low else v < low) || v >= high) {
    stop(sprintf("%s must be a number in %s%s, %s)", name, if (open_low) "(" else "[", format(low),
                 format(high)), call. = FALSE)
  }
  as.double(v)
}

.flag <- function(v, name) {
  if (!is.logical(v) || length(v) != 1L || is.na(v)) {
    stop(sprintf("%s must be TRUE or FALSE", name), call. = FALSE)
  }
  v
}

# The 64-bit seed of the core. NULL draws one from R's generator, so set.seed() reproduces a call;
# the seed used is recorded in every result. Seeds are whole numbers in [0, 2^53].
.seed <- function(seed) {
  if (is.null(seed)) {
    return(as.double(sample.int(.Machine$integer.max, 1L)) * 4194304 +
             as.double(sample.int(4194304L, 1L) - 1L))
  }
  .count(seed, "seed", 0, 2^53)
}

# Threads for the core: NULL = all cores. Results never depend on it.
.threads <- function(threads) {
  if (is.null(threads)) return(0)
  .count(threads, "threads", 1, 4096)
}

.match <- function(value, choices, name) {
  if (!is.character(value) || length(value) < 1L) {
    stop(sprintf("%s must be one of %s", name, paste(sprintf('"%s"', choices), collapse = ", ")),
         call. = FALSE)
  }
  value <- value[1L]
  if (!value %in% choices) {
    stop(sprintf('%s must be one of %s, got "%s"', name,
                 paste(sprintf('"%s"', choices), collapse = ", "), value), call. = FALSE)
  }
  match(value, choices) - 1L
}

#' Version of the thrifty C ABI this package is linked against
#'
#' @return An integer (the value of \code{THRIFTY_ABI_VERSION} in \code{thrifty.h}).
#' @examples
#' thrifty_abi_version()
#' @export
thrifty_abi_version <- function() .Call(thrifty_r_abi_version)

# Called from C when a long call stopped because the user pressed Ctrl-C (the C ABI's interrupt
# check saw it): signal the "interrupt" condition a Ctrl-C in R code gives, so tryCatch(interrupt =)
# and withCallingHandlers() see it, then return to the top level as R does after an interrupt.
.thrifty_interrupted <- function() {
  cond <- structure(class = c("thrifty_interrupt", "interrupt", "condition"),
                    list(message = "thrifty: interrupted", call = NULL))
  signalCondition(cond)
  invokeRestart("abort")
}
