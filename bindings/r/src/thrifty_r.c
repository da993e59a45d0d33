/* .Call glue between R and the thrifty C ABI (thrifty.h). Argument checks with R-friendly
 * messages live in the R functions; this file converts R objects, passes R's column-major
 * matrices as THRIFTY_COL_MAJOR, turns 0-based indices into 1-based ones and maps a failed status
 * to an R error carrying the library's message.
 *
 * Ctrl-C: R_init_thrifty registers r_interrupt_check with the C ABI (thrifty_set_interrupt_check).
 * While a long call runs on a worker thread, the library calls it on R's main thread every 100 ms;
 * it runs R_CheckUserInterrupt under R_ToplevelExec, so a pending interrupt ends the toplevel
 * context there instead of longjmp-ing across Rust frames. The call then returns
 * THRIFTY_ERR_INTERRUPTED and check_status signals an R "interrupt" condition (.thrifty_interrupted
 * in R/utils.R), as a Ctrl-C in R code would. */
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Rdynload.h>
#include <stdint.h>
#include <string.h>

#include "thrifty.h"

static void check_status(int32_t st) {
  if (st == THRIFTY_ERR_INTERRUPTED) {
    SEXP ns = PROTECT(R_FindNamespace(PROTECT(Rf_mkString("thrifty"))));
    SEXP call = PROTECT(Rf_lang1(Rf_install(".thrifty_interrupted")));
    Rf_eval(call, ns); /* does not return */
    UNPROTECT(3);
  }
  if (st != THRIFTY_OK) Rf_error("%s", thrifty_last_error());
}

/* ---- Ctrl-C ------------------------------------------------------------------------------ */
static void check_interrupt_fn(void *unused) {
  (void)unused;
  R_CheckUserInterrupt();
}

/* Test hook (thrifty_r_test_interrupt_after): report an interrupt from poll number `fake_after`
 * on (< 0: never), counting polls, so tests can interrupt a call deterministically. */
static int fake_after = -1, polls = 0;

static int32_t r_interrupt_check(void *unused) {
  (void)unused;
  polls++;
  if (fake_after >= 0 && polls >= fake_after) return 1;
  /* FALSE: R_CheckUserInterrupt jumped out, i.e. the user pressed Ctrl-C */
  return R_ToplevelExec(check_interrupt_fn, NULL) == FALSE;
}

/* after >= 0: report an interrupt from that poll on, and reset the count; after < 0: back to
 * R's real interrupts. Returns the number of polls since the last reset. */
SEXP thrifty_r_test_interrupt_after(SEXP after) {
  int had = polls;
  fake_after = Rf_asInteger(after);
  if (fake_after == NA_INTEGER) fake_after = -1;
  polls = 0;
  return Rf_ScalarInteger(had);
}

static uint64_t as_seed(SEXP s) { return (uint64_t)Rf_asReal(s); }
static size_t as_size(SEXP s) { return (size_t)Rf_asReal(s); }
static const double *opt_real(SEXP s) { return Rf_isNull(s) ? NULL : REAL(s); }

static SEXP named_list(int n, const char **names) {
  SEXP out = PROTECT(Rf_allocVector(VECSXP, n));
  SEXP nm = PROTECT(Rf_allocVector(STRSXP, n));
  for (int i = 0; i < n; i++) SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
  Rf_setAttrib(out, R_NamesSymbol, nm);
  UNPROTECT(2);
  return out;
}

static SEXP one_based(const int64_t *v, size_t len) {
  SEXP out = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)len));
  for (size_t i = 0; i < len; i++) INTEGER(out)[i] = (int)v[i] + 1;
  UNPROTECT(1);
  return out;
}

SEXP thrifty_r_abi_version(void) { return Rf_ScalarInteger((int)thrifty_abi_version()); }

