# Out of memory is an R error, never an abort of the R process (issue 21, point 1). Every R call
# passes column-major matrices, which the C ABI copies to row-major: that copy (the size of x) is
# allocated fallibly. Checked in a child R process under an address-space limit (`ulimit -v`),
# where x itself fits but a second copy of it does not.
#
# The limit is measured, not fixed: what a small fit needs depends on the machine (each worker
# thread's matrix-product workspace is twice the L3 cache estimate: 128 MiB on one machine, 600 MiB
# on a VM reporting a 300 MiB L3). A first child without a limit reports its address space after
# loading the package (`base`) and its peak after a small fit (`peak`), both from /proc.
child <- function(code, limit_kb = NULL) {
  rscript <- file.path(R.home("bin"), "Rscript")
  script <- tempfile(fileext = ".R")
  writeLines(c("suppressPackageStartupMessages(library(thrifty))", code), script)
  on.exit(unlink(script))
  libs <- paste(.libPaths(), collapse = .Platform$path.sep)
  limit <- if (is.null(limit_kb)) "" else sprintf("ulimit -v %.0f; ", limit_kb)
  cmd <- sprintf("%sR_LIBS=%s %s %s 2>&1", limit, shQuote(libs), shQuote(rscript), shQuote(script))
  out <- suppressWarnings(system2("bash", c("-c", shQuote(cmd)), stdout = TRUE))
  list(out = paste(out, collapse = "\n"), status = attr(out, "status") %||% 0L)
}
`%||%` <- function(a, b) if (is.null(a)) b else a

vm_kb <- c(
  "vm_kb <- function(key) {",
  "  line <- grep(paste0('^', key, ':'), readLines('/proc/self/status'), value = TRUE)",
  "  as.numeric(strsplit(trimws(sub('^[^:]*:', '', line)), ' +')[[1]][1])",
  "}")
small_fit <- c(
  "set.seed(1); small <- matrix(rnorm(20000), 1000, 20)",
  "fit <- hartigan_kmeans(small, 2, threads = 1, seed = 1)")

test_that("a matrix whose row-major copy does not fit is an R error naming the buffer", {
  if (.Platform$OS.type != "unix" || !nzchar(Sys.which("bash")) || !file.exists("/proc/self/status")) {
    skip("needs bash, ulimit and /proc")
  }
  probe <- child(c(vm_kb, "base <- vm_kb('VmSize')", small_fit,
                   "cat('KB', base, vm_kb('VmPeak'), '\\n')"))
  expect_identical(probe$status, 0L, info = probe$out)
  kb <- as.numeric(strsplit(regmatches(probe$out, regexpr("KB [0-9.]+ [0-9.]+", probe$out)), " ")[[1]][2:3])
  # the limit leaves 300 MB above the small fit's peak; x takes 70% of the room above `base`, so
  # x fits and a second copy of it (140%) does not
  limit_kb <- kb[2] + 300000
  rows <- floor(0.7 * (limit_kb - kb[1]) * 1024 / (20 * 8))
  calls <- c(
    sprintf("x <- matrix(0.5, %.0f, 20); x[1, 1] <- 1", rows),
    "f <- function(e) cat('ERROR:', conditionMessage(e), '\\n')",
    "tryCatch(hartigan_kmeans(x, 2, threads = 1, iter.max = 1, seed = 1), error = f)",
    "tryCatch(subspace_test(x, rnorm(nrow(x)), ncomp = 1, threads = 1), error = f)",
    "rm(x); invisible(gc())",
    small_fit,
    "cat('SMALL FIT OK', length(fit$cluster), '\\n')")
  res <- child(calls, limit_kb)
  info <- paste(sprintf("limit %.0f kB, base %.0f kB, small-fit peak %.0f kB, %.0f rows", limit_kb, kb[1], kb[2], rows), res$out)
  expect_identical(res$status, 0L, info = info)
  expect_match(res$out, "ERROR: cannot allocate the row-major copy of a column-major matrix", info = info)
  expect_identical(lengths(regmatches(res$out, gregexpr("ERROR: cannot allocate", res$out))), 2L, info = info)
  expect_match(res$out, "SMALL FIT OK 1000", info = info)
})
