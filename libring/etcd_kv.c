/*
 * etcd_kv.c: key-value calls (range, put, delete, txn, compact) and the
 * JSON helpers for the gateway's encoding of bytes and int64s.
 */
#include "etcd_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- JSON helpers */

int ring__json_add_bytes(cJSON *o, const char *name, const void *p, size_t n) {
  char *b64 = malloc(ring__base64_encoded_len(n) + 1);
  if (b64 == NULL)
    return RING_ENOMEM;
  ring__base64_encode(p, n, b64);
  cJSON *s = cJSON_AddStringToObject(o, name, b64);
  free(b64);
  return s ? RING_OK : RING_ENOMEM;
}

int ring__json_add_i64(cJSON *o, const char *name, int64_t v) {
  char num[24];
  snprintf(num, sizeof num, "%" PRId64, v);
  return cJSON_AddStringToObject(o, name, num) ? RING_OK : RING_ENOMEM;
}

bool ring__json_i64(const cJSON *o, const char *name, int64_t *out) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
  *out = 0;
  if (it == NULL)
    return true; /* the gateway leaves zero values out */
  if (cJSON_IsNumber(it)) {
    if (it->valuedouble < -9.2e18 || it->valuedouble > 9.2e18)
      return false;
    *out = (int64_t)it->valuedouble;
    return true;
  }
  if (!cJSON_IsString(it) || it->valuestring[0] == '\0')
    return false;
  char *end;
  errno = 0;
  long long v = strtoll(it->valuestring, &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  *out = v;
  return true;
}

int ring__json_bytes(const cJSON *o, const char *name, uint8_t **out, size_t *len) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
  const char *s = it == NULL ? "" : cJSON_IsString(it) ? it->valuestring : NULL;
  if (s == NULL)
    return RING_EPROTO;
  size_t n = strlen(s), cap = n / 4 * 3 + 1;
  uint8_t *buf = malloc(cap);
  if (buf == NULL)
    return RING_ENOMEM;
  long got = ring__base64_decode(s, n, buf, cap);
  if (got < 0) {
    free(buf);
    return RING_EPROTO;
  }
  buf[got] = '\0';
  *out = buf;
  *len = (size_t)got;
  return RING_OK;
}

int ring__prefix_end(const void *key, size_t len, uint8_t **out, size_t *out_len) {
  uint8_t *end = malloc(len ? len : 1);
  if (end == NULL)
    return RING_ENOMEM;
  memcpy(end, key, len);
  size_t n = len;
  while (n > 0 && end[n - 1] == 0xff) /* 0xff cannot be incremented: drop it */
    n--;
  if (n == 0) { /* every key: etcd spells that "\0" */
    end[0] = 0;
    *out_len = 1;
  } else {
    end[n - 1]++;
    *out_len = n;
  }
  *out = end;
  return RING_OK;
}

void ring_kv_clear(ring_kv *kv) {
  if (kv == NULL)
    return;
  free(kv->key);
  free(kv->value);
  memset(kv, 0, sizeof *kv);
}

void ring_kvs_clear(ring_kvs *r) {
  if (r == NULL)
    return;
  for (uint32_t i = 0; i < r->n; i++)
    ring_kv_clear(&r->kvs[i]);
  free(r->kvs);
  memset(r, 0, sizeof *r);
}

int ring__kv_parse(const cJSON *o, ring_kv *kv) {
  memset(kv, 0, sizeof *kv);
  if (!cJSON_IsObject(o))
    return RING_EPROTO;
  int rc = ring__json_bytes(o, "key", &kv->key, &kv->key_len);
  if (rc == RING_OK && cJSON_HasObjectItem(o, "value"))
    rc = ring__json_bytes(o, "value", &kv->value, &kv->value_len);
  if (rc == RING_OK &&
      !(ring__json_i64(o, "create_revision", &kv->create_revision) &&
        ring__json_i64(o, "mod_revision", &kv->mod_revision) &&
        ring__json_i64(o, "version", &kv->version) && ring__json_i64(o, "lease", &kv->lease)))
    rc = RING_EPROTO;
  if (rc != RING_OK)
    ring_kv_clear(kv);
  return rc;
}

static int header_revision(const cJSON *resp, int64_t *rev) {
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(resp, "header");
  return cJSON_IsObject(h) && ring__json_i64(h, "revision", rev) ? RING_OK : RING_EPROTO;
}