/* ---- k-means ---------------------------------------------------------------------------- */
SEXP thrifty_r_kmeans_fit(SEXP x, SEXP weights, SEXP k_, SEXP init_, SEXP init_centers, SEXP n_init, SEXP max_iter,
                          SEXP tol, SEXP algorithm, SEXP seed, SEXP threads) {
  size_t n = (size_t)Rf_nrows(x), d = (size_t)Rf_ncols(x), k = as_size(k_);
  SEXP centers = PROTECT(Rf_allocMatrix(REALSXP, (int)k, (int)d));
  SEXP init_out = PROTECT(Rf_allocMatrix(REALSXP, (int)k, (int)d));
  SEXP cluster = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)n));
  SEXP withinss = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)k));
  ThriftyKmeansInfo info;
  check_status(thrifty_kmeans_fit(REAL(x), n, d, THRIFTY_COL_MAJOR, opt_real(weights), k, Rf_asInteger(init_),
                                  opt_real(init_centers), as_size(n_init), as_size(max_iter), Rf_asReal(tol),
                                  Rf_asInteger(algorithm), as_seed(seed), as_size(threads), REAL(centers),
                                  INTEGER(cluster), REAL(withinss), REAL(init_out), &info));
  int *cl = INTEGER(cluster); /* one pointer fetch: INTEGER() is a function call per element */
  for (size_t i = 0; i < n; i++) cl[i] += 1;
  const char *names[] = {"centers", "cluster", "withinss", "init_centers", "inertia", "totss",
                         "iter", "converged", "best_run", "n_distinct"};
  SEXP out = PROTECT(named_list(10, names));
  SET_VECTOR_ELT(out, 0, centers);
  SET_VECTOR_ELT(out, 1, cluster);
  SET_VECTOR_ELT(out, 2, withinss);
  SET_VECTOR_ELT(out, 3, init_out);
  SET_VECTOR_ELT(out, 4, Rf_ScalarReal(info.inertia));
  SET_VECTOR_ELT(out, 5, Rf_ScalarReal(info.totss));
  SET_VECTOR_ELT(out, 6, Rf_ScalarInteger((int)info.n_iter));
  SET_VECTOR_ELT(out, 7, Rf_ScalarLogical((int)info.converged));
  SET_VECTOR_ELT(out, 8, Rf_ScalarInteger((int)info.best_run + 1));
  SET_VECTOR_ELT(out, 9, Rf_ScalarInteger((int)info.n_distinct_centers));
  UNPROTECT(5);
  return out;
}

SEXP thrifty_r_kmeans_predict(SEXP x, SEXP centers, SEXP threads) {
  size_t n = (size_t)Rf_nrows(x), d = (size_t)Rf_ncols(x), k = (size_t)Rf_nrows(centers);
  SEXP out = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)n));
  check_status(thrifty_kmeans_predict(REAL(x), n, d, REAL(centers), k, THRIFTY_COL_MAJOR, as_size(threads),
                                      INTEGER(out)));
  int *lab = INTEGER(out);
  for (size_t i = 0; i < n; i++) lab[i] += 1;
  UNPROTECT(1);
  return out;
}

SEXP thrifty_r_kmeans_transform(SEXP x, SEXP centers, SEXP threads) {
  size_t n = (size_t)Rf_nrows(x), d = (size_t)Rf_ncols(x), k = (size_t)Rf_nrows(centers);
  SEXP out = PROTECT(Rf_allocMatrix(REALSXP, (int)n, (int)k));
  check_status(thrifty_kmeans_transform(REAL(x), n, d, REAL(centers), k, THRIFTY_COL_MAJOR, as_size(threads),
                                        REAL(out)));
  UNPROTECT(1);
  return out;
}

/* ---- inference ---------------------------------------------------------------------------- */
/* opts: a named list with the fields of ThriftySubspaceOptions (numbers), plus basis (matrix or
 * NULL), train_indices (0-based integer vector or NULL) and train_offsets. */
static double opt_num(SEXP opts, const char *name) {
  SEXP nm = Rf_getAttrib(opts, R_NamesSymbol);
  for (R_xlen_t i = 0; i < Rf_xlength(opts); i++)
    if (strcmp(CHAR(STRING_ELT(nm, i)), name) == 0) return Rf_asReal(VECTOR_ELT(opts, i));
  Rf_error("internal: option '%s' missing", name);
  return 0;
}
static SEXP opt_get(SEXP opts, const char *name) {
  SEXP nm = Rf_getAttrib(opts, R_NamesSymbol);
  for (R_xlen_t i = 0; i < Rf_xlength(opts); i++)
    if (strcmp(CHAR(STRING_ELT(nm, i)), name) == 0) return VECTOR_ELT(opts, i);
  return R_NilValue;
}

