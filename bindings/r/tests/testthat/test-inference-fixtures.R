# The C ABI route gives the recorded results bit for bit: tests/inference/fixtures/inference.json
# holds inputs and results written by the Python package before issue 20 moved the route into the
# core (tests/inference/make_inference_fixtures.py). Every case with R arguments is recomputed
# here. Skipped when the source tree's fixture file is not there (e.g. under R CMD check).

# (fixture_file, fx_* and expect_split_test: helper-fixtures.R)

test_that("the C ABI reproduces every recorded inference result bit for bit", {
  fx <- jsonlite::fromJSON(fixture_file(), simplifyVector = FALSE)
  inputs <- fx$inputs
  n_cases <- 0
  for (name in names(fx$cases)) {
    case <- fx$cases[[name]]
    ra <- case$call$r
    if (is.null(ra)) next
    args <- fx_call_args(case, inputs)
    want <- case$result
    res <- suppressWarnings(do.call(case$call$`function`, args))
    n_cases <- n_cases + 1
    if (case$call$`function` == "component_tests") {
      expect_identical(res$k_star, as.integer(want$k_star), label = paste(name, "k_star"))
      expect_identical(res$p_values, fx_array(want$p_values), label = paste(name, "p-values"))
      expect_identical(res$method, want$method, label = paste(name, "method"))
      next
    }
    expect_split_test(res, want, name)
    # the gate's reasons are the core's words, as in Python
    expect_identical(res$gate$reasons, as.character(unlist(want$gate$reasons)), label = paste(name, "reasons"))
  }
  expect_gte(n_cases, 40)
})