int ring__kvs_parse(const cJSON *resp, ring_kvs *out) {
  memset(out, 0, sizeof *out);
  if (!cJSON_IsObject(resp))
    return RING_EPROTO;
  const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(resp, "kvs");
  if (kvs != NULL && !cJSON_IsArray(kvs))
    return RING_EPROTO; /* an object's members must never be walked as elements */
  int n = kvs ? cJSON_GetArraySize(kvs) : 0;
  const cJSON *more = cJSON_GetObjectItemCaseSensitive(resp, "more");
  if (more != NULL && !cJSON_IsBool(more))
    return RING_EPROTO;
  out->kvs = calloc(n ? (size_t)n : 1, sizeof *out->kvs);
  if (out->kvs == NULL)
    return RING_ENOMEM;
  int rc = RING_OK;
  for (const cJSON *e = kvs ? kvs->child : NULL; e && out->n < (uint32_t)n && rc == RING_OK;
       e = e->next)
    if ((rc = ring__kv_parse(e, &out->kvs[out->n])) == RING_OK)
      out->n++;
  out->more = cJSON_IsTrue(more);
  if (rc == RING_OK && !ring__json_i64(resp, "count", &out->count))
    rc = RING_EPROTO;
  if (rc == RING_OK)
    rc = header_revision(resp, &out->revision);
  if (rc != RING_OK)
    ring_kvs_clear(out);
  return rc;
}

int ring__put_reply_parse(const cJSON *resp, int64_t *revision, ring_kv *prev) {
  int64_t rev = 0;
  if (!cJSON_IsObject(resp) || header_revision(resp, &rev) != RING_OK)
    return RING_EPROTO;
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(resp, "prev_kv");
  if (prev != NULL && p != NULL) {
    int rc = ring__kv_parse(p, prev);
    if (rc != RING_OK)
      return rc;
  } else if (prev != NULL) {
    memset(prev, 0, sizeof *prev); /* the key was new */
  }
  *revision = rev;
  return RING_OK;
}

int ring__delete_reply_parse(const cJSON *resp, int64_t *deleted, int64_t *revision) {
  int64_t n = 0, rev = 0;
  if (!cJSON_IsObject(resp) || !ring__json_i64(resp, "deleted", &n) || n < 0 ||
      header_revision(resp, &rev) != RING_OK)
    return RING_EPROTO;
  *deleted = n;
  *revision = rev;
  return RING_OK;
}

/* Adds key (and range_end for a prefix) to a request object. */
int ring__json_add_key(cJSON *o, const void *key, size_t len, bool prefix) {
  int rc = ring__json_add_bytes(o, "key", key, len);
  if (rc != RING_OK || !prefix)
    return rc;
  uint8_t *end;
  size_t end_len;
  if ((rc = ring__prefix_end(key, len, &end, &end_len)) != RING_OK)
    return rc;
  rc = ring__json_add_bytes(o, "range_end", end, end_len);
  free(end);
  return rc;
}

int ring__etcd_run(ring_etcd *c, const char *path, cJSON *body, int rc, ring__retry retry,
                   cJSON **resp, ring_error *err) {
  if (body == NULL || rc != RING_OK) {
    cJSON_Delete(body);
    return ring__err(err, RING_ENOMEM, "request body");
  }
  rc = ring__etcd_call(c, path, body, retry, resp, err);
  cJSON_Delete(body);
  return rc;
}

/* ------------------------------------------------------------------ range */

static cJSON *range_request(const void *key, size_t len, const ring_range_opts *o, int *rc) {
  static const ring_range_opts none;
  o = o ? o : &none;
  cJSON *body = cJSON_CreateObject();
  *rc = body ? ring__json_add_key(body, key, len, o->prefix) : RING_ENOMEM;
  if (*rc == RING_OK && o->limit)
    *rc = ring__json_add_i64(body, "limit", o->limit);
  if (*rc == RING_OK && o->revision)
    *rc = ring__json_add_i64(body, "revision", o->revision);
  if (*rc == RING_OK && o->keys_only)
    *rc = cJSON_AddTrueToObject(body, "keys_only") ? RING_OK : RING_ENOMEM;
  if (*rc == RING_OK && o->count_only)
    *rc = cJSON_AddTrueToObject(body, "count_only") ? RING_OK : RING_ENOMEM;
  return body;
}