static void fill_options(SEXP opts, ThriftySubspaceOptions *o, int64_t **train, int64_t **offsets) {
  check_status(thrifty_subspace_options_init(o));
  o->n_components = (int64_t)opt_num(opts, "n_components");
  o->learner = (int64_t)opt_num(opts, "learner");
  o->method = (int64_t)opt_num(opts, "method");
  o->n_splits = (int64_t)opt_num(opts, "n_splits");
  o->n_perm = (int64_t)opt_num(opts, "n_perm");
  o->n_folds = (int64_t)opt_num(opts, "n_folds");
  o->rotate = (int64_t)opt_num(opts, "rotate");
  o->force = (int64_t)opt_num(opts, "force");
  o->spca_n_features = (int64_t)opt_num(opts, "spca_n_features");
  o->spls_keep = (int64_t)opt_num(opts, "spls_keep");
  o->n_threads = (int64_t)opt_num(opts, "threads");
  o->seed = (uint64_t)opt_num(opts, "seed");
  o->confidence_level = opt_num(opts, "confidence_level");
  o->ridge_alpha = opt_num(opts, "ridge_alpha");
  SEXP basis = opt_get(opts, "basis");
  if (!Rf_isNull(basis)) {
    o->basis = REAL(basis);
    o->basis_cols = Rf_ncols(basis);
  }
  SEXP tr = opt_get(opts, "train_indices"), off = opt_get(opts, "train_offsets");
  if (!Rf_isNull(tr)) {
    R_xlen_t nt = Rf_xlength(tr), no = Rf_xlength(off);
    *train = (int64_t *)R_alloc((size_t)(nt > 0 ? nt : 1), sizeof(int64_t));
    *offsets = (int64_t *)R_alloc((size_t)no, sizeof(int64_t));
    for (R_xlen_t i = 0; i < nt; i++) (*train)[i] = (int64_t)REAL(tr)[i];
    for (R_xlen_t i = 0; i < no; i++) (*offsets)[i] = (int64_t)REAL(off)[i];
    o->train_indices = *train;
    o->train_offsets = *offsets;
    o->n_explicit_splits = (int64_t)(no - 1);
  }
}

/* The core's words for the route of the call just made: its warning ("" = none) and the gate's
 * reasons (one string each). Read right after the call, before any other thrifty call. */
static SEXP route_notes(void) {
  const char *names[] = {"warning", "reasons"};
  SEXP out = PROTECT(named_list(2, names));
  SET_VECTOR_ELT(out, 0, Rf_ScalarString(Rf_mkCharCE(thrifty_last_warning(), CE_UTF8)));
  SET_VECTOR_ELT(out, 1, Rf_ScalarString(Rf_mkCharCE(thrifty_last_gate_reasons(), CE_UTF8)));
  UNPROTECT(1);
  return out;
}

/* The list of a ThriftySubspaceResult, with the per-split r, the null and the route notes. */
static SEXP subspace_list(const ThriftySubspaceResult *res, const double *r, const double *nul) {
  const char *names[] = {"p_value", "statistic", "t", "df", "z_mean", "z_sd", "se", "rho_hat", "r2", "ci_low",
                         "ci_high", "n_train", "n_test", "method", "n_components", "n_constant_columns", "seed",
                         "gate_n_eff", "gate_stable_rank", "gate_n_columns", "gate_reroute", "gate_rerouted",
                         "gate_forced", "r", "null_distribution", "notes"};
  SEXP notes = PROTECT(route_notes());
  SEXP out = PROTECT(named_list(26, names));
  double scal[] = {res->p_value, res->statistic, res->t, res->df, res->z_mean, res->z_sd, res->se, res->rho_hat,
                   res->r2, res->ci_low, res->ci_high, res->n_train, res->n_test, (double)res->method,
                   (double)res->n_components, (double)res->n_constant_columns, (double)res->seed, res->gate_n_eff,
                   res->gate_stable_rank, (double)res->gate_n_columns, (double)res->gate_reroute,
                   (double)res->gate_rerouted, (double)res->gate_forced};
  for (int i = 0; i < 23; i++) SET_VECTOR_ELT(out, i, Rf_ScalarReal(scal[i]));
  SEXP rv = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)res->n_splits));
  if (res->n_splits > 0) memcpy(REAL(rv), r, (size_t)res->n_splits * sizeof(double));
  SET_VECTOR_ELT(out, 23, rv);
  int64_t nn = (res->method == THRIFTY_METHOD_JACKKNIFE || res->method == THRIFTY_METHOD_NB) ? 0 : res->n_perm;
  SEXP nv = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)nn));
  if (nn > 0) memcpy(REAL(nv), nul, (size_t)nn * sizeof(double));
  SET_VECTOR_ELT(out, 24, nv);
  SET_VECTOR_ELT(out, 25, notes);
  UNPROTECT(4);
  return out;
}

