/* C test program of the thrifty C ABI: calls every exported function with good and bad input
 * (NULL pointers, zero sizes, NaN, k > n, unknown codes) and checks results and status codes.
 * Built and run under AddressSanitizer + UBSan by scripts/test.sh (see rust/thrifty-capi/tests/c/run.sh).
 * test_interrupt() registers an interrupt check that stops long calls after a fixed number of polls.
 * julia_snippet() makes exactly the calls of the README's Julia snippet, with column-major input. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "thrifty.h"

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                                  \
  do {                                                                               \
    checks++;                                                                        \
    if (!(cond)) {                                                                   \
      failures++;                                                                    \
      fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              thrifty_last_error());                                                 \
    }                                                                                \
  } while (0)

/* A call that must fail with `status` and leave a non-empty message naming something. */
#define EXPECT_ERR(call, status)                                                       \
  do {                                                                                 \
    int32_t st_ = (call);                                                              \
    checks++;                                                                          \
    if (st_ != (status) || strlen(thrifty_last_error()) == 0) {                        \
      failures++;                                                                      \
      fprintf(stderr, "FAIL %s:%d: %s returned %d (want %d), message '%s'\n", __FILE__, \
              __LINE__, #call, st_, (status), thrifty_last_error());                   \
    }                                                                                  \
  } while (0)

#define EXPECT_OK(call) EXPECT_ERR_OK(call, __LINE__)
static void EXPECT_ERR_OK(int32_t st, int line) {
  checks++;
  if (st != THRIFTY_OK) {
    failures++;
    fprintf(stderr, "FAIL line %d: status %d: %s\n", line, st, thrifty_last_error());
  } else if (thrifty_last_error()[0] != '\0') {
    failures++;
    fprintf(stderr, "FAIL line %d: message not cleared after success\n", line);
  }
}

/* ---- deterministic data ------------------------------------------------------------------ */
static uint64_t rng_state = 88172645463325252ULL;
static double unif(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}
static double gauss(void) {
  double u = unif(), v = unif();
  if (u < 1e-300) u = 1e-300;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
/* row-major -> column-major copy */
static double *to_col(const double *a, size_t rows, size_t cols) {
  double *t = malloc(rows * cols * sizeof(double));
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++) t[j * rows + i] = a[i * cols + j];
  return t;
}

/* ---- k-means ----------------------------------------------------------------------------- */
static void test_kmeans(void) {
  const size_t n = 300, d = 3, k = 3;
  double *x = malloc(n * d * sizeof(double));
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < d; j++) x[i * d + j] = gauss() + 10.0 * (double)(i % 3) * (j == 0);
  double *xc = to_col(x, n, d);
  double centers[9], centers_c[9], wss[3], init_c[9];
  int32_t labels[300], labels_c[300], pred[300];
  ThriftyKmeansInfo info, info_c;

  EXPECT_OK(thrifty_kmeans_fit(x, n, d, THRIFTY_ROW_MAJOR, NULL, k, THRIFTY_INIT_KMEANSPP, NULL, 1, 300, 0.0,
                               THRIFTY_KMEANS_HARTIGAN, 42, 2, centers, labels, wss, init_c, &info));
  /* the three blobs are recovered: points i, i+3, i+6... share a label, the three labels differ */
  int ok = 1;
  for (size_t i = 3; i < n; i++) ok &= labels[i] == labels[i % 3];
  CHECK(ok);
  CHECK(labels[0] != labels[1] && labels[1] != labels[2] && labels[0] != labels[2]);
  CHECK(fabs(wss[0] + wss[1] + wss[2] - info.inertia) < 1e-9 * info.inertia);
  CHECK(info.totss > info.inertia && info.converged == 1 && info.n_iter >= 1 && info.n_distinct_centers == 3);
  /* column-major input gives the same fit, bit for bit, on any thread count */
  EXPECT_OK(thrifty_kmeans_fit(xc, n, d, THRIFTY_COL_MAJOR, NULL, k, THRIFTY_INIT_KMEANSPP, NULL, 1, 300, 0.0,
                               THRIFTY_KMEANS_HARTIGAN, 42, 1, centers_c, labels_c, NULL, NULL, &info_c));
  CHECK(memcmp(labels, labels_c, sizeof(labels)) == 0);
  ok = 1;
  for (size_t c = 0; c < k; c++)
    for (size_t j = 0; j < d; j++) ok &= centers[c * d + j] == centers_c[j * k + c];
  CHECK(ok);
  CHECK(info.inertia == info_c.inertia);

  /* predict: nearest centres; transform: distances checked by brute force */
  EXPECT_OK(thrifty_kmeans_predict(x, n, d, centers, k, THRIFTY_ROW_MAJOR, 0, pred));
  CHECK(memcmp(pred, labels, sizeof(pred)) == 0);
  double *dist = malloc(n * k * sizeof(double));
  EXPECT_OK(thrifty_kmeans_transform(x, n, d, centers, k, THRIFTY_ROW_MAJOR, 0, dist));
  double err = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t c = 0; c < k; c++) {
      double s = 0;
      for (size_t j = 0; j < d; j++) s += pow(x[i * d + j] - centers[c * d + j], 2);
      err = fmax(err, fabs(sqrt(s) - dist[i * k + c]));
    }
  CHECK(err < 1e-12);
  double *dist_c = malloc(n * k * sizeof(double));
  EXPECT_OK(thrifty_kmeans_transform(xc, n, d, centers_c, k, THRIFTY_COL_MAJOR, 1, dist_c));
  CHECK(dist_c[2 * n + 7] == dist[7 * k + 2]);
  int32_t pred_c[300];
  EXPECT_OK(thrifty_kmeans_predict(xc, n, d, centers_c, k, THRIFTY_COL_MAJOR, 1, pred_c));
  CHECK(memcmp(pred, pred_c, sizeof(pred)) == 0);

  /* Lloyd, weights, explicit initial centres, random init, several runs */
  double *w = malloc(n * sizeof(double));
  for (size_t i = 0; i < n; i++) w[i] = 1.0 + (double)(i % 5);
  EXPECT_OK(thrifty_kmeans_fit(x, n, d, THRIFTY_ROW_MAJOR, w, k, THRIFTY_INIT_CENTERS, init_c, 1, 50, 1e-4,
                               THRIFTY_KMEANS_LLOYD, 1, 0, centers_c, labels_c, NULL, NULL, &info_c));
  CHECK(labels_c[0] == labels[0] && labels_c[1] == labels[1]);
  EXPECT_OK(thrifty_kmeans_fit(x, n, d, THRIFTY_ROW_MAJOR, NULL, k, THRIFTY_INIT_RANDOM, NULL, 4, 300, 1e-4,
                               THRIFTY_KMEANS_HARTIGAN, 3, 0, centers_c, labels_c, NULL, NULL, &info_c));
  CHECK(info_c.best_run >= 0 && info_c.best_run < 4);

  /* bad input: every one returns an error status with a message */
  EXPECT_ERR(thrifty_kmeans_fit(NULL, n, d, 0, NULL, k, 0, NULL, 1, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_kmeans_fit(x, 0, d, 0, NULL, k, 0, NULL, 1, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_SHAPE);
  EXPECT_ERR(thrifty_kmeans_fit(x, n, 0, 0, NULL, k, 0, NULL, 1, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_SHAPE);
  EXPECT_ERR(thrifty_kmeans_fit(x, 2, d, 0, NULL, k, 0, NULL, 1, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_INVALID_ARGUMENT); /* k > n */
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, NULL, 0, 0, NULL, 1, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 7, NULL, k, 0, NULL, 1, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_TYPE);
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, NULL, k, 0, NULL, 1, 10, 0, 9, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_TYPE);
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, NULL, k, 5, NULL, 1, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_TYPE);
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, NULL, k, THRIFTY_INIT_CENTERS, NULL, 1, 10, 0, 0, 1, 0, centers, labels,
                                NULL, NULL, &info),
             THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, NULL, k, 0, NULL, 0, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_INVALID_ARGUMENT); /* n_init = 0 */
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, NULL, k, 0, NULL, 1, 10, NAN, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_INVALID_ARGUMENT); /* tol NaN */
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, NULL, k, 0, NULL, 1, 10, 0, 0, 1, 0, NULL, labels, NULL, NULL, &info),
             THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, NULL, k, 0, NULL, 1, 10, 0, 0, 1, 0, centers, NULL, NULL, NULL, &info),
             THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, NULL, k, 0, NULL, 1, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, NULL),
             THRIFTY_ERR_NULL_POINTER);
  w[5] = -1.0;
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, w, k, 0, NULL, 1, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_INVALID_ARGUMENT);
  w[5] = NAN;
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, w, k, 0, NULL, 1, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_NOT_FINITE);
  double saved = x[17];
  x[17] = NAN;
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, NULL, k, 0, NULL, 1, 10, 0, 0, 1, 0, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_NOT_FINITE);
  EXPECT_ERR(thrifty_kmeans_predict(x, n, d, centers, k, 0, 0, pred), THRIFTY_ERR_NOT_FINITE);
  EXPECT_ERR(thrifty_kmeans_transform(x, n, d, centers, k, 0, 0, dist), THRIFTY_ERR_NOT_FINITE);
  x[17] = saved;
  init_c[4] = INFINITY;
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, 0, NULL, k, THRIFTY_INIT_CENTERS, init_c, 1, 10, 0, 0, 1, 0, centers, labels,
                                NULL, NULL, &info),
             THRIFTY_ERR_NOT_FINITE);
  EXPECT_ERR(thrifty_kmeans_predict(NULL, n, d, centers, k, 0, 0, pred), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_kmeans_predict(x, n, d, NULL, k, 0, 0, pred), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_kmeans_predict(x, n, d, centers, 0, 0, 0, pred), THRIFTY_ERR_SHAPE);
  EXPECT_ERR(thrifty_kmeans_predict(x, n, d, centers, k, 0, 0, NULL), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_kmeans_predict(x, n, d, centers, k, 3, 0, pred), THRIFTY_ERR_TYPE);
  EXPECT_ERR(thrifty_kmeans_transform(x, 0, d, centers, k, 0, 0, dist), THRIFTY_ERR_SHAPE);
  EXPECT_ERR(thrifty_kmeans_transform(x, n, d, centers, k, 0, 0, NULL), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_kmeans_transform(x, n, d, centers, k, 0, 5000, dist), THRIFTY_ERR_INVALID_ARGUMENT); /* threads */
  free(x), free(xc), free(dist), free(dist_c), free(w);
}

