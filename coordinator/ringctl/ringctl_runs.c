/*
 * ringctl_runs.c: finished plans under plan/history/ (ringctl_out.h), for
 * `ringctl history` and the last plan in `ringctl status`.
 *
 * Sections: reading; JSON.
 */
#include "ringctl_out.h"

#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- reading */

/* When a run ended, else when it was last updated. */
static uint64_t run_time(const rk_run *r) {
  return r->finished_ms ? r->finished_ms : r->updated_ms;
}

static int newest_first(const void *pa, const void *pb) {
  uint64_t a = run_time(pa), b = run_time(pb);
  if (a != b)
    return a > b ? -1 : 1;
  return strcmp(((const rk_run *)pa)->plan.id, ((const rk_run *)pb)->plan.id);
}

/* Decodes every value of r into runs[], skipping (and naming) bad ones. */
static uint32_t decode_runs(const ring_kvs *r, rk_run *runs) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < r->n; i++) {
    ring_error e = {RING_OK, ""};
    const ring_kv *kv = &r->kvs[i];
    if (rk_run_decode((const char *)kv->value, kv->value_len, &runs[n], &e) == RING_OK)
      n++;
    else
      fprintf(stderr, "ringctl: skipping %s: %s\n", (const char *)kv->key, e.message);
  }
  return n;
}

int ringctl_history_read(ring_etcd *c, const char *cluster, rk_run **runs, uint32_t *n,
                         ring_error *err) {
  char prefix[RK_KEY_MAX];
  if (rk_key(prefix, cluster, "plan/history/") < 0)
    return RING_EINVAL;
  ring_range_opts o = {.prefix = true};
  ring_kvs r;
  int rc = ring_etcd_range(c, prefix, strlen(prefix), &o, &r, err);
  if (rc != RING_OK)
    return rc;
  rk_run *out = calloc(r.n ? r.n : 1, sizeof *out);
  if (out == NULL) {
    ring_kvs_clear(&r);
    return RING_ENOMEM;
  }
  *n = decode_runs(&r, out);
  ring_kvs_clear(&r);
  qsort(out, *n, sizeof *out, newest_first);
  *runs = out;
  return RING_OK;
}

void ringctl_runs_free(rk_run *runs, uint32_t n) {
  for (uint32_t i = 0; runs != NULL && i < n; i++)
    rk_run_free(&runs[i]);
  free(runs);
}

/* -------------------------------------------------------------------- JSON */

cJSON *ringctl_run_json(const rk_run *r) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return NULL;
  cJSON_AddStringToObject(o, "id", r->plan.id);
  cJSON_AddStringToObject(o, "state", rk_run_state_name(r->state));
  cJSON_AddNumberToObject(o, "moves_total", r->plan.moves_total);
  cJSON_AddNumberToObject(o, "moves_done", r->cursor.moves_done);
  return o;
}