SEXP thrifty_r_subspace_test(SEXP x, SEXP y, SEXP weights, SEXP opts) {
  size_t n = (size_t)Rf_nrows(x), p = (size_t)Rf_ncols(x);
  ThriftySubspaceOptions o;
  int64_t *train = NULL, *offsets = NULL;
  fill_options(opts, &o, &train, &offsets);
  size_t r_len = o.train_indices ? (size_t)o.n_explicit_splits : (size_t)(o.n_splits > 0 ? o.n_splits : 0);
  size_t null_len = (size_t)(o.n_perm > 0 ? o.n_perm : 0);
  double *r = (double *)R_alloc(r_len + 1, sizeof(double));
  double *nul = (double *)R_alloc(null_len + 1, sizeof(double));
  ThriftySubspaceResult res;
  if (Rf_isMatrix(y) && Rf_ncols(y) > 1) /* PLS2: a multi-column response */
    check_status(thrifty_subspace_test_multi(REAL(x), n, p, THRIFTY_COL_MAJOR, REAL(y), (size_t)Rf_ncols(y),
                                             opt_real(weights), &o, &res, r, r_len, nul, null_len));
  else
    check_status(thrifty_subspace_test(REAL(x), n, p, THRIFTY_COL_MAJOR, REAL(y), opt_real(weights), &o, &res, r,
                                       r_len, nul, null_len));
  return subspace_list(&res, r, nul);
}

SEXP thrifty_r_component_tests(SEXP x, SEXP y, SEXP weights, SEXP opts, SEXP max_components, SEXP alpha) {
  size_t n = (size_t)Rf_nrows(x), p = (size_t)Rf_ncols(x);
  ThriftySubspaceOptions o;
  int64_t *train = NULL, *offsets = NULL;
  fill_options(opts, &o, &train, &offsets);
  size_t cap = p < 10 ? 10 : p;
  if ((size_t)Rf_asReal(max_components) > cap) cap = (size_t)Rf_asReal(max_components);
  double *pv = (double *)R_alloc(cap, sizeof(double));
  ThriftyComponentResult res;
  check_status(thrifty_component_tests(REAL(x), n, p, THRIFTY_COL_MAJOR, REAL(y), opt_real(weights), &o,
                                       (int64_t)Rf_asReal(max_components), Rf_asReal(alpha), &res, pv, cap));
  const char *names[] = {"k_star", "p_values", "method", "gate_reroute", "gate_rerouted", "seed", "notes"};
  SEXP notes = PROTECT(route_notes());
  SEXP out = PROTECT(named_list(7, names));
  SET_VECTOR_ELT(out, 6, notes);
  SET_VECTOR_ELT(out, 0, Rf_ScalarInteger((int)res.k_star));
  SEXP pvs = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)res.n_steps));
  if (res.n_steps > 0) memcpy(REAL(pvs), pv, (size_t)res.n_steps * sizeof(double));
  SET_VECTOR_ELT(out, 1, pvs);
  SET_VECTOR_ELT(out, 2, Rf_ScalarReal((double)res.method));
  SET_VECTOR_ELT(out, 3, Rf_ScalarLogical((int)res.gate_reroute));
  SET_VECTOR_ELT(out, 4, Rf_ScalarLogical((int)res.gate_rerouted));
  SET_VECTOR_ELT(out, 5, Rf_ScalarReal((double)res.seed));
  UNPROTECT(3);
  return out;
}

/* ---- inference additions ------------------------------------------------------------------ */
static SEXP real_matrix(size_t rows, size_t cols) {
  return Rf_allocMatrix(REALSXP, (int)rows, (int)cols);
}

SEXP thrifty_r_spls_basis(SEXP x, SEXP y, SEXP weights, SEXP k_, SEXP keep_) {
  size_t n = (size_t)Rf_nrows(x), p = (size_t)Rf_ncols(x), k = as_size(k_);
  SEXP basis = PROTECT(real_matrix(p, k));
  int64_t keep = 0;
  check_status(thrifty_spls_basis(REAL(x), n, p, THRIFTY_COL_MAJOR, REAL(y), opt_real(weights), (int64_t)k,
                                  (int64_t)Rf_asReal(keep_), REAL(basis), &keep));
  const char *names[] = {"basis", "keep"};
  SEXP out = PROTECT(named_list(2, names));
  SET_VECTOR_ELT(out, 0, basis);
  SET_VECTOR_ELT(out, 1, Rf_ScalarInteger((int)keep));
  UNPROTECT(2);
  return out;
}

