/*
 * fuzz_plan_doc.c: libFuzzer target for plan documents and runs. A refusal
 * must name itself and leave the output untouched; an accepted document or
 * run must encode and decode again to the same bytes. A small accepted
 * first-placement document is also recomputed: that must succeed or fail
 * with a named error, never crash.
 */
#include "../../proto/plan_doc.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_refusal(int rc, const ring_error *err, const void *out, size_t n) {
  const uint8_t *p = out;
  if (err->code != rc || err->message[0] == '\0')
    abort(); /* every failure is named */
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0x5a)
      abort(); /* and writes nothing */
}

static void fuzz_doc(const uint8_t *data, size_t size) {
  rk_plan_doc *d = malloc(sizeof *d), *e = malloc(sizeof *e);
  memset(d, 0x5a, sizeof *d);
  ring_error err = {0};
  int rc = rk_plan_doc_decode((const char *)data, size, d, &err);
  if (rc != RING_OK) {
    check_refusal(rc, &err, d, sizeof *d);
    free(d);
    free(e);
    return;
  }
  char *a = NULL, *b = NULL;
  size_t alen = 0, blen = 0;
  if (rk_plan_doc_encode(d, NULL, &a, &alen) != RING_OK ||
      rk_plan_doc_decode(a, alen, e, &err) != RING_OK ||
      rk_plan_doc_encode(e, NULL, &b, &blen) != RING_OK || alen != blen || memcmp(a, b, alen) != 0)
    abort(); /* a document we accept must round-trip */
  if (d->base_version == 0 && d->input.tokens <= 1024 && d->input.n_nodes <= 16) {
    ring_plan *p = NULL;
    rc = rk_plan_doc_compute(d, NULL, &p, &err);
    if (rc != RING_OK && (err.code != rc || err.message[0] == '\0'))
      abort();
    ring_plan_free(p);
  }
  free(a);
  free(b);
  rk_plan_doc_free(d);
  rk_plan_doc_free(e);
  free(d);
  free(e);
}

static void fuzz_run(const uint8_t *data, size_t size) {
  rk_run *r = malloc(sizeof *r), *s = malloc(sizeof *s);
  memset(r, 0x5a, sizeof *r);
  ring_error err = {0};
  int rc = rk_run_decode((const char *)data, size, r, &err);
  if (rc != RING_OK) {
    check_refusal(rc, &err, r, sizeof *r);
    free(r);
    free(s);
    return;
  }
  char *a = NULL, *b = NULL;
  size_t alen = 0, blen = 0;
  if (rk_run_encode(r, &a, &alen) != RING_OK || rk_run_decode(a, alen, s, &err) != RING_OK ||
      rk_run_encode(s, &b, &blen) != RING_OK || alen != blen || memcmp(a, b, alen) != 0)
    abort(); /* a run we accept must round-trip */
  free(a);
  free(b);
  rk_run_free(r);
  rk_run_free(s);
  free(r);
  free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_doc(data, size);
  fuzz_run(data, size);
  return 0;
}