int ring_etcd_range(ring_etcd *c, const void *key, size_t key_len, const ring_range_opts *opts,
                    ring_kvs *out, ring_error *err) {
  if (c == NULL || (key == NULL && key_len) || out == NULL)
    return ring__err(err, RING_EINVAL, "ring_etcd_range: NULL argument");
  int rc;
  cJSON *body = range_request(key, key_len, opts, &rc), *resp = NULL;
  if ((rc = ring__etcd_run(c, "kv/range", body, rc, RING__READ, &resp, err)) != RING_OK)
    return rc;
  rc = ring__kvs_parse(resp, out);
  cJSON_Delete(resp);
  return rc == RING_OK ? rc : ring__err(err, rc, "etcd range: malformed reply");
}

/* -------------------------------------------------------------- put, del */

int ring_etcd_put(ring_etcd *c, const void *key, size_t key_len, const void *value,
                  size_t value_len, int64_t lease, int64_t *revision, ring_kv *prev,
                  ring_error *err) {
  if (c == NULL || (key == NULL && key_len) || (value == NULL && value_len))
    return ring__err(err, RING_EINVAL, "ring_etcd_put: NULL argument");
  cJSON *body = cJSON_CreateObject(), *resp = NULL;
  int rc = body ? ring__json_add_key(body, key, key_len, false) : RING_ENOMEM;
  if (rc == RING_OK)
    rc = ring__json_add_bytes(body, "value", value, value_len);
  if (rc == RING_OK && lease)
    rc = ring__json_add_i64(body, "lease", lease);
  if (rc == RING_OK && prev)
    rc = cJSON_AddTrueToObject(body, "prev_kv") ? RING_OK : RING_ENOMEM;
  if ((rc = ring__etcd_run(c, "kv/put", body, rc, RING__WRITE, &resp, err)) != RING_OK)
    return rc;
  int64_t rev = 0;
  rc = ring__put_reply_parse(resp, &rev, prev);
  cJSON_Delete(resp);
  if (rc != RING_OK)
    return ring__err(err, rc, "etcd put: malformed reply");
  if (revision)
    *revision = rev;
  return RING_OK;
}

int ring_etcd_delete(ring_etcd *c, const void *key, size_t key_len, bool prefix, int64_t *deleted,
                     int64_t *revision, ring_error *err) {
  if (c == NULL || (key == NULL && key_len))
    return ring__err(err, RING_EINVAL, "ring_etcd_delete: NULL argument");
  cJSON *body = cJSON_CreateObject(), *resp = NULL;
  int rc = body ? ring__json_add_key(body, key, key_len, prefix) : RING_ENOMEM;
  if ((rc = ring__etcd_run(c, "kv/deleterange", body, rc, RING__WRITE, &resp, err)) != RING_OK)
    return rc;
  int64_t n = 0, rev = 0;
  rc = ring__delete_reply_parse(resp, &n, &rev);
  cJSON_Delete(resp);
  if (rc != RING_OK)
    return ring__err(err, rc, "etcd delete: malformed reply");
  if (deleted)
    *deleted = n;
  if (revision)
    *revision = rev;
  return RING_OK;
}

int ring_etcd_compact(ring_etcd *c, int64_t revision, ring_error *err) {
  if (c == NULL || revision < 1)
    return ring__err(err, RING_EINVAL, "ring_etcd_compact: bad argument");
  cJSON *body = cJSON_CreateObject(), *resp = NULL;
  int rc = body ? ring__json_add_i64(body, "revision", revision) : RING_ENOMEM;
  if ((rc = ring__etcd_run(c, "kv/compaction", body, rc, RING__READ, &resp, err)) == RING_OK)
    cJSON_Delete(resp);
  return rc;
}

/* -------------------------------------------------------------------- txn */

static const char *const cmp_targets[] = {"VERSION", "CREATE", "MOD", "VALUE"};
static const char *const cmp_fields[] = {"version", "create_revision", "mod_revision", "value"};
static const char *const cmp_ops[] = {"EQUAL", "NOT_EQUAL", "LESS", "GREATER"};