SEXP thrifty_r_pls_svd_test(SEXP x, SEXP y, SEXP opts) {
  size_t n = (size_t)Rf_nrows(x), p = (size_t)Rf_ncols(x), q = (size_t)Rf_ncols(y);
  ThriftySubspaceOptions o;
  int64_t *train = NULL, *offsets = NULL;
  fill_options(opts, &o, &train, &offsets);
  size_t k = o.n_components > 0 ? (size_t)o.n_components : 1;
  size_t r_len = o.train_indices ? (size_t)o.n_explicit_splits : (size_t)(o.n_splits > 0 ? o.n_splits : 0);
  size_t null_len = (size_t)(o.n_perm > 0 ? o.n_perm : 0);
  double *r = (double *)R_alloc(r_len + 1, sizeof(double));
  double *nul = (double *)R_alloc(null_len + 1, sizeof(double));
  SEXP xw = PROTECT(real_matrix(p, k)), yw = PROTECT(real_matrix(q, k));
  SEXP sv = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)k));
  ThriftySubspaceResult res;
  check_status(thrifty_pls_svd_test(REAL(x), n, p, REAL(y), q, THRIFTY_COL_MAJOR, &o, &res, r, r_len, nul, null_len,
                                    REAL(xw), REAL(yw), REAL(sv)));
  SEXP test = PROTECT(subspace_list(&res, r, nul));
  const char *names[] = {"test", "x_weights", "y_weights", "singular_values"};
  SEXP out = PROTECT(named_list(4, names));
  SET_VECTOR_ELT(out, 0, test);
  SET_VECTOR_ELT(out, 1, xw);
  SET_VECTOR_ELT(out, 2, yw);
  SET_VECTOR_ELT(out, 3, sv);
  UNPROTECT(5);
  return out;
}

SEXP thrifty_r_select_n_components(SEXP x, SEXP y, SEXP k_max, SEXP keep, SEXP n_folds, SEXP seed, SEXP threads) {
  size_t n = (size_t)Rf_nrows(x), p = (size_t)Rf_ncols(x), kmax = as_size(k_max), folds = as_size(n_folds);
  SEXP fold = PROTECT(real_matrix(kmax, folds));
  SEXP mean = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)kmax)), se = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)kmax));
  ThriftyCvCurveResult res;
  check_status(thrifty_select_n_components(REAL(x), n, p, THRIFTY_COL_MAJOR, REAL(y), (int64_t)kmax,
                                           (int64_t)Rf_asReal(keep), (int64_t)folds, as_seed(seed),
                                           (int64_t)Rf_asReal(threads), &res, REAL(fold), REAL(mean), REAL(se)));
  const char *names[] = {"choice_max", "choice_one_se", "fold_r2", "mean", "se"};
  SEXP out = PROTECT(named_list(5, names));
  SET_VECTOR_ELT(out, 0, Rf_ScalarInteger((int)res.choice_max));
  SET_VECTOR_ELT(out, 1, Rf_ScalarInteger((int)res.choice_one_se));
  SET_VECTOR_ELT(out, 2, fold);
  SET_VECTOR_ELT(out, 3, mean);
  SET_VECTOR_ELT(out, 4, se);
  UNPROTECT(4);
  return out;
}

SEXP thrifty_r_rotation_stability(SEXP x, SEXP y, SEXP k_, SEXP n_boot, SEXP m_, SEXP seed, SEXP threads) {
  size_t n = (size_t)Rf_nrows(x), p = (size_t)Rf_ncols(x), k = as_size(k_), b = as_size(n_boot), m = as_size(m_);
  SEXP rot = PROTECT(real_matrix(b, k)), unrot = PROTECT(real_matrix(b, k));
  SEXP axes = PROTECT(real_matrix(p, k)), w = PROTECT(real_matrix(p, k));
  check_status(thrifty_rotation_stability(REAL(x), n, p, THRIFTY_COL_MAJOR, REAL(y), (int64_t)k, (int64_t)b,
                                          (int64_t)m, as_seed(seed), (int64_t)Rf_asReal(threads), REAL(rot), REAL(unrot),
                                          REAL(axes), REAL(w)));
  const char *names[] = {"congruence", "congruence_unrotated", "axes", "weights"};
  SEXP out = PROTECT(named_list(4, names));
  SET_VECTOR_ELT(out, 0, rot);
  SET_VECTOR_ELT(out, 1, unrot);
  SET_VECTOR_ELT(out, 2, axes);
  SET_VECTOR_ELT(out, 3, w);
  UNPROTECT(5);
  return out;
}

