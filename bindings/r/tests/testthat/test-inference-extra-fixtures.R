# The inference additions through the C ABI give the Python package's recorded results:
# tests/inference/fixtures/inference_extra.json (tests/inference/make_inference_extra_fixtures.py;
# inputs from inference.json). What the core computes is compared bit for bit; the summaries that R
# computes from the core's replicates (percentile intervals, means, standard errors) to 1e-12.

run_recorded <- function(case, inputs) {
  warned <- character(0)
  res <- withCallingHandlers(do.call(case$call$`function`, fx_call_args(case, inputs)), warning = function(w) {
    warned <<- c(warned, conditionMessage(w))
    invokeRestart("muffleWarning")
  })
  list(res = res, warned = warned)
}

test_that("the C ABI reproduces every recorded result of the inference additions", {
  inputs <- jsonlite::fromJSON(fixture_file(), simplifyVector = FALSE)$inputs
  fx <- jsonlite::fromJSON(fixture_file("inference_extra.json"), simplifyVector = FALSE)
  seen <- character(0)
  for (name in names(fx$cases)) {
    case <- fx$cases[[name]]
    want <- case$result
    got <- run_recorded(case, inputs)
    res <- got$res
    fun <- case$call$`function`
    seen <- c(seen, fun)
    # a GateWarning in Python is the core's warning text in R
    gate_warned <- any(grepl("NB-asymptotic approximation not trusted", got$warned, fixed = TRUE))
    expect_identical(gate_warned, "GateWarning" %in% unlist(case$warnings), label = paste(name, "gate warning"))
    if (fun == "subspace_test") {
      expect_split_test(res, want, name)
      expect_identical(res$gate$reasons, as.character(unlist(want$gate$reasons)), label = paste(name, "reasons"))
      expect_identical(res$basis, fx_array(want$basis), label = paste(name, "basis"))
    } else if (fun == "pls_svd_test") {
      expect_split_test(res, want$test, name)
      expect_identical(res$gate$reasons, as.character(unlist(want$test$gate$reasons)), label = paste(name, "reasons"))
      for (f in c("x_weights", "y_weights", "singular_values")) {
        expect_identical(res[[f]], fx_array(want[[f]]), label = paste(name, f))
      }
    } else if (fun == "select_n_components") {
      expect_identical(res$n_components, as.integer(want$n_components), label = paste(name, "choice"))
      expect_identical(res$cv_r2, fx_array(want$cv_r2), label = paste(name, "cv_r2"))
      expect_identical(res$cv_se, fx_array(want$cv_se), label = paste(name, "cv_se"))
      expect_identical(res$fold_r2, fx_array(want$fold_r2), label = paste(name, "fold_r2"))
      if (!is.null(want$sequence)) {
        expect_identical(res$sequence$p_values, fx_array(want$sequence$p_values), label = paste(name, "sequence"))
      }
    } else if (fun == "rotation_stability") {
      expect_identical(c(res$resample, as.character(res$m)), c(want$resample, as.character(want$m)),
                       label = paste(name, "resample"))
      for (f in c("axes", "weights", "congruence", "congruence_unrotated")) {
        expect_identical(res[[f]], fx_array(want[[f]]), label = paste(name, f))
      }
      for (f in c("mean", "mean_unrotated", "ci", "share_fair")) {
        expect_equal(res[[f]], fx_array(want[[f]]), tolerance = 1e-12, label = paste(name, f))
      }
    } else if (fun == "coefficient_intervals") {
      expect_identical(res$coef, fx_array(want$coef), label = paste(name, "coef"))
      expect_identical(res$leverage, fx_array(want$leverage), label = paste(name, "leverage"))
      expect_identical(c(res$m, res$n_failed), as.integer(c(want$m, want$n_failed)), label = paste(name, "m"))
      for (f in c("coef_ci", "leverage_ci", "coef_z")) {
        expect_equal(res[[f]], fx_array(want[[f]]), tolerance = 1e-12, label = paste(name, f))
      }
    } else {
      stop("unknown recorded function ", fun)
    }
  }
  expect_setequal(unique(seen), c("subspace_test", "pls_svd_test", "select_n_components", "rotation_stability",
                                  "coefficient_intervals"))
  expect_gte(length(seen), 16)
})