static int add_compare(cJSON *arr, const ring_cmp *k) {
  if ((unsigned)k->target > RING_CMP_VALUE || (unsigned)k->op > RING_CMP_GT)
    return RING_EINVAL;
  cJSON *o = cJSON_CreateObject();
  if (o == NULL || !cJSON_AddItemToArray(arr, o))
    return (cJSON_Delete(o), RING_ENOMEM);
  int rc = ring__json_add_key(o, k->key, k->key_len, false);
  if (rc == RING_OK && !cJSON_AddStringToObject(o, "target", cmp_targets[k->target]))
    rc = RING_ENOMEM;
  if (rc == RING_OK && !cJSON_AddStringToObject(o, "result", cmp_ops[k->op]))
    rc = RING_ENOMEM;
  if (rc == RING_OK)
    rc = k->target == RING_CMP_VALUE
             ? ring__json_add_bytes(o, cmp_fields[k->target], k->value, k->value_len)
             : ring__json_add_i64(o, cmp_fields[k->target], k->number);
  return rc;
}

static int add_op(cJSON *arr, const ring_op *op) {
  static const char *const kinds[] = {"request_range", "request_put", "request_delete_range"};
  if ((unsigned)op->type > RING_OP_DELETE)
    return RING_EINVAL;
  cJSON *o = cJSON_CreateObject(), *inner = cJSON_CreateObject();
  if (!o || !inner || !cJSON_AddItemToArray(arr, o)) {
    cJSON_Delete(o);
    cJSON_Delete(inner);
    return RING_ENOMEM;
  }
  cJSON_AddItemToObject(o, kinds[op->type], inner);
  int rc = ring__json_add_key(inner, op->key, op->key_len, op->type != RING_OP_PUT && op->prefix);
  if (rc == RING_OK && op->type == RING_OP_PUT)
    rc = ring__json_add_bytes(inner, "value", op->value, op->value_len);
  if (rc == RING_OK && op->type == RING_OP_PUT && op->lease)
    rc = ring__json_add_i64(inner, "lease", op->lease);
  return rc;
}

static cJSON *txn_request(const ring_cmp *cmps, uint32_t n_cmps, const ring_op *succ,
                          uint32_t n_succ, const ring_op *fail, uint32_t n_fail, int *rc) {
  cJSON *body = cJSON_CreateObject();
  cJSON *c = cJSON_AddArrayToObject(body, "compare");
  cJSON *s = cJSON_AddArrayToObject(body, "success");
  cJSON *f = cJSON_AddArrayToObject(body, "failure");
  *rc = body && c && s && f ? RING_OK : RING_ENOMEM;
  for (uint32_t i = 0; *rc == RING_OK && i < n_cmps; i++)
    *rc = add_compare(c, &cmps[i]);
  for (uint32_t i = 0; *rc == RING_OK && i < n_succ; i++)
    *rc = add_op(s, &succ[i]);
  for (uint32_t i = 0; *rc == RING_OK && i < n_fail; i++)
    *rc = add_op(f, &fail[i]);
  return body;
}

void ring_txn_result_clear(ring_txn_result *r) {
  if (r == NULL)
    return;
  for (uint32_t i = 0; i < r->n_ranges; i++)
    ring_kvs_clear(&r->ranges[i]);
  free(r->ranges);
  memset(r, 0, sizeof *r);
}

#define TXN_BAD "etcd txn: malformed reply: "

/* What etcd calls the response to each ring_op_type. */
static const char *const response_kinds[] = {"response_range", "response_put",
                                             "response_delete_range"};

/* Response i of the branch that ran, for op: an object holding exactly the
 * response of op's kind. A RANGE's key-values land in *k (the caller frees
 * them); other kinds leave *k empty. On failure *k holds nothing. */
static int txn_response(const cJSON *r, uint32_t i, const ring_op *op, ring_kvs *k,
                        ring_error *err) {
  memset(k, 0, sizeof *k);
  if ((unsigned)op->type > RING_OP_DELETE)
    return ring__err(err, RING_EINVAL, "etcd txn: op %u has an unknown type", i);
  const char *kind = response_kinds[op->type];
  if (!cJSON_IsObject(r))
    return ring__err(err, RING_EPROTO, TXN_BAD "responses[%u] is not an object", i);
  const cJSON *body = cJSON_GetObjectItemCaseSensitive(r, kind);
  if (!cJSON_IsObject(body) || cJSON_GetArraySize(r) != 1)
    return ring__err(err, RING_EPROTO, TXN_BAD "responses[%u] is not one %s object", i, kind);
  if (op->type != RING_OP_RANGE)
    return RING_OK;
  int rc = ring__kvs_parse(body, k);
  if (rc == RING_ENOMEM)
    return ring__err(err, rc, "etcd txn: responses[%u]: out of memory", i);
  if (rc != RING_OK)
    return ring__err(err, rc, TXN_BAD "responses[%u].response_range", i);
  return RING_OK;
}