SEXP thrifty_r_subsample_replicates(SEXP x, SEXP y, SEXP weights, SEXP k_, SEXP n_sub, SEXP m_, SEXP seed,
                                    SEXP threads) {
  size_t n = (size_t)Rf_nrows(x), p = (size_t)Rf_ncols(x), b = as_size(n_sub);
  SEXP coef = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)p)), lev = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)p));
  SEXP csub = PROTECT(real_matrix(b, p)), lsub = PROTECT(real_matrix(b, p));
  check_status(thrifty_subsample_replicates(REAL(x), n, p, THRIFTY_COL_MAJOR, REAL(y), opt_real(weights),
                                            (int64_t)Rf_asReal(k_), (int64_t)b, (int64_t)Rf_asReal(m_),
                                            as_seed(seed), (int64_t)Rf_asReal(threads), REAL(coef), REAL(lev),
                                            REAL(csub), REAL(lsub)));
  const char *names[] = {"coef", "leverage", "coef_sub", "leverage_sub"};
  SEXP out = PROTECT(named_list(4, names));
  SET_VECTOR_ELT(out, 0, coef);
  SET_VECTOR_ELT(out, 1, lev);
  SET_VECTOR_ELT(out, 2, csub);
  SET_VECTOR_ELT(out, 3, lsub);
  UNPROTECT(5);
  return out;
}

/* ---- DPP ------------------------------------------------------------------------------------ */
SEXP thrifty_r_orthonormalize(SEXP x, SEXP rtol) {
  size_t n = (size_t)Rf_nrows(x), p = (size_t)Rf_ncols(x), rank = 0;
  double *q = (double *)R_alloc(n * p, sizeof(double));
  check_status(thrifty_dpp_orthonormalize(REAL(x), n, p, THRIFTY_COL_MAJOR, Rf_asReal(rtol), q, &rank));
  SEXP out = PROTECT(Rf_allocMatrix(REALSXP, (int)n, (int)rank));
  memcpy(REAL(out), q, n * rank * sizeof(double));
  UNPROTECT(1);
  return out;
}

/* count x width matrix of 1-based indices from a sample-major buffer */
static SEXP sample_matrix(const int64_t *s, size_t count, size_t width) {
  SEXP out = PROTECT(Rf_allocMatrix(INTSXP, (int)count, (int)width));
  for (size_t i = 0; i < count; i++)
    for (size_t j = 0; j < width; j++) INTEGER(out)[j * count + i] = (int)s[i * width + j] + 1;
  UNPROTECT(1);
  return out;
}

SEXP thrifty_r_projection_sample(SEXP u, SEXP check, SEXP method, SEXP count, SEXP seed, SEXP threads) {
  size_t n = (size_t)Rf_nrows(u), p = (size_t)Rf_ncols(u), c = as_size(count);
  int64_t *s = (int64_t *)R_alloc(c * p + 1, sizeof(int64_t));
  SEXP lev = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)n));
  check_status(thrifty_dpp_projection_sample(REAL(u), n, p, THRIFTY_COL_MAJOR, Rf_asInteger(check),
                                             Rf_asInteger(method), c, as_seed(seed), as_size(threads), s, REAL(lev)));
  const char *names[] = {"samples", "inclusion"};
  SEXP out = PROTECT(named_list(2, names));
  SET_VECTOR_ELT(out, 0, sample_matrix(s, c, p));
  SET_VECTOR_ELT(out, 1, lev);
  UNPROTECT(2);
  return out;
}

SEXP thrifty_r_lensemble_sample(SEXP L, SEXP features, SEXP count, SEXP seed, SEXP threads) {
  SEXP m = Rf_isNull(L) ? features : L;
  size_t n = (size_t)Rf_nrows(m), d = Rf_isNull(features) ? 0 : (size_t)Rf_ncols(features), c = as_size(count);
  SEXP incl = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)n));
  ThriftyRagged rg = {0};
  check_status(thrifty_dpp_lensemble_sample(opt_real(L), opt_real(features), n, d, THRIFTY_COL_MAJOR, c,
                                            as_seed(seed), as_size(threads), &rg, REAL(incl)));
  SEXP samples = PROTECT(Rf_allocVector(VECSXP, (R_xlen_t)rg.n_rows));
  for (size_t s = 0; s < rg.n_rows; s++)
    SET_VECTOR_ELT(samples, (R_xlen_t)s, one_based(rg.values + rg.offsets[s], (size_t)(rg.offsets[s + 1] - rg.offsets[s])));
  thrifty_ragged_free(&rg);
  const char *names[] = {"samples", "inclusion"};
  SEXP out = PROTECT(named_list(2, names));
  SET_VECTOR_ELT(out, 0, samples);
  SET_VECTOR_ELT(out, 1, incl);
  UNPROTECT(3);
  return out;
}

