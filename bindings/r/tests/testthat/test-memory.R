# Out of memory is an R error, never an abort of the R process (issue 21, point 1). Every R call
# passes column-major matrices, which the C ABI copies to row-major: that copy (the size of x) is
# allocated fallibly. Checked in a child R process under an address-space limit (`ulimit -v`),
# where x itself fits but a second copy of it does not.
run_limited <- function(code, limit_kb = 700000L) {
  if (.Platform$OS.type != "unix" || !nzchar(Sys.which("bash"))) skip("needs bash and ulimit")
  rscript <- file.path(R.home("bin"), "Rscript")
  script <- tempfile(fileext = ".R")
  writeLines(c("suppressPackageStartupMessages(library(thrifty))", code), script)
  on.exit(unlink(script))
  libs <- paste(.libPaths(), collapse = .Platform$path.sep)
  cmd <- sprintf("ulimit -v %d; R_LIBS=%s %s %s 2>&1", limit_kb, shQuote(libs), shQuote(rscript), shQuote(script))
  out <- suppressWarnings(system2("bash", c("-c", shQuote(cmd)), stdout = TRUE))
  list(out = paste(out, collapse = "\n"), status = attr(out, "status") %||% 0L)
}
`%||%` <- function(a, b) if (is.null(a)) b else a

test_that("a matrix whose row-major copy does not fit is an R error naming the buffer", {
  calls <- c(
    "x <- matrix(0.5, 2.5e6, 20); x[1, 1] <- 1",
    "f <- function(e) cat('ERROR:', conditionMessage(e), '\\n')",
    "tryCatch(hartigan_kmeans(x, 2, threads = 1, iter.max = 1, seed = 1), error = f)",
    "tryCatch(subspace_test(x, rnorm(nrow(x)), ncomp = 1, threads = 1), error = f)",
    "small <- x[1:1000, ]; rm(x); invisible(gc())",
    "fit <- hartigan_kmeans(small, 2, threads = 1, seed = 1)",
    "cat('SMALL FIT OK', length(fit$cluster), '\\n')")
  res <- run_limited(calls)
  expect_identical(res$status, 0L, info = res$out)
  expect_match(res$out, "ERROR: cannot allocate the row-major copy of a column-major matrix", info = res$out)
  expect_identical(lengths(regmatches(res$out, gregexpr("ERROR: cannot allocate", res$out))), 2L, info = res$out)
  expect_match(res$out, "SMALL FIT OK 1000", info = res$out)
})