int ring__txn_parse(const cJSON *resp, const ring_op *success, uint32_t n_success,
                    const ring_op *failure, uint32_t n_failure, ring_txn_result *out,
                    ring_error *err) {
  if (!cJSON_IsObject(resp))
    return ring__err(err, RING_EPROTO, TXN_BAD "not an object");
  ring_txn_result r = {0};
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(resp, "succeeded");
  if (ok != NULL && !cJSON_IsBool(ok)) /* absent: false, as the gateway leaves it out */
    return ring__err(err, RING_EPROTO, TXN_BAD "succeeded is not a boolean");
  r.succeeded = cJSON_IsTrue(ok);
  if (header_revision(resp, &r.revision) != RING_OK)
    return ring__err(err, RING_EPROTO, TXN_BAD "header.revision");
  const ring_op *ops = r.succeeded ? success : failure;
  uint32_t n_ops = r.succeeded ? n_success : n_failure;
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(resp, "responses");
  if (rs != NULL && !cJSON_IsArray(rs))
    return ring__err(err, RING_EPROTO, TXN_BAD "responses is not an array");
  int n = rs ? cJSON_GetArraySize(rs) : 0; /* etcd answers each op that ran, no more */
  if (n < 0 || (uint32_t)n != n_ops)
    return ring__err(err, RING_EPROTO, TXN_BAD "%d responses for the %u ops of the %s branch", n,
                     n_ops, r.succeeded ? "success" : "failure");
  if ((r.ranges = calloc(n_ops ? n_ops : 1, sizeof *r.ranges)) == NULL)
    return ring__err(err, RING_ENOMEM, "etcd txn: %u responses", n_ops);
  for (const cJSON *e = rs ? rs->child : NULL; e && r.n_ranges < n_ops; e = e->next) {
    int rc = txn_response(e, r.n_ranges, &ops[r.n_ranges], &r.ranges[r.n_ranges], err);
    if (rc != RING_OK) {
      ring_txn_result_clear(&r);
      return rc;
    }
    r.n_ranges++;
  }
  *out = r;
  return RING_OK;
}

int ring_etcd_txn(ring_etcd *c, const ring_cmp *cmps, uint32_t n_cmps, const ring_op *success,
                  uint32_t n_success, const ring_op *failure, uint32_t n_failure,
                  ring_txn_result *out, ring_error *err) {
  if (c == NULL || (cmps == NULL && n_cmps) || (success == NULL && n_success) ||
      (failure == NULL && n_failure))
    return ring__err(err, RING_EINVAL, "ring_etcd_txn: NULL argument");
  int rc;
  cJSON *body = txn_request(cmps, n_cmps, success, n_success, failure, n_failure, &rc);
  if (rc == RING_EINVAL) {
    cJSON_Delete(body);
    return ring__err(err, rc, "ring_etcd_txn: unknown compare or op");
  }
  bool writes = false; /* a txn of reads may be retried anywhere */
  for (uint32_t i = 0; i < n_success; i++)
    writes |= success[i].type != RING_OP_RANGE;
  for (uint32_t i = 0; i < n_failure; i++)
    writes |= failure[i].type != RING_OP_RANGE;
  cJSON *resp = NULL;
  rc = ring__etcd_run(c, "kv/txn", body, rc, writes ? RING__WRITE : RING__READ, &resp, err);
  if (rc != RING_OK)
    return rc;
  ring_txn_result r;
  rc = ring__txn_parse(resp, success, n_success, failure, n_failure, &r, err);
  cJSON_Delete(resp);
  if (rc != RING_OK)
    return rc;
  if (out)
    *out = r;
  else
    ring_txn_result_clear(&r);
  return RING_OK;
}