SEXP thrifty_r_kdpp_sample(SEXP L, SEXP features, SEXP k_, SEXP count, SEXP seed, SEXP threads) {
  SEXP m = Rf_isNull(L) ? features : L;
  size_t n = (size_t)Rf_nrows(m), d = Rf_isNull(features) ? 0 : (size_t)Rf_ncols(features);
  size_t k = as_size(k_), c = as_size(count);
  int64_t *s = (int64_t *)R_alloc(c * k + 1, sizeof(int64_t));
  check_status(thrifty_dpp_kdpp_sample(opt_real(L), opt_real(features), n, d, THRIFTY_COL_MAJOR, k, c, as_seed(seed),
                                       as_size(threads), s));
  return sample_matrix(s, c, k);
}

SEXP thrifty_r_coreset(SEXP x, SEXP m_, SEXP kernel, SEXP split, SEXP order, SEXP jacobi, SEXP density, SEXP domain,
                       SEXP self_normalized, SEXP seed) {
  size_t n = (size_t)Rf_nrows(x), d = (size_t)Rf_ncols(x), m = as_size(m_), size = 0;
  ThriftyCoresetOptions o;
  check_status(thrifty_coreset_options_init(&o));
  o.kernel = Rf_asInteger(kernel);
  o.split = Rf_asInteger(split);
  o.order = Rf_asInteger(order);
  o.jacobi_a = REAL(jacobi)[0];
  o.jacobi_b = REAL(jacobi)[1];
  o.density = opt_real(density);
  o.domain = opt_real(domain);
  o.self_normalized = Rf_asLogical(self_normalized);
  int64_t *idx = (int64_t *)R_alloc(m, sizeof(int64_t));
  double *w = (double *)R_alloc(m, sizeof(double));
  SEXP incl = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)n));
  check_status(thrifty_dpp_coreset(REAL(x), n, d, THRIFTY_COL_MAJOR, m, &o, as_seed(seed), idx, w, &size, REAL(incl)));
  const char *names[] = {"indices", "weights", "inclusion"};
  SEXP out = PROTECT(named_list(3, names));
  SET_VECTOR_ELT(out, 0, one_based(idx, size));
  SEXP wv = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)size));
  memcpy(REAL(wv), w, size * sizeof(double));
  SET_VECTOR_ELT(out, 1, wv);
  SET_VECTOR_ELT(out, 2, incl);
  UNPROTECT(3);
  return out;
}

/* list(indices, conditional_variances[, gains][, log_det]): the optional parts where not NULL */
static SEXP path_list(const int64_t *items, const double *piv, const double *gains, const double *log_det,
                      size_t len) {
  const char *names[4] = {"indices", "conditional_variances", NULL, NULL};
  int n = 2;
  if (gains) names[n++] = "gains";
  if (log_det) names[n++] = "log_det";
  SEXP out = PROTECT(named_list(n, names));
  SET_VECTOR_ELT(out, 0, one_based(items, len));
  SEXP pv = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)len));
  memcpy(REAL(pv), piv, len * sizeof(double));
  SET_VECTOR_ELT(out, 1, pv);
  n = 2;
  if (gains) {
    SEXP gv = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)len));
    memcpy(REAL(gv), gains, len * sizeof(double));
    SET_VECTOR_ELT(out, n++, gv);
    UNPROTECT(1);
  }
  if (log_det) SET_VECTOR_ELT(out, n, Rf_ScalarReal(*log_det));
  UNPROTECT(2);
  return out;
}

SEXP thrifty_r_select_entropy(SEXP cov, SEXP k_, SEXP tol, SEXP check) {
  size_t n = (size_t)Rf_nrows(cov), k = as_size(k_), nsel = 0;
  int64_t *items = (int64_t *)R_alloc(k, sizeof(int64_t));
  double *piv = (double *)R_alloc(k, sizeof(double));
  check_status(thrifty_dpp_select_entropy(REAL(cov), n, THRIFTY_COL_MAJOR, k, Rf_asReal(tol), Rf_asInteger(check),
                                          items, piv, &nsel));
  return path_list(items, piv, NULL, NULL, nsel);
}