/* ---- subspace test and component tests ---------------------------------------------------- */
static void test_inference(void) {
  const size_t n = 120, p = 12;
  double *x = malloc(n * p * sizeof(double)), y[120], r[50], r_c[50], null_z[60];
  for (size_t i = 0; i < n * p; i++) x[i] = gauss();
  for (size_t i = 0; i < n; i++) y[i] = x[i * p] + 0.5 * x[i * p + 1] + gauss();
  double *xc = to_col(x, n, p);
  ThriftySubspaceOptions o;
  ThriftySubspaceResult res, res_c;
  EXPECT_OK(thrifty_subspace_options_init(&o));
  CHECK(o.n_components == 1 && o.n_splits == 50 && o.n_perm == 1000 && o.confidence_level == 0.95);
  o.seed = 7;
  /* 12 iid columns on 120 rows: stable rank about 7 < 8, so AUTO runs the NB-permutation test
     (silently, as Python: the design gate itself passes) */
  o.n_perm = 59;
  EXPECT_OK(thrifty_subspace_test(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, &o, &res, r, 50, null_z, 60));
  CHECK(res.method == THRIFTY_METHOD_NB_PERMUTATION && res.gate_reroute == 1 && res.gate_rerouted == 1);
  CHECK(res.gate_stable_rank >= 3.0 && res.gate_stable_rank < 8.0 && res.n_perm == 59 && res.p_value == 1.0 / 60.0);
  o.n_perm = 1000;
  o.force = 1;
  EXPECT_OK(thrifty_subspace_test(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, &o, &res, r, 50, NULL, 0));
  CHECK(res.method == THRIFTY_METHOD_NB && res.n_splits == 50 && res.p_value < 1e-6 && res.statistic > 0.5);
  CHECK(res.ci_low < res.statistic && res.statistic < res.ci_high && res.df == 49.0 && res.seed == 7);
  CHECK(res.n_train == 60.0 && res.n_test == 60.0 && res.gate_forced == 1 && res.gate_rerouted == 0);
  o.n_threads = 1;
  EXPECT_OK(thrifty_subspace_test(xc, n, p, THRIFTY_COL_MAJOR, y, NULL, &o, &res_c, r_c, 50, NULL, 0));
  CHECK(memcmp(r, r_c, sizeof(r)) == 0 && res.p_value == res_c.p_value);
  /* defaults (options NULL: seed 0) */
  EXPECT_OK(thrifty_subspace_test(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, NULL, &res, NULL, 0, NULL, 0));

  /* every learner and method */
  int64_t learners[] = {THRIFTY_LEARNER_PLS, THRIFTY_LEARNER_SPCA, THRIFTY_LEARNER_RIDGE};
  for (int l = 0; l < 3; l++) {
    for (int64_t m = THRIFTY_METHOD_NB_PERMUTATION; m <= THRIFTY_METHOD_PERMUTATION_SCORE; m++) {
      EXPECT_OK(thrifty_subspace_options_init(&o));
      o.learner = learners[l], o.method = m, o.n_perm = 60, o.n_splits = 10, o.seed = 3;
      EXPECT_OK(thrifty_subspace_test(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, &o, &res, NULL, 0, null_z, 60));
      CHECK(res.method == m && res.n_perm == 60 && fabs(res.p_value - 1.0 / 61.0) < 1e-12);
    }
  }
  EXPECT_OK(thrifty_subspace_options_init(&o));
  o.method = THRIFTY_METHOD_JACKKNIFE, o.n_folds = 10, o.n_components = 2;
  EXPECT_OK(thrifty_subspace_test(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, &o, &res, NULL, 0, NULL, 0));
  CHECK(res.method == THRIFTY_METHOD_JACKKNIFE && res.p_value < 0.01 && res.df == 9.0);
  /* fixed basis (the first two coordinates), weights, varimax, explicit splits */
  double basis[24] = {0};
  basis[0 * 2 + 0] = 1.0, basis[1 * 2 + 1] = 1.0; /* p x 2 row-major */
  double wts[120];
  for (size_t i = 0; i < n; i++) wts[i] = 0.5 + (double)(i % 3);
  int64_t train_idx[3 * 70], offsets[4] = {0, 70, 140, 210};
  for (int s = 0; s < 3; s++)
    for (int i = 0; i < 70; i++) train_idx[s * 70 + i] = (i * 7 + s * 13) % 120 + 0 * s;
  for (int s = 0; s < 3; s++) /* make the indices distinct: (i*7 + c) mod 120 is a bijection */
    for (int i = 0; i < 70; i++) train_idx[s * 70 + i] = (int64_t)((i * 7 + s * 13) % 120);
  EXPECT_OK(thrifty_subspace_options_init(&o));
  o.learner = THRIFTY_LEARNER_BASIS, o.basis = basis, o.basis_cols = 2, o.rotate = THRIFTY_ROTATE_VARIMAX;
  o.train_indices = train_idx, o.train_offsets = offsets, o.n_explicit_splits = 3, o.force = 1;
  EXPECT_OK(thrifty_subspace_test(x, n, p, THRIFTY_ROW_MAJOR, y, wts, &o, &res, r, 3, NULL, 0));
  CHECK(res.n_components == 2 && res.n_splits == 3 && res.n_train == 70.0 && r[0] > 0.5 && isnan(res.rho_hat));
  o.learner = THRIFTY_LEARNER_PLS, o.rotate = 0, o.method = THRIFTY_METHOD_NB_PERMUTATION, o.n_perm = 20;
  EXPECT_OK(thrifty_subspace_test(x, n, p, THRIFTY_ROW_MAJOR, y, wts, &o, &res, r, 3, null_z, 20));

  /* the gate: 4 columns -> rerouted to NB-permutation */
  EXPECT_OK(thrifty_subspace_options_init(&o));
  o.n_perm = 30;
  EXPECT_OK(thrifty_subspace_test(x, n, 4, THRIFTY_ROW_MAJOR, y, NULL, &o, &res, NULL, 0, NULL, 0));
  /* x is n x p row-major, so reading it as n x 4 is a different (valid) matrix */
  CHECK(res.gate_reroute == 1 && res.gate_rerouted == 1 && res.method == THRIFTY_METHOD_NB_PERMUTATION);

  /* bad input */
  EXPECT_OK(thrifty_subspace_options_init(&o));
  EXPECT_ERR(thrifty_subspace_options_init(NULL), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_subspace_test(NULL, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, NULL, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, NULL, NULL, 0, NULL, 0), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_subspace_test(x, 0, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_SHAPE);
  EXPECT_ERR(thrifty_subspace_test(x, 5, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, r, 10, NULL, 0), THRIFTY_ERR_SHAPE); /* r_out short */
  double yc[120];
  for (size_t i = 0; i < n; i++) yc[i] = 3.0;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, yc, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  yc[0] = NAN;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, yc, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_NOT_FINITE);
  double saved = x[5];
  x[5] = NAN;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_NOT_FINITE);
  x[5] = saved;
  o.n_components = 20; /* k > p */
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.n_components = 0;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_OK(thrifty_subspace_options_init(&o));
  o.method = 42;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_TYPE);
  o.method = 0, o.learner = 9;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_TYPE);
  o.learner = THRIFTY_LEARNER_BASIS; /* basis missing */
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.basis_cols = 2;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_NULL_POINTER);
  EXPECT_OK(thrifty_subspace_options_init(&o));
  o.confidence_level = 1.5;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.confidence_level = 0.95, o.n_splits = 1;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.n_splits = -3;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.n_splits = 50, o.method = THRIFTY_METHOD_NB_PERMUTATION, o.n_perm = 0;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.n_perm = 10, o.learner = THRIFTY_LEARNER_RIDGE, o.ridge_alpha = -1;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_OK(thrifty_subspace_options_init(&o));
  o.method = THRIFTY_METHOD_CV_PERMUTATION_Q2, o.n_folds = 1000;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.method = THRIFTY_METHOD_JACKKNIFE, o.n_folds = 5, o.learner = THRIFTY_LEARNER_SPCA;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_OK(thrifty_subspace_options_init(&o));
  train_idx[1] = train_idx[0]; /* a repeated index */
  o.train_indices = train_idx, o.train_offsets = offsets, o.n_explicit_splits = 3;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  train_idx[1] = 500; /* out of range */
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.train_offsets = NULL;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_NULL_POINTER);
  double wneg[120];
  for (size_t i = 0; i < n; i++) wneg[i] = i == 3 ? -1.0 : 1.0;
  EXPECT_OK(thrifty_subspace_options_init(&o));
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, wneg, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);

  /* PLS2: a two-column response; m = 1 is the single-response test */
  double y2[240];
  for (size_t i = 0; i < n; i++) y2[i * 2] = y[i], y2[i * 2 + 1] = x[i * p + 1] + gauss();
  double *y2c = to_col(y2, n, 2);
  EXPECT_OK(thrifty_subspace_options_init(&o));
  o.seed = 4, o.n_splits = 10;
  o.force = 1; /* AUTO runs NB-permutation for PLS2 (as Python); force the NB test */
  EXPECT_OK(thrifty_subspace_test_multi(x, n, p, THRIFTY_ROW_MAJOR, y2, 2, NULL, &o, &res, r, 10, NULL, 0));
  CHECK(res.method == THRIFTY_METHOD_NB && res.p_value < 1e-4 && res.n_splits == 10 && isnan(res.rho_hat));
  EXPECT_OK(thrifty_subspace_test_multi(xc, n, p, THRIFTY_COL_MAJOR, y2c, 2, NULL, &o, &res_c, r_c, 10, NULL, 0));
  CHECK(res.p_value == res_c.p_value && memcmp(r, r_c, 10 * sizeof(double)) == 0);
  o.method = THRIFTY_METHOD_NB_PERMUTATION, o.n_perm = 15;
  EXPECT_OK(thrifty_subspace_test_multi(x, n, p, THRIFTY_ROW_MAJOR, y2, 2, wts, &o, &res, NULL, 0, null_z, 15));
  CHECK(res.n_perm == 15 && fabs(res.p_value - 1.0 / 16.0) < 1e-12);
  EXPECT_OK(thrifty_subspace_options_init(&o));
  o.seed = 7;
  EXPECT_OK(thrifty_subspace_test_multi(x, n, p, THRIFTY_ROW_MAJOR, y, 1, NULL, &o, &res_c, NULL, 0, NULL, 0));
  EXPECT_ERR(thrifty_subspace_test_multi(x, n, p, 0, NULL, 2, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_subspace_test_multi(x, n, p, 0, y2, 0, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_SHAPE);
  EXPECT_ERR(thrifty_subspace_test_multi(x, n, p, 0, y2, 2, NULL, &o, NULL, NULL, 0, NULL, 0), THRIFTY_ERR_NULL_POINTER);
  o.learner = THRIFTY_LEARNER_SPCA;
  EXPECT_ERR(thrifty_subspace_test_multi(x, n, p, 0, y2, 2, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.learner = THRIFTY_LEARNER_PLS, o.method = THRIFTY_METHOD_JACKKNIFE;
  EXPECT_ERR(thrifty_subspace_test_multi(x, n, p, 0, y2, 2, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.method = 0, o.rotate = THRIFTY_ROTATE_VARIMAX;
  EXPECT_ERR(thrifty_subspace_test_multi(x, n, p, 0, y2, 2, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.rotate = 0;
  EXPECT_ERR(thrifty_subspace_test_multi(x, n, p, 0, y2, 2, NULL, &o, &res, r, 3, NULL, 0), THRIFTY_ERR_SHAPE);
  y2[5] = NAN;
  EXPECT_ERR(thrifty_subspace_test_multi(x, n, p, 0, y2, 2, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_NOT_FINITE);
  for (size_t i = 0; i < 2 * n; i++) y2[i] = 1.0;
  EXPECT_ERR(thrifty_subspace_test_multi(x, n, p, 0, y2, 2, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  free(y2c);

  /* component tests: two informative directions */
  ThriftyComponentResult cr;
  double pv[10];
  EXPECT_OK(thrifty_subspace_options_init(&o));
  o.seed = 11;
  EXPECT_OK(thrifty_component_tests(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, &o, 0, 0.05, &cr, pv, 10));
  CHECK(cr.k_star >= 1 && cr.n_steps >= cr.k_star && cr.n_steps <= 10 && pv[0] < 0.05);
  ThriftyComponentResult cr_c;
  double pv_c[10];
  EXPECT_OK(thrifty_component_tests(xc, n, p, THRIFTY_COL_MAJOR, y, NULL, &o, 0, 0.05, &cr_c, pv_c, 10));
  CHECK(cr_c.k_star == cr.k_star && memcmp(pv, pv_c, (size_t)cr.n_steps * sizeof(double)) == 0);
  EXPECT_ERR(thrifty_component_tests(x, n, p, 0, y, NULL, &o, 0, 1.5, &cr, pv, 10), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_component_tests(x, n, p, 0, y, NULL, &o, 50, 0.05, &cr, pv, 10), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_component_tests(x, n, p, 0, y, NULL, &o, 0, 0.05, &cr, pv, 3), THRIFTY_ERR_SHAPE);
  EXPECT_ERR(thrifty_component_tests(x, n, p, 0, y, NULL, &o, 0, 0.05, &cr, NULL, 10), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_component_tests(x, n, p, 0, y, NULL, &o, 0, 0.05, NULL, pv, 10), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_component_tests(NULL, n, p, 0, y, NULL, &o, 0, 0.05, &cr, pv, 10), THRIFTY_ERR_NULL_POINTER);
  o.method = THRIFTY_METHOD_JACKKNIFE;
  EXPECT_ERR(thrifty_component_tests(x, n, p, 0, y, NULL, &o, 0, 0.05, &cr, pv, 10), THRIFTY_ERR_INVALID_ARGUMENT);
  free(x), free(xc);
}

/* ---- inference additions: sparse PLS1, PLS-SVD, CV curve, rotation stability, replicates ---- */
static int nonzero_in_column(const double *w, size_t p, size_t k, size_t a) {
  int c = 0;
  for (size_t j = 0; j < p; j++) c += w[j * k + a] != 0.0;
  return c;
}

static void test_inference_extra(void) {
  const size_t n = 150, p = 10, q = 4;
  double *x = malloc(n * p * sizeof(double)), *yb = malloc(n * q * sizeof(double)), y[150], z[150];
  for (size_t i = 0; i < n; i++) z[i] = gauss();
  for (size_t i = 0; i < n * p; i++) x[i] = gauss();
  for (size_t i = 0; i < n * q; i++) yb[i] = gauss();
  for (size_t i = 0; i < n; i++) {
    x[i * p + 2] += 1.5 * z[i];
    yb[i * q + 1] += 1.5 * z[i];
    y[i] = 2.0 * x[i * p + 3] - 1.5 * x[i * p + 7] + 0.5 * gauss();
  }
  double *xc = to_col(x, n, p), *ybc = to_col(yb, n, q);
  ThriftySubspaceOptions o;
  ThriftySubspaceResult res, res_c;
  double r[20], nul[40];

  /* sparse PLS1 in the subspace test: the learner rule reroutes "auto" to NB-permutation, silently */
  EXPECT_OK(thrifty_subspace_options_init(&o));
  o.learner = THRIFTY_LEARNER_SPLS, o.spls_keep = 2, o.n_splits = 20, o.n_perm = 40, o.seed = 3;
  EXPECT_OK(thrifty_subspace_test(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, &o, &res, r, 20, nul, 40));
  CHECK(res.method == THRIFTY_METHOD_NB_PERMUTATION && res.gate_rerouted == 1 && res.n_perm == 40);
  CHECK(fabs(res.p_value - 1.0 / 41.0) < 1e-12 && res.statistic > 0.5);
  CHECK(thrifty_last_warning()[0] == '\0' && strstr(thrifty_last_gate_reasons(), "learner='spls'") != NULL);
  EXPECT_OK(thrifty_subspace_test(xc, n, p, THRIFTY_COL_MAJOR, y, NULL, &o, &res_c, NULL, 0, NULL, 0));
  CHECK(res_c.p_value == res.p_value && res_c.statistic == res.statistic);
  o.method = THRIFTY_METHOD_NB; /* asked for and rerouted: the core's warning */
  EXPECT_OK(thrifty_subspace_test(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, &o, &res, NULL, 0, NULL, 0));
  CHECK(strstr(thrifty_last_warning(), "NB-asymptotic approximation not trusted") != NULL);
  o.method = THRIFTY_METHOD_AUTO, o.spls_keep = 0; /* 0: the cross-validated keep-count */
  EXPECT_OK(thrifty_subspace_test(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, &o, &res, NULL, 0, NULL, 0));
  CHECK(res.p_value < 0.05);
  o.spls_keep = (int64_t)p + 1;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.spls_keep = -1;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.learner = THRIFTY_LEARNER_PLS, o.spls_keep = 2; /* keep is for the spls learner only */
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_INVALID_ARGUMENT);
  o.learner = 5, o.spls_keep = 0;
  EXPECT_ERR(thrifty_subspace_test(x, n, p, 0, y, NULL, &o, &res, NULL, 0, NULL, 0), THRIFTY_ERR_TYPE);

  /* the sparse basis on all rows: exactly keep non-zero rows per column, the planted variables */
  double basis[10 * 2], basis_c[10 * 2];
  int64_t keep = -1;
  EXPECT_OK(thrifty_spls_basis(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, 2, 2, basis, &keep));
  CHECK(keep == 2 && nonzero_in_column(basis, p, 2, 0) == 2 && nonzero_in_column(basis, p, 2, 1) == 2);
  CHECK(basis[3 * 2] != 0.0 && basis[7 * 2] != 0.0);
  EXPECT_OK(thrifty_spls_basis(xc, n, p, THRIFTY_COL_MAJOR, y, NULL, 2, 2, basis_c, NULL));
  CHECK(basis_c[0 * n + 3] == basis[3 * 2] && basis_c[1 * p + 7] == basis[7 * 2 + 1]);
  EXPECT_OK(thrifty_spls_basis(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, 1, 0, basis, &keep));
  CHECK(keep >= 1 && keep <= (int64_t)p);
  EXPECT_ERR(thrifty_spls_basis(x, n, p, 0, y, NULL, 2, 11, basis, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_spls_basis(x, n, p, 0, y, NULL, 0, 2, basis, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_spls_basis(x, n, p, 0, y, NULL, 11, 2, basis, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_spls_basis(x, n, p, 0, y, NULL, 2, 2, NULL, NULL), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_spls_basis(x, n, p, 0, NULL, NULL, 2, 2, basis, NULL), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_spls_basis(x, n, p, 7, y, NULL, 2, 2, basis, NULL), THRIFTY_ERR_TYPE);

  /* PLS-SVD: the pair finds the shared latent, "auto" is the NB-permutation test */
  double xw[10 * 2], yw[4 * 2], sv[2], xw_c[10 * 2];
  EXPECT_OK(thrifty_subspace_options_init(&o));
  o.n_components = 2, o.n_splits = 20, o.n_perm = 40, o.seed = 5;
  EXPECT_OK(thrifty_pls_svd_test(x, n, p, yb, q, THRIFTY_ROW_MAJOR, &o, &res, r, 20, nul, 40, xw, yw, sv));
  CHECK(res.method == THRIFTY_METHOD_NB_PERMUTATION && res.n_perm == 40 && res.n_splits == 20);
  CHECK(fabs(res.p_value - 1.0 / 41.0) < 1e-12 && res.statistic > 0.5 && sv[0] >= sv[1] && sv[1] > 0.0);
  CHECK(fabs(xw[2 * 2]) > 0.9 && fabs(yw[1 * 2]) > 0.9 && xw[2 * 2] > 0.0);
  CHECK(strstr(thrifty_last_gate_reasons(), "PLS-SVD") != NULL && thrifty_last_warning()[0] == '\0');
  EXPECT_OK(thrifty_pls_svd_test(xc, n, p, ybc, q, THRIFTY_COL_MAJOR, &o, &res_c, NULL, 0, NULL, 0, xw_c, NULL, NULL));
  CHECK(res_c.p_value == res.p_value && res_c.statistic == res.statistic && xw_c[0 * n + 2] == xw[2 * 2]);
  CHECK(xw_c[1 * p + 5] == xw[5 * 2 + 1]);
  o.method = THRIFTY_METHOD_NB, o.force = 1; /* forced NB-asymptotic */
  EXPECT_OK(thrifty_pls_svd_test(x, n, p, yb, q, THRIFTY_ROW_MAJOR, &o, &res, NULL, 0, NULL, 0, NULL, NULL, NULL));
  CHECK(res.method == THRIFTY_METHOD_NB && res.gate_forced == 1 && res.p_value < 1e-4 && res.n_perm == 0);
  o.force = 0;
  EXPECT_OK(thrifty_pls_svd_test(x, n, p, yb, q, THRIFTY_ROW_MAJOR, &o, &res, NULL, 0, NULL, 0, NULL, NULL, NULL));
  CHECK(res.method == THRIFTY_METHOD_NB_PERMUTATION && strstr(thrifty_last_warning(), "PLS-SVD") != NULL);
  o.method = THRIFTY_METHOD_AUTO;
  EXPECT_ERR(thrifty_pls_svd_test(x, n, p, yb, q, 0, &o, &res, r, 5, NULL, 0, NULL, NULL, NULL), THRIFTY_ERR_SHAPE);
  EXPECT_ERR(thrifty_pls_svd_test(x, n, p, yb, q, 0, &o, NULL, NULL, 0, NULL, 0, NULL, NULL, NULL),
             THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_pls_svd_test(x, n, p, NULL, q, 0, &o, &res, NULL, 0, NULL, 0, NULL, NULL, NULL),
             THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_pls_svd_test(x, 5, p, yb, q, 0, &o, &res, NULL, 0, NULL, 0, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_pls_svd_test(x, n, p, yb, 0, 0, &o, &res, NULL, 0, NULL, 0, NULL, NULL, NULL), THRIFTY_ERR_SHAPE);
  o.n_components = 5; /* > min(p, q) */
  EXPECT_ERR(thrifty_pls_svd_test(x, n, p, yb, q, 0, &o, &res, NULL, 0, NULL, 0, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  o.n_components = 1, o.method = THRIFTY_METHOD_JACKKNIFE;
  EXPECT_ERR(thrifty_pls_svd_test(x, n, p, yb, q, 0, &o, &res, NULL, 0, NULL, 0, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  o.method = THRIFTY_METHOD_AUTO, o.confidence_level = 1.0;
  EXPECT_ERR(thrifty_pls_svd_test(x, n, p, yb, q, 0, &o, &res, NULL, 0, NULL, 0, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  o.confidence_level = 0.95;
  double keep_y = yb[3];
  yb[3] = NAN;
  EXPECT_ERR(thrifty_pls_svd_test(x, n, p, yb, q, 0, &o, &res, NULL, 0, NULL, 0, NULL, NULL, NULL),
             THRIFTY_ERR_NOT_FINITE);
  yb[3] = keep_y;
  double *yconst = malloc(n * q * sizeof(double));
  for (size_t i = 0; i < n * q; i++) yconst[i] = 2.0;
  EXPECT_ERR(thrifty_pls_svd_test(x, n, p, yconst, q, 0, &o, &res, NULL, 0, NULL, 0, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  free(yconst);

  /* CV curve of the number of components: the planted 2 directions beat 1 */
  ThriftyCvCurveResult cv;
  double fold[6 * 5], fold_c[6 * 5], mean[6], se[6];
  EXPECT_OK(thrifty_select_n_components(x, n, p, THRIFTY_ROW_MAJOR, y, 6, 0, 5, 1, 0, &cv, fold, mean, se));
  CHECK(cv.choice_max >= 1 && cv.choice_max <= 6 && cv.choice_one_se >= 1 && cv.choice_one_se <= cv.choice_max);
  CHECK(mean[0] < mean[1] && se[0] > 0.0);
  double m0 = 0.0;
  for (int f = 0; f < 5; f++) m0 += fold[f];
  CHECK(fabs(m0 / 5.0 - mean[0]) < 1e-12);
  EXPECT_OK(thrifty_select_n_components(xc, n, p, THRIFTY_COL_MAJOR, y, 6, 0, 5, 1, 1, &cv, fold_c, NULL, NULL));
  CHECK(fold_c[1 * 6 + 2] == fold[2 * 5 + 1]);
  EXPECT_OK(thrifty_select_n_components(x, n, p, THRIFTY_ROW_MAJOR, y, 3, 2, 5, 1, 0, &cv, NULL, NULL, NULL));
  EXPECT_ERR(thrifty_select_n_components(x, n, p, 0, y, 11, 0, 5, 1, 0, &cv, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_select_n_components(x, n, p, 0, y, 0, 0, 5, 1, 0, &cv, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_select_n_components(x, n, p, 0, y, 3, 11, 5, 1, 0, &cv, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_select_n_components(x, n, p, 0, y, 3, 0, 1, 1, 0, &cv, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_select_n_components(x, n, p, 0, y, 3, 0, 151, 1, 0, &cv, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_select_n_components(x, n, p, 0, y, 3, 0, 5, 1, 0, NULL, NULL, NULL, NULL),
             THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_select_n_components(x, n, p, 0, y, 3, 0, 5, 1, -1, &cv, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);

  /* rotation stability: congruences in [0, 1], both layouts identical */
  const size_t nb = 30;
  double cong[30 * 2], cong_u[30 * 2], axes[10 * 2], wts[10 * 2], cong_c[30 * 2];
  EXPECT_OK(thrifty_rotation_stability(x, n, p, THRIFTY_ROW_MAJOR, y, 2, (int64_t)nb, 0, 9, 0, cong, cong_u, axes, wts));
  int in_range = 1;
  for (size_t i = 0; i < nb * 2; i++) in_range &= isnan(cong[i]) || (cong[i] >= 0.0 && cong[i] <= 1.0 + 1e-12);
  CHECK(in_range);
  double norm = 0.0;
  for (size_t j = 0; j < p; j++) norm += wts[j * 2] * wts[j * 2];
  CHECK(fabs(norm - 1.0) < 1e-10);
  EXPECT_OK(thrifty_rotation_stability(xc, n, p, THRIFTY_COL_MAJOR, y, 2, (int64_t)nb, 0, 9, 1, cong_c, NULL, NULL, NULL));
  CHECK(cong_c[1 * nb + 4] == cong[4 * 2 + 1] && cong_c[7] == cong[7 * 2]);
  EXPECT_ERR(thrifty_rotation_stability(x, n, p, 0, y, 1, 10, 0, 9, 0, NULL, NULL, NULL, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_rotation_stability(x, n, p, 0, y, 9, 10, 0, 9, 0, NULL, NULL, NULL, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_rotation_stability(x, n, p, 0, y, 2, 0, 0, 9, 0, NULL, NULL, NULL, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_rotation_stability(x, n, p, 0, NULL, 2, 10, 0, 9, 0, NULL, NULL, NULL, NULL), THRIFTY_ERR_NULL_POINTER);
  /* m-out-of-n subsamples: congruences in [0, 1]; m outside [k + 2, n] refused */
  EXPECT_OK(thrifty_rotation_stability(x, n, p, THRIFTY_ROW_MAJOR, y, 2, (int64_t)nb, 40, 9, 0, cong, NULL, NULL, NULL));
  in_range = 1;
  for (size_t i = 0; i < nb * 2; i++) in_range &= isnan(cong[i]) || (cong[i] >= 0.0 && cong[i] <= 1.0 + 1e-12);
  CHECK(in_range);
  EXPECT_ERR(thrifty_rotation_stability(x, n, p, 0, y, 2, 10, 3, 9, 0, NULL, NULL, NULL, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_rotation_stability(x, n, p, 0, y, 2, 10, (int64_t)n + 1, 9, 0, NULL, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);

  /* subsample replicates of beta and leverage */
  const size_t ns = 20, m = 60;
  double coef[10], lev[10], csub[20 * 10], lsub[20 * 10], csub_c[20 * 10];
  EXPECT_OK(thrifty_subsample_replicates(x, n, p, THRIFTY_ROW_MAJOR, y, NULL, 2, (int64_t)ns, (int64_t)m, 4, 0, coef, lev,
                                         csub, lsub));
  CHECK(coef[3] > 1.5 && coef[7] < -1.0 && lev[3] > 0.0 && lev[3] <= 1.0 + 1e-12);
  double lsum = 0.0;
  for (size_t j = 0; j < p; j++) lsum += lev[j];
  CHECK(fabs(lsum - 2.0) < 1e-10); /* trace of the projection on k = 2 orthonormal weights */
  EXPECT_OK(thrifty_subsample_replicates(xc, n, p, THRIFTY_COL_MAJOR, y, NULL, 2, (int64_t)ns, (int64_t)m, 4, 1, NULL,
                                         NULL, csub_c, NULL));
  CHECK(csub_c[3 * ns + 5] == csub[5 * p + 3]);
  EXPECT_ERR(thrifty_subsample_replicates(x, n, p, 0, y, NULL, 2, 10, 3, 4, 0, NULL, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_subsample_replicates(x, n, p, 0, y, NULL, 2, 10, 150, 4, 0, NULL, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_subsample_replicates(x, n, p, 0, y, NULL, 2, 0, 60, 4, 0, NULL, NULL, NULL, NULL),
             THRIFTY_ERR_INVALID_ARGUMENT);
  y[0] = INFINITY;
  EXPECT_ERR(thrifty_subsample_replicates(x, n, p, 0, y, NULL, 2, 10, 60, 4, 0, NULL, NULL, NULL, NULL),
             THRIFTY_ERR_NOT_FINITE);
  free(x), free(yb), free(xc), free(ybc);
}

/* ---- DPP ----------------------------------------------------------------------------------- */
static int distinct(const int64_t *a, size_t len, size_t n) {
  for (size_t i = 0; i < len; i++) {
    if (a[i] < 0 || (size_t)a[i] >= n) return 0;
    for (size_t j = 0; j < i; j++)
      if (a[i] == a[j]) return 0;
  }
  return 1;
}

static void test_dpp(void) {
  const size_t n = 200, p = 5;
  double *f = malloc(n * p * sizeof(double)), *q = malloc(n * p * sizeof(double));
  for (size_t i = 0; i < n * p; i++) f[i] = gauss();
  double *fc = to_col(f, n, p);
  size_t rank = 0;
  EXPECT_OK(thrifty_dpp_orthonormalize(f, n, p, THRIFTY_ROW_MAJOR, 0.0, q, &rank));
  CHECK(rank == p);
  double err = 0;
  for (size_t a = 0; a < p; a++)
    for (size_t b = 0; b < p; b++) {
      double s = 0;
      for (size_t i = 0; i < n; i++) s += q[i * p + a] * q[i * p + b];
      err = fmax(err, fabs(s - (a == b)));
    }
  CHECK(err < 1e-10);
  double *qc = malloc(n * p * sizeof(double));
  EXPECT_OK(thrifty_dpp_orthonormalize(fc, n, p, THRIFTY_COL_MAJOR, 0.0, qc, &rank));
  CHECK(qc[3 * n + 17] == q[17 * p + 3]);

  int64_t s1[10 * 5], s2[10 * 5];
  double lev[200];
  EXPECT_OK(thrifty_dpp_projection_sample(q, n, p, THRIFTY_ROW_MAJOR, 1, THRIFTY_DPP_ACCEPT_REJECT, 10, 5, 2, s1, lev));
  EXPECT_OK(thrifty_dpp_projection_sample(qc, n, p, THRIFTY_COL_MAJOR, 1, THRIFTY_DPP_ACCEPT_REJECT, 10, 5, 1, s2, NULL));
  CHECK(memcmp(s1, s2, sizeof(s1)) == 0);
  int ok = 1;
  for (int s = 0; s < 10; s++) ok &= distinct(s1 + s * 5, 5, n);
  CHECK(ok);
  double tot = 0;
  for (size_t i = 0; i < n; i++) tot += lev[i];
  CHECK(fabs(tot - (double)p) < 1e-9);
  EXPECT_OK(thrifty_dpp_projection_sample(q, n, p, THRIFTY_ROW_MAJOR, 0, THRIFTY_DPP_CHAIN, 10, 5, 0, s2, NULL));
  EXPECT_ERR(thrifty_dpp_projection_sample(f, n, p, 0, 1, 0, 10, 5, 0, s2, NULL), THRIFTY_ERR_INVALID_ARGUMENT); /* not orthonormal */
  EXPECT_ERR(thrifty_dpp_projection_sample(NULL, n, p, 0, 1, 0, 10, 5, 0, s2, NULL), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_dpp_projection_sample(q, n, p, 0, 1, 0, 0, 5, 0, s2, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_projection_sample(q, n, p, 0, 1, 3, 10, 5, 0, s2, NULL), THRIFTY_ERR_TYPE);
  EXPECT_ERR(thrifty_dpp_projection_sample(q, n, p, 0, 1, 0, 10, 5, 0, NULL, NULL), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_dpp_projection_sample(q, p, n, 0, 0, 0, 1, 5, 0, s2, NULL), THRIFTY_ERR_SHAPE); /* p > n */
  EXPECT_ERR(thrifty_dpp_orthonormalize(f, 0, p, 0, 0.0, q, &rank), THRIFTY_ERR_SHAPE);
  EXPECT_ERR(thrifty_dpp_orthonormalize(f, n, p, 0, 2.0, q, &rank), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_orthonormalize(f, n, p, 0, 0.0, NULL, &rank), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_dpp_orthonormalize(f, n, p, 0, 0.0, q, NULL), THRIFTY_ERR_NULL_POINTER);

  /* L-ensemble from features and from the kernel L = F F^T: same spectrum, ragged output */
  const size_t m = 40, dd = 3;
  double fm[40 * 3], L[40 * 40];
  for (size_t i = 0; i < m * dd; i++) fm[i] = gauss();
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < m; j++) {
      double s = 0;
      for (size_t a = 0; a < dd; a++) s += fm[i * dd + a] * fm[j * dd + a];
      L[i * m + j] = s;
    }
  ThriftyRagged rg = {0};
  double incl[40];
  EXPECT_OK(thrifty_dpp_lensemble_sample(NULL, fm, m, dd, THRIFTY_ROW_MAJOR, 25, 9, 0, &rg, incl));
  CHECK(rg.n_rows == 25 && rg.offsets[0] == 0 && (size_t)rg.offsets[25] == rg.n_values);
  ok = 1;
  for (size_t s = 0; s < rg.n_rows; s++) {
    size_t len = (size_t)(rg.offsets[s + 1] - rg.offsets[s]);
    ok &= len <= dd && distinct(rg.values + rg.offsets[s], len, m);
  }
  CHECK(ok);
  thrifty_ragged_free(&rg);
  CHECK(rg.values == NULL && rg.offsets == NULL && rg.n_rows == 0);
  thrifty_ragged_free(&rg); /* idempotent */
  thrifty_ragged_free(NULL);
  EXPECT_OK(thrifty_dpp_lensemble_sample(L, NULL, m, 0, THRIFTY_COL_MAJOR, 5, 9, 1, &rg, NULL));
  CHECK(rg.n_rows == 5);
  thrifty_ragged_free(&rg);
  EXPECT_ERR(thrifty_dpp_lensemble_sample(L, fm, m, dd, 0, 5, 9, 0, &rg, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_lensemble_sample(NULL, NULL, m, dd, 0, 5, 9, 0, &rg, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_lensemble_sample(NULL, fm, m, dd, 0, 5, 9, 0, NULL, NULL), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_dpp_lensemble_sample(NULL, fm, m, dd, 0, 0, 9, 0, &rg, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_lensemble_sample(L, NULL, 0, 0, 0, 5, 9, 0, &rg, NULL), THRIFTY_ERR_SHAPE);
  double Lbad[4] = {1.0, 2.0, 0.0, 1.0}; /* not symmetric */
  EXPECT_ERR(thrifty_dpp_lensemble_sample(Lbad, NULL, 2, 0, 0, 5, 9, 0, &rg, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  fm[4] = NAN;
  EXPECT_ERR(thrifty_dpp_lensemble_sample(NULL, fm, m, dd, 0, 5, 9, 0, &rg, NULL), THRIFTY_ERR_NOT_FINITE);
  fm[4] = 0.5;

  int64_t ks[20 * 2];
  EXPECT_OK(thrifty_dpp_kdpp_sample(NULL, fm, m, dd, THRIFTY_ROW_MAJOR, 2, 20, 4, 0, ks));
  ok = 1;
  for (int s = 0; s < 20; s++) ok &= distinct(ks + 2 * s, 2, m);
  CHECK(ok);
  EXPECT_OK(thrifty_dpp_kdpp_sample(L, NULL, m, 0, THRIFTY_ROW_MAJOR, 2, 20, 4, 0, ks));
  EXPECT_ERR(thrifty_dpp_kdpp_sample(NULL, fm, m, dd, 0, 4, 20, 4, 0, ks), THRIFTY_ERR_INVALID_ARGUMENT); /* k > rank */
  EXPECT_ERR(thrifty_dpp_kdpp_sample(NULL, fm, m, dd, 0, 0, 20, 4, 0, ks), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_kdpp_sample(NULL, fm, m, dd, 0, 2, 20, 4, 0, NULL), THRIFTY_ERR_NULL_POINTER);

  /* coresets: Haar (weights integrate constants exactly), OPE, Daubechies */
  const size_t nc = 500;
  double *xs = malloc(nc * 2 * sizeof(double));
  for (size_t i = 0; i < nc * 2; i++) xs[i] = unif();
  ThriftyCoresetOptions co;
  int64_t idx[16];
  double wts[16], inc[500];
  size_t size = 0;
  EXPECT_OK(thrifty_coreset_options_init(&co));
  CHECK(co.kernel == THRIFTY_KERNEL_HAAR && co.order == 2);
  EXPECT_OK(thrifty_dpp_coreset(xs, nc, 2, THRIFTY_ROW_MAJOR, 16, &co, 1, idx, wts, &size, inc));
  double wsum = 0;
  for (size_t i = 0; i < size; i++) wsum += wts[i];
  CHECK(size >= 1 && size <= 16 && distinct(idx, size, nc) && fabs(wsum - (double)nc) < 1e-8 * nc);
  double *xsc = to_col(xs, nc, 2);
  int64_t idx_c[16];
  double wts_c[16];
  size_t size_c = 0;
  EXPECT_OK(thrifty_dpp_coreset(xsc, nc, 2, THRIFTY_COL_MAJOR, 16, NULL, 1, idx_c, wts_c, &size_c, NULL));
  CHECK(size == size_c && memcmp(idx, idx_c, size * sizeof(int64_t)) == 0);
  co.split = THRIFTY_SPLIT_QUANTILE;
  EXPECT_OK(thrifty_dpp_coreset(xs, nc, 2, THRIFTY_ROW_MAJOR, 16, &co, 1, idx, wts, &size, NULL));
  CHECK(size == 16);
  co.kernel = THRIFTY_KERNEL_OPE, co.self_normalized = 1;
  EXPECT_OK(thrifty_dpp_coreset(xs, nc, 2, THRIFTY_ROW_MAJOR, 10, &co, 2, idx, wts, &size, NULL));
  wsum = 0;
  for (size_t i = 0; i < size; i++) wsum += wts[i];
  CHECK(size == 10 && distinct(idx, size, nc) && fabs(wsum - (double)nc) < 1e-8 * nc);
  co.kernel = THRIFTY_KERNEL_DAUBECHIES, co.self_normalized = 0;
  EXPECT_OK(thrifty_dpp_coreset(xs, nc, 2, THRIFTY_ROW_MAJOR, 16, &co, 2, idx, wts, &size, NULL));
  CHECK(size == 16 && distinct(idx, size, nc));
  EXPECT_ERR(thrifty_dpp_coreset(xs, nc, 2, 0, 12, &co, 2, idx, wts, &size, NULL), THRIFTY_ERR_INVALID_ARGUMENT); /* not 2^j */
  co.order = 9;
  EXPECT_ERR(thrifty_dpp_coreset(xs, nc, 2, 0, 16, &co, 2, idx, wts, &size, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_OK(thrifty_coreset_options_init(&co));
  co.kernel = 8;
  EXPECT_ERR(thrifty_dpp_coreset(xs, nc, 2, 0, 16, &co, 2, idx, wts, &size, NULL), THRIFTY_ERR_TYPE);
  EXPECT_ERR(thrifty_dpp_coreset(xs, 10, 2, 0, 16, NULL, 2, idx, wts, &size, NULL), THRIFTY_ERR_INVALID_ARGUMENT); /* m > n */
  EXPECT_ERR(thrifty_dpp_coreset(xs, nc, 2, 0, 0, NULL, 2, idx, wts, &size, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_coreset(NULL, nc, 2, 0, 16, NULL, 2, idx, wts, &size, NULL), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_dpp_coreset(xs, nc, 2, 0, 16, NULL, 2, NULL, wts, &size, NULL), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_dpp_coreset(xs, nc, 2, 0, 16, NULL, 2, idx, wts, NULL, NULL), THRIFTY_ERR_NULL_POINTER);
  double dens[500];
  for (size_t i = 0; i < nc; i++) dens[i] = i == 7 ? -1.0 : 1.0;
  EXPECT_OK(thrifty_coreset_options_init(&co));
  co.density = dens;
  EXPECT_ERR(thrifty_dpp_coreset(xs, nc, 2, 0, 16, &co, 2, idx, wts, &size, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  double domain[4] = {0.2, 1.0, 0.0, 1.0}; /* points below 0.2 on axis 0 are outside */
  co.density = NULL, co.domain = domain;
  EXPECT_ERR(thrifty_dpp_coreset(xs, nc, 2, 0, 16, &co, 2, idx, wts, &size, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  xs[3] = NAN;
  EXPECT_ERR(thrifty_dpp_coreset(xs, nc, 2, 0, 16, NULL, 2, idx, wts, &size, NULL), THRIFTY_ERR_NOT_FINITE);
  EXPECT_ERR(thrifty_coreset_options_init(NULL), THRIFTY_ERR_NULL_POINTER);

  /* greedy selection on the Gram matrix L (rank 3): stops after 3 items */
  int64_t items[5];
  double piv[5], gains[5];
  size_t nsel = 0;
  EXPECT_OK(thrifty_dpp_select_entropy(L, m, THRIFTY_ROW_MAJOR, 5, 1e-10, THRIFTY_CHECK_READ, items, piv, &nsel));
  CHECK(nsel == 3 && distinct(items, nsel, m) && piv[0] >= piv[1] && piv[1] >= piv[2]);
  int64_t items2[5];
  double piv2[5];
  size_t nsel2 = 0;
  double ld = 0.0;
  EXPECT_OK(thrifty_dpp_greedy_map(fm, m, dd, THRIFTY_ROW_MAJOR, 3, 1e-10, items2, piv2, &nsel2, &ld));
  CHECK(nsel2 == 3 && memcmp(items, items2, 3 * sizeof(int64_t)) == 0);
  CHECK(fabs(ld - (log(piv2[0]) + log(piv2[1]) + log(piv2[2]))) < 1e-12 * fabs(ld) + 1e-12);
  double *fmc = to_col(fm, m, dd);
  EXPECT_OK(thrifty_dpp_greedy_map(fmc, m, dd, THRIFTY_COL_MAJOR, 3, 1e-10, items2, piv2, &nsel2, NULL));
  CHECK(memcmp(items, items2, 3 * sizeof(int64_t)) == 0);
  /* features at 1e300: the same items; the variances (1e600) overflow, log det moves by 3·ln(1e600) */
  double *fbig = malloc(m * dd * sizeof(double)), ldbig = 0.0;
  for (size_t i = 0; i < m * dd; i++) fbig[i] = fm[i] * 1e300;
  EXPECT_OK(thrifty_dpp_greedy_map(fbig, m, dd, THRIFTY_ROW_MAJOR, 3, 1e-10, items2, piv2, &nsel2, &ldbig));
  CHECK(nsel2 == 3 && memcmp(items, items2, 3 * sizeof(int64_t)) == 0 && isinf(piv2[0]));
  CHECK(fabs(ldbig - (ld + 6.0 * 300.0 * log(10.0))) < 1e-9 * fabs(ldbig));
  free(fbig);
  for (size_t i = 0; i < m; i++) L[i * m + i] += 0.1; /* full rank */
  EXPECT_OK(thrifty_dpp_select_mutual_information(L, m, THRIFTY_COL_MAJOR, 4, 0.0, 1, items, piv, gains, &nsel));
  CHECK(nsel == 4 && distinct(items, nsel, m));
  EXPECT_OK(thrifty_dpp_select_entropy(L, m, THRIFTY_COL_MAJOR, 5, 1e-10, THRIFTY_CHECK_FULL, items, piv, &nsel));
  EXPECT_OK(thrifty_dpp_select_entropy(L, m, THRIFTY_COL_MAJOR, 5, 1e-10, THRIFTY_CHECK_SKIP, items, piv, &nsel));
  EXPECT_ERR(thrifty_dpp_select_entropy(L, m, 0, 50, 1e-10, 1, items, piv, &nsel), THRIFTY_ERR_INVALID_ARGUMENT); /* k > n */
  EXPECT_ERR(thrifty_dpp_select_entropy(L, m, 0, 0, 1e-10, 1, items, piv, &nsel), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_select_entropy(L, 0, 0, 2, 1e-10, 1, items, piv, &nsel), THRIFTY_ERR_SHAPE);
  EXPECT_ERR(thrifty_dpp_select_entropy(NULL, m, 0, 2, 1e-10, 1, items, piv, &nsel), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_dpp_select_entropy(L, m, 0, 2, -1.0, 1, items, piv, &nsel), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_select_entropy(L, m, 0, 2, 1e-10, 7, items, piv, &nsel), THRIFTY_ERR_TYPE);
  EXPECT_ERR(thrifty_dpp_select_entropy(L, m, 0, 2, 1e-10, 1, NULL, piv, &nsel), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_dpp_select_entropy(L, m, 0, 2, 1e-10, 1, items, piv, NULL), THRIFTY_ERR_NULL_POINTER);
  double Lnan[4] = {1.0, NAN, NAN, 1.0};
  EXPECT_ERR(thrifty_dpp_select_entropy(Lnan, 2, 0, 2, 1e-10, THRIFTY_CHECK_FULL, items, piv, &nsel), THRIFTY_ERR_NOT_FINITE);
  EXPECT_ERR(thrifty_dpp_greedy_map(NULL, m, dd, 0, 3, 1e-10, items2, piv2, &nsel2, NULL), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_dpp_greedy_map(fm, m, dd, 0, 100, 1e-10, items2, piv2, &nsel2, NULL), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_greedy_map(fm, m, 0, 0, 3, 1e-10, items2, piv2, &nsel2, NULL), THRIFTY_ERR_SHAPE);
  fm[0] = NAN;
  EXPECT_ERR(thrifty_dpp_greedy_map(fm, m, dd, 0, 3, 1e-10, items2, piv2, &nsel2, NULL), THRIFTY_ERR_NOT_FINITE);
  EXPECT_ERR(thrifty_dpp_select_mutual_information(L, m, 0, 4, -1.0, 1, items, piv, gains, &nsel), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_select_mutual_information(L, m, 0, 41, 0.0, 1, items, piv, gains, &nsel), THRIFTY_ERR_INVALID_ARGUMENT);
  EXPECT_ERR(thrifty_dpp_select_mutual_information(L, m, 0, 4, 0.0, 1, items, piv, NULL, &nsel), THRIFTY_ERR_NULL_POINTER);
  EXPECT_ERR(thrifty_dpp_select_mutual_information(Lnan, 2, 0, 1, 0.0, 1, items, piv, gains, &nsel), THRIFTY_ERR_NOT_FINITE);
  EXPECT_ERR(thrifty_dpp_select_mutual_information(NULL, m, 0, 4, 0.0, 1, items, piv, gains, &nsel), THRIFTY_ERR_NULL_POINTER);
  free(f), free(fc), free(q), free(qc), free(xs), free(xsc), free(fmc);
}

/* ---- exactly the calls of the README's Julia snippet (column-major, as Julia passes arrays) ---- */
static void julia_snippet(void) {
  /* X = randn(500, 4) .+ 8 .* (1:500 .% 2); y = X[:, 1] .+ randn(500) */
  const size_t n = 500, d = 4, k = 2;
  double *X = malloc(n * d * sizeof(double)), y[500];
  for (size_t j = 0; j < d; j++)
    for (size_t i = 0; i < n; i++) X[j * n + i] = gauss() + 8.0 * (double)((i + 1) % 2);
  for (size_t i = 0; i < n; i++) y[i] = X[i] + gauss();
  CHECK(thrifty_abi_version() == 4);
  double centers[2 * 4]; /* Matrix{Float64}(undef, k, d) */
  int32_t labels[500];
  ThriftyKmeansInfo info; /* Ref{KmeansInfo}() */
  int32_t st = thrifty_kmeans_fit(X, n, d, THRIFTY_COL_MAJOR, NULL, k, THRIFTY_INIT_KMEANSPP, NULL, 1, 300, 1e-4,
                                  THRIFTY_KMEANS_HARTIGAN, 42, 0, centers, labels, NULL, NULL, &info);
  CHECK(st == THRIFTY_OK);
  CHECK(labels[0] != labels[1] && labels[0] == labels[2] && info.converged == 1);
  CHECK(fabs(centers[0 * k + labels[0]] - 8.0) < 0.5); /* Julia rows 1, 3, ... (C rows 0, 2, ...) sit at 8 */
  ThriftySubspaceOptions opts;
  CHECK(thrifty_subspace_options_init(&opts) == THRIFTY_OK);
  opts.seed = 1;
  opts.n_splits = 20;
  ThriftySubspaceResult res;
  double r[20];
  st = thrifty_subspace_test(X, n, d, THRIFTY_COL_MAJOR, y, NULL, &opts, &res, r, 20, NULL, 0);
  CHECK(st == THRIFTY_OK);
  /* 4 columns: the gate reroutes to the NB-permutation test */
  CHECK(res.method == THRIFTY_METHOD_NB_PERMUTATION && res.p_value == 1.0 / 1001.0);
  /* the error path of the snippet: k > n */
  st = thrifty_kmeans_fit(X, 1, d, THRIFTY_COL_MAJOR, NULL, k, THRIFTY_INIT_KMEANSPP, NULL, 1, 300, 1e-4,
                          THRIFTY_KMEANS_HARTIGAN, 42, 0, centers, labels, NULL, NULL, &info);
  CHECK(st == THRIFTY_ERR_INVALID_ARGUMENT && strstr(thrifty_last_error(), "n_clusters") != NULL);
  free(X);
}

/* ---- interrupt check ------------------------------------------------------------------------ */
typedef struct {
  int polls;       /* how often the library asked */
  int stop_at;     /* answer "stop" from this poll on (0: never) */
  int off_thread;  /* set when a poll came from another thread than the registering one */
  pthread_t owner;
} poll_state;

static int32_t count_polls(void *user_data) {
  poll_state *s = user_data;
  s->polls++;
  if (!pthread_equal(pthread_self(), s->owner)) s->off_thread = 1;
  return s->stop_at > 0 && s->polls >= s->stop_at;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void test_interrupt(void) {
  /* a fit of many seconds (200 Lloyd runs on 20000 x 8, k = 40) */
  const size_t n = 20000, d = 8, k = 40;
  double *x = malloc(n * d * sizeof(double));
  for (size_t i = 0; i < n * d; i++) x[i] = gauss();
  double *centers = malloc(k * d * sizeof(double));
  int32_t *labels = malloc(n * sizeof(int32_t));
  ThriftyKmeansInfo info;
  poll_state st = {0, 3, 0, pthread_self()};
  EXPECT_OK(thrifty_set_interrupt_check(count_polls, &st, 20));
  double t0 = now_s();
  EXPECT_ERR(thrifty_kmeans_fit(x, n, d, THRIFTY_ROW_MAJOR, NULL, k, THRIFTY_INIT_KMEANSPP, NULL, 200, 300, 0.0,
                                THRIFTY_KMEANS_LLOYD, 7, 2, centers, labels, NULL, NULL, &info),
             THRIFTY_ERR_INTERRUPTED);
  double waited = now_s() - t0;
  CHECK(st.polls == 3 && !st.off_thread);
  CHECK(waited < 2.0); /* stops within one core iteration of the third poll (at ~60 ms) */
  CHECK(strstr(thrifty_last_error(), "interrupted") != NULL);

  /* DPP sampling stops the same way: a million k-DPP samples */
  const size_t m = 200, r = 20;
  double *phi = malloc(m * r * sizeof(double));
  for (size_t i = 0; i < m * r; i++) phi[i] = gauss();
  int64_t *samples = malloc(1000000 * 5 * sizeof(int64_t));
  st.polls = 0;
  EXPECT_ERR(thrifty_dpp_kdpp_sample(NULL, phi, m, r, THRIFTY_ROW_MAJOR, 5, 1000000, 1, 2, samples),
             THRIFTY_ERR_INTERRUPTED);
  CHECK(st.polls == 3 && !st.off_thread);

  /* and so does the PLS-SVD permutation test (two 2000 x 8 blocks, 200000 permutations) */
  ThriftySubspaceOptions so;
  ThriftySubspaceResult sres;
  EXPECT_OK(thrifty_subspace_options_init(&so));
  so.n_perm = 200000;
  st.polls = 0;
  EXPECT_ERR(thrifty_pls_svd_test(x, 2000, d, x + 2000 * d, d, THRIFTY_ROW_MAJOR, &so, &sres, NULL, 0, NULL, 0,
                                  NULL, NULL, NULL),
             THRIFTY_ERR_INTERRUPTED);
  CHECK(st.polls == 3 && !st.off_thread);

  /* a check that never says stop changes nothing: the same fit as without a check */
  const size_t n2 = 2000;
  int32_t *labels_ref = malloc(n2 * sizeof(int32_t));
  ThriftyKmeansInfo info_ref;
  st.polls = 0;
  st.stop_at = 0;
  EXPECT_OK(thrifty_kmeans_fit(x, n2, d, THRIFTY_ROW_MAJOR, NULL, 5, THRIFTY_INIT_KMEANSPP, NULL, 20, 300, 0.0,
                               THRIFTY_KMEANS_HARTIGAN, 11, 2, centers, labels, NULL, NULL, &info));
  CHECK(!st.off_thread);
  EXPECT_OK(thrifty_set_interrupt_check(NULL, NULL, 0));
  int before = st.polls;
  EXPECT_OK(thrifty_kmeans_fit(x, n2, d, THRIFTY_ROW_MAJOR, NULL, 5, THRIFTY_INIT_KMEANSPP, NULL, 20, 300, 0.0,
                               THRIFTY_KMEANS_HARTIGAN, 11, 2, centers, labels_ref, NULL, NULL, &info_ref));
  CHECK(st.polls == before); /* removed: never asked again */
  CHECK(memcmp(labels, labels_ref, n2 * sizeof(int32_t)) == 0 && info.inertia == info_ref.inertia);
  EXPECT_ERR(thrifty_set_interrupt_check(count_polls, &st, 60001), THRIFTY_ERR_INVALID_ARGUMENT);
  free(x);
  free(centers);
  free(labels);
  free(labels_ref);
  free(phi);
  free(samples);
}

int main(void) {
  CHECK(thrifty_abi_version() == THRIFTY_ABI_VERSION);
  CHECK(strlen(thrifty_version()) > 0);
  EXPECT_ERR(thrifty_selftest_panic(), THRIFTY_ERR_PANIC);
  CHECK(strstr(thrifty_last_error(), "self-test panic") != NULL);
  test_kmeans();
  test_inference();
  test_dpp();
  test_interrupt();
  julia_snippet();
  test_inference_extra(); /* last: it draws from the shared data stream */
  printf("thrifty C ABI test: %d checks, %d failures (ABI %u, thrifty %s)\n", checks, failures, thrifty_abi_version(),
         thrifty_version());
  return failures == 0 ? 0 : 1;
}
