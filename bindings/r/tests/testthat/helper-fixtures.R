# Reading the Python package's fixture files (tests/inference/fixtures/*.json, written by
# tests/inference/make_inference*_fixtures.py) and comparing R results with them. Skipped when the
# source tree's fixture files are not there (e.g. under R CMD check).

fixture_file <- function(name = "inference.json") {
  f <- test_path("..", "..", "..", "..", "tests", "inference", "fixtures", name)
  if (!file.exists(f)) skip(sprintf("tests/inference/fixtures/%s is not in this tree", name))
  skip_if_not_installed("jsonlite")
  f
}

fx_num <- function(v) {
  vapply(v, function(e) {
    if (is.character(e)) c("NaN" = NaN, "Infinity" = Inf, "-Infinity" = -Inf)[[e]] else as.double(e)
  }, numeric(1), USE.NAMES = FALSE)
}

fx_array <- function(a) {
  v <- if (a$dtype == "f") fx_num(a$data) else as.double(unlist(a$data))
  shape <- unlist(a$shape)
  if (length(shape) == 2) matrix(v, shape[1], shape[2], byrow = TRUE) else v
}

fx_arg <- function(v, inputs) {
  if (!is.character(v) || !startsWith(v, "@")) return(v)
  name <- substring(v, 2)
  if (name == "x[:, :3]") return(fx_array(inputs$x)[, 1:3])
  a <- fx_array(inputs[[name]])
  if (name == "splits") return(lapply(seq_len(nrow(a)), function(i) a[i, ] + 1))
  a
}

# The R arguments of a recorded case (x and y from the Python call when R's are not given).
fx_call_args <- function(case, inputs) {
  args <- lapply(case$call$r, fx_arg, inputs = inputs)
  if (is.null(args$x)) args$x <- fx_array(inputs$x)
  if (is.null(args$y)) args$y <- fx_arg(case$call$args[[2]], inputs)
  args$threads <- 1
  args
}

# An htest of subspace_test / pls_svd_test against a recorded SubspaceTestResult, bit for bit.
expect_split_test <- function(res, want, name) {
  expect_identical(res$p.value, fx_num(want$pvalue), label = paste(name, "p-value"))
  expect_identical(res$gate$n_eff, fx_num(want$gate$n_eff), label = paste(name, "n_eff"))
  expect_identical(res$gate$stable_rank, fx_num(want$gate$stable_rank), label = paste(name, "stable rank"))
  expect_identical(res$gate$rerouted, want$gate$rerouted, label = paste(name, "rerouted"))
  expect_identical(res$gate$forced, want$gate$forced, label = paste(name, "forced"))
  if (want$method %in% c("nb", "nb-permutation")) {
    expect_identical(unname(res$estimate), fx_num(want$statistic), label = paste(name, "statistic"))
    expect_identical(unname(res$statistic), fx_num(want$t), label = paste(name, "t"))
    expect_identical(unname(res$parameter), fx_num(want$df), label = paste(name, "df"))
    expect_identical(as.numeric(res$conf.int), fx_num(want$ci), label = paste(name, "ci"))
    expect_identical(res$r, fx_array(want$r), label = paste(name, "r"))
    expect_identical(res$rho_hat, fx_num(want$rho_hat), label = paste(name, "rho_hat"))
    expect_identical(res$n_train, fx_num(want$n_train), label = paste(name, "n_train"))
    expect_identical(res$n_test, fx_num(want$n_test), label = paste(name, "n_test"))
  } else {
    expect_identical(unname(res$statistic), fx_num(want$statistic), label = paste(name, "statistic"))
  }
  if (!is.null(want$null_distribution)) {
    expect_identical(res$null.distribution, fx_array(want$null_distribution), label = paste(name, "null"))
  }
}