SEXP thrifty_r_greedy_map(SEXP features, SEXP k_, SEXP tol) {
  size_t n = (size_t)Rf_nrows(features), d = (size_t)Rf_ncols(features), k = as_size(k_), nsel = 0;
  int64_t *items = (int64_t *)R_alloc(k, sizeof(int64_t));
  double *piv = (double *)R_alloc(k, sizeof(double));
  double log_det = 0.0;
  check_status(
      thrifty_dpp_greedy_map(REAL(features), n, d, THRIFTY_COL_MAJOR, k, Rf_asReal(tol), items, piv, &nsel, &log_det));
  /* log det from the core: exact even where the variances of extreme features are not representable */
  return path_list(items, piv, NULL, &log_det, nsel);
}

SEXP thrifty_r_select_mi(SEXP cov, SEXP k_, SEXP noise, SEXP check) {
  size_t n = (size_t)Rf_nrows(cov), k = as_size(k_), nsel = 0;
  int64_t *items = (int64_t *)R_alloc(k, sizeof(int64_t));
  double *piv = (double *)R_alloc(k, sizeof(double)), *gains = (double *)R_alloc(k, sizeof(double));
  check_status(thrifty_dpp_select_mutual_information(REAL(cov), n, THRIFTY_COL_MAJOR, k, Rf_asReal(noise),
                                                     Rf_asLogical(check), items, piv, gains, &nsel));
  return path_list(items, piv, gains, NULL, nsel);
}

static const R_CallMethodDef call_methods[] = {
    {"thrifty_r_abi_version", (DL_FUNC)&thrifty_r_abi_version, 0},
    {"thrifty_r_kmeans_fit", (DL_FUNC)&thrifty_r_kmeans_fit, 11},
    {"thrifty_r_kmeans_predict", (DL_FUNC)&thrifty_r_kmeans_predict, 3},
    {"thrifty_r_kmeans_transform", (DL_FUNC)&thrifty_r_kmeans_transform, 3},
    {"thrifty_r_subspace_test", (DL_FUNC)&thrifty_r_subspace_test, 4},
    {"thrifty_r_component_tests", (DL_FUNC)&thrifty_r_component_tests, 6},
    {"thrifty_r_spls_basis", (DL_FUNC)&thrifty_r_spls_basis, 5},
    {"thrifty_r_pls_svd_test", (DL_FUNC)&thrifty_r_pls_svd_test, 3},
    {"thrifty_r_select_n_components", (DL_FUNC)&thrifty_r_select_n_components, 7},
    {"thrifty_r_rotation_stability", (DL_FUNC)&thrifty_r_rotation_stability, 7},
    {"thrifty_r_subsample_replicates", (DL_FUNC)&thrifty_r_subsample_replicates, 8},
    {"thrifty_r_orthonormalize", (DL_FUNC)&thrifty_r_orthonormalize, 2},
    {"thrifty_r_projection_sample", (DL_FUNC)&thrifty_r_projection_sample, 6},
    {"thrifty_r_lensemble_sample", (DL_FUNC)&thrifty_r_lensemble_sample, 5},
    {"thrifty_r_kdpp_sample", (DL_FUNC)&thrifty_r_kdpp_sample, 6},
    {"thrifty_r_coreset", (DL_FUNC)&thrifty_r_coreset, 10},
    {"thrifty_r_select_entropy", (DL_FUNC)&thrifty_r_select_entropy, 4},
    {"thrifty_r_greedy_map", (DL_FUNC)&thrifty_r_greedy_map, 3},
    {"thrifty_r_select_mi", (DL_FUNC)&thrifty_r_select_mi, 4},
    {"thrifty_r_test_interrupt_after", (DL_FUNC)&thrifty_r_test_interrupt_after, 1},
    {NULL, NULL, 0}};

void R_init_thrifty(DllInfo *dll) {
  R_registerRoutines(dll, NULL, call_methods, NULL, NULL);
  R_useDynamicSymbols(dll, FALSE);
  R_forceSymbols(dll, TRUE);
  /* every .Call runs on R's main thread: the one that registers the check here */
  thrifty_set_interrupt_check(r_interrupt_check, NULL, 0);
}
