/*
 * cluster.c: a cluster's state read from etcd at one revision (cluster.h).
 *
 * Sections:
 *   1. the read: one txn of range ops for the control plane's keys, then
 *      each host-written prefix in bounded spans at that txn's revision
 *   2. parsing each part (strict for what the control plane writes,
 *      tolerant for what agents write)
 *   3. lookups and tables
 *   4. the planner's input from node records
 *   5. a table's weighted targets
 */
#include "cluster.h"
#include "cluster_int.h"
#include "ringx.h"

#include <cjson/cJSON.h>
#include <xxhash.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- 1. the read */

/* The parts of the state (cluster_int.h): one table serves the full read
 * here and the watch-fed cache (state_cache.c). */
const rk_part rk__parts[RK_N_PARTS] = {
    {RK_READ_CONFIG, "config", false, -1},
    {RK_READ_VERSION, "version", false, -1},
    {RK_READ_NODES, "nodes/", true, -1},
    {RK_READ_ALIVE, "alive/", true, RK_HOST_ALIVE},
    {RK_READ_PLANS, "plan/proposed", false, -1},
    {RK_READ_PLANS, "plan/active", false, -1},
    {RK_READ_ACKS, "acks/", true, RK_HOST_ACK},
    {RK_READ_PROGRESS, "progress/", true, RK_HOST_PROGRESS},
    {RK_READ_LEADER, "leader", false, -1},
    {RK_READ_CLIENTS, "clients/", true, RK_HOST_CLIENT},
    {RK_READ_STUCK, "stuck", false, -1},
    {RK_READ_MISSING, "missing/", true, RK_HOST_MISSING},
    {RK_READ_RECOVERY, "recovered", false, -1},
    {RK_READ_RECOVERY, "recovery/", true, RK_HOST_RECOVERY},
    {RK_READ_SIZES, "sizes/", true, RK_HOST_SIZES},
};
#define N_PARTS ((size_t)RK_N_PARTS)

typedef int (*part_parser)(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);

static int parse_config(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_version(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_nodes(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_alive(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_proposed(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_active(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_acks(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_progress(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_leader(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_clients(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_stuck(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_missing(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_recovered(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_recovery(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);
static int parse_sizes(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err);

/* In the order of rk__parts[]. */
static const part_parser parsers[N_PARTS] = {
    parse_config, parse_version, parse_nodes,     parse_alive,    parse_proposed,
    parse_active, parse_acks,    parse_progress,  parse_leader,   parse_clients,
    parse_stuck,  parse_missing, parse_recovered, parse_recovery, parse_sizes,
};

/* The control plane's keys asked for, in one txn, parsed into s; sets
 * s->revision (with no such key asked for, from a count of keys[0]). */
static int read_txn(ring_etcd *c, char keys[][RK_KEY_MAX], unsigned what, rk_state *s,
                    ring_error *err) {
  ring_op ops[N_PARTS];
  size_t idx[N_PARTS];
  uint32_t n = 0;
  for (size_t i = 0; i < N_PARTS; i++) {
    if (!(what & rk__parts[i].bit) || rk__parts[i].host >= 0)
      continue;
    ops[n] = (ring_op){.type = RING_OP_RANGE,
                       .key = keys[i],
                       .key_len = strlen(keys[i]),
                       .prefix = rk__parts[i].prefix};
    idx[n++] = i;
  }
  if (n == 0) {
    ring_range_opts o = {.count_only = true};
    ring_kvs r;
    int rc = ring_etcd_range(c, keys[0], strlen(keys[0]), &o, &r, err);
    if (rc == RING_OK) {
      s->revision = r.revision;
      ring_kvs_clear(&r);
    }
    return rc;
  }
  ring_txn_result r;
  int rc = ring_etcd_txn(c, NULL, 0, ops, n, NULL, 0, &r, err);
  if (rc != RING_OK)
    return rc;
  s->revision = r.revision;
  for (uint32_t k = 0; k < n && k < r.n_ranges && rc == RING_OK; k++)
    rc = parsers[idx[k]](s, &r.ranges[k], strlen(keys[idx[k]]), err);
  ring_txn_result_clear(&r);
  return rc;
}

int rk__part_parse(rk_state *s, size_t part, const ring_kvs *r, size_t prefix_len,
                   ring_error *err) {
  return parsers[part](s, r, prefix_len, err);
}

/* A total order (kind, host, then revision and reason), so a state's bad
 * list reads the same however it was built (whole, or by the cache). */
int rk__bad_cmp(const void *pa, const void *pb) {
  const rk_bad_record *a = pa, *b = pb;
  if (a->kind != b->kind)
    return a->kind < b->kind ? -1 : 1;
  int c = strcmp(a->host, b->host);
  if (c != 0)
    return c;
  if (a->mod_revision != b->mod_revision)
    return a->mod_revision < b->mod_revision ? -1 : 1;
  return strcmp(a->why, b->why);
}

static int read_once(ring_etcd *c, const char *cluster, unsigned what, rk_state *out,
                     ring_error *err) {
  char keys[N_PARTS][RK_KEY_MAX];
  for (size_t i = 0; i < N_PARTS; i++)
    if (rk_key(keys[i], cluster, rk__parts[i].what) < 0)
      return ring__err(err, RING_EINVAL, "cluster name \"%.63s\" is not valid", cluster);
  rk_state s = {0};
  int rc = read_txn(c, keys, what, &s, err);
  for (size_t i = 0; i < N_PARTS && rc == RING_OK; i++) {
    if (!(what & rk__parts[i].bit) || rk__parts[i].host < 0)
      continue;
    size_t plen = strlen(keys[i]);
    ring_kvs r;
    rc = rd_host_pages(c, keys[i], plen, s.revision,
                       rk_host_value_max((rk_host_kind)rk__parts[i].host), &r, err);
    if (rc == RING_OK) {
      rc = parsers[i](&s, &r, plen, err);
      ring_kvs_clear(&r);
    }
  }
  if (rc != RING_OK) {
    rk_state_free(&s);
    return rc;
  }
  if (s.n_bad > 1)
    qsort(s.bad, s.n_bad, sizeof *s.bad, rk__bad_cmp);
  *out = s;
  return RING_OK;
}

int rk_state_read(ring_etcd *c, const char *cluster, unsigned what, rk_state *out,
                  ring_error *err) {
  ring_error local = {RING_OK, ""};
  ring_error *e = err != NULL ? err : &local;
  int rc = read_once(c, cluster, what, out, e);
  for (int again = 0; again < 3 && rd_host_compacted(rc, e); again++)
    rc = read_once(c, cluster, what, out, e);
  return rc;
}

void rk_state_free(rk_state *s) {
  if (s == NULL)
    return;
  free(s->nodes);
  free(s->node_mod);
  free(s->alive);
  if (s->has_proposed)
    rk_plan_doc_free(&s->proposed);
  if (s->has_active)
    rk_run_free(&s->active);
  free(s->acks);
  for (uint32_t i = 0; i < s->n_progress; i++)
    rk_progress_free(&s->progress[i].p);
  free(s->progress);
  for (uint32_t i = 0; i < s->n_missing; i++)
    rk_missing_free(&s->missing[i].m);
  for (uint32_t i = 0; i < s->n_sizes; i++)
    rk_sizes_free(&s->sizes[i].z);
  free(s->sizes);
  free(s->missing);
  free(s->clients);
  rk_stuck_free(&s->stuck);
  for (uint32_t i = 0; i < s->n_recovery; i++)
    rk_recovery_free(&s->recovery[i].r);
  free(s->recovery);
  free(s->bad);
  memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------- 2. parsing each part */

/* Prefixes err's message with the key it came from, relative to the
 * cluster ("nodes/n1: ..."), and returns rc. */
static int keyed(ring_error *err, int rc, const ring_kv *kv) {
  if (err == NULL)
    return rc;
  char inner[RING_ERROR_MESSAGE_MAX];
  memcpy(inner, err->message, sizeof inner);
  inner[sizeof inner - 1] = '\0';
  const char *p = (const char *)kv->key; /* "/ringkeeper/<cluster>/<what>" */
  for (int slashes = 0; *p != '\0' && slashes < 3; p++)
    slashes += *p == '/';
  return ring__err(err, rc, "%.64s: %s", p, inner);
}

/* Notes an ignored record (rk_state's bad). Out of memory it is ignored
 * all the same, just not listed. */
static void note_bad(rk_state *s, rk_bad_kind kind, const char *host, const ring_kv *kv,
                     const char *why) {
  uint32_t n = s->n_bad;
  if ((n & (n - 1)) == 0 && n != 1 && n != 2) { /* 0, 4, 8, ...: full */
    rk_bad_record *more = realloc(s->bad, (n ? 2 * (size_t)n : 4) * sizeof *more);
    if (more == NULL)
      return;
    s->bad = more;
  }
  rk_bad_record *b = &s->bad[s->n_bad++];
  *b = (rk_bad_record){.kind = kind,
                       .mod_revision = kv->mod_revision,
                       .key_hash = XXH3_64bits(kv->key, kv->key_len)};
  snprintf(b->host, sizeof b->host, "%s", host);
  snprintf(b->why, sizeof b->why, "%s", why);
}

/* A host-written value's checks before its own decoder: the key names an
 * id (copied to id) and the value is within the kind's cap. Returns 1 when
 * both hold; 0 when the size does not (noted: the host's entry stays, its
 * value unused); -1 when the key names no id (noted: no entry). */
static int host_checks(rk_state *s, rk_host_kind kind, const ring_kv *kv, size_t prefix_len,
                       char id[RING_ID_MAX + 1]) {
  char why[RK_BAD_WHY_MAX];
  int ok = rd_host_check(kind, kv, prefix_len, id, why, sizeof why);
  if (ok <= 0)
    note_bad(s, (rk_bad_kind)kind, id, kv, why);
  return ok;
}

/* A record's decoder (records.h, plan_doc.h) behind one signature. */
typedef int (*value_decoder)(const char *json, size_t len, void *out, ring_error *err);

/* A value the control plane writes: decoded strictly, or the read fails. */
static int parse_single(const ring_kvs *r, value_decoder dec, void *out, bool *has, int64_t *mod,
                        ring_error *err) {
  if (r->n == 0)
    return RING_OK;
  const ring_kv *kv = &r->kvs[0];
  int rc = dec((const char *)kv->value, kv->value_len, out, err);
  if (rc != RING_OK)
    return keyed(err, rc, kv);
  *has = true;
  *mod = kv->mod_revision;
  return RING_OK;
}

static int dec_config(const char *j, size_t n, void *out, ring_error *err) {
  return rk_config_decode(j, n, out, err);
}
static int dec_plan(const char *j, size_t n, void *out, ring_error *err) {
  return rk_plan_doc_decode(j, n, out, err);
}
static int dec_run(const char *j, size_t n, void *out, ring_error *err) {
  return rk_run_decode(j, n, out, err);
}

static int parse_config(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  (void)prefix_len;
  return parse_single(r, dec_config, &s->config, &s->has_config, &s->config_mod, err);
}

/* A decimal in 1 .. 2^53-1, nothing else. */
static bool parse_decimal(const uint8_t *p, size_t n, uint64_t *out) {
  uint64_t v = 0;
  if (n == 0 || n > 16 || p[0] == '0')
    return false;
  for (size_t i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9')
      return false;
    v = v * 10 + (uint64_t)(p[i] - '0');
  }
  if (v > RING_VERSION_MAX)
    return false;
  *out = v;
  return true;
}

static int parse_version(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  (void)prefix_len;
  if (r->n == 0)
    return RING_OK;
  const ring_kv *kv = &r->kvs[0];
  if (!parse_decimal(kv->value, kv->value_len, &s->version)) {
    ring__err(err, RING_EVERSION, "not a version number: \"%.32s\"", (const char *)kv->value);
    return keyed(err, RING_EVERSION, kv);
  }
  s->version_mod = kv->mod_revision;
  return RING_OK;
}

static int parse_nodes(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  if (r->n == 0)
    return RING_OK;
  s->nodes = calloc(r->n, sizeof *s->nodes);
  s->node_mod = calloc(r->n, sizeof *s->node_mod);
  if (s->nodes == NULL || s->node_mod == NULL)
    return ring__err(err, RING_ENOMEM, "out of memory reading %u node records", r->n);
  for (uint32_t i = 0; i < r->n; i++) {
    const ring_kv *kv = &r->kvs[i];
    char id[RING_ID_MAX + 1];
    rk_node *n = &s->nodes[i];
    int rc = rk_node_decode((const char *)kv->value, kv->value_len, n, err);
    if (rc != RING_OK)
      return keyed(err, rc, kv);
    if (!rd_host_key_id(kv, prefix_len, id) || strcmp(id, n->id) != 0) {
      ring__err(err, RING_ENODEID, "the record's id \"%s\" is not its key's", n->id);
      return keyed(err, RING_ENODEID, kv);
    }
    s->node_mod[i] = kv->mod_revision;
    s->n_nodes = i + 1;
  }
  return RING_OK;
}

static int parse_alive(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  if (r->n == 0)
    return RING_OK;
  if ((s->alive = calloc(r->n, sizeof *s->alive)) == NULL)
    return ring__err(err, RING_ENOMEM, "out of memory reading %u alive keys", r->n);
  for (uint32_t i = 0; i < r->n; i++) {
    const ring_kv *kv = &r->kvs[i];
    rk_alive_entry *e = &s->alive[s->n_alive];
    int ok = host_checks(s, RK_HOST_ALIVE, kv, prefix_len, e->a.id);
    if (ok < 0)
      continue;
    ring_error why = {RING_OK, ""};
    rk_alive a;
    e->valid = ok > 0 &&
               rk_alive_decode((const char *)kv->value, kv->value_len, &a, &why) == RING_OK &&
               strcmp(a.id, e->a.id) == 0;
    if (e->valid)
      e->a = a;
    else if (ok > 0)
      note_bad(s, RK_BAD_ALIVE, e->a.id, kv, why.code ? why.message : "id differs from the key's");
    e->lease = kv->lease;
    s->n_alive++;
  }
  return RING_OK;
}

static int parse_proposed(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  (void)prefix_len;
  return parse_single(r, dec_plan, &s->proposed, &s->has_proposed, &s->proposed_mod, err);
}

static int parse_active(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  (void)prefix_len;
  return parse_single(r, dec_run, &s->active, &s->has_active, &s->active_mod, err);
}

static int parse_acks(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  if (r->n == 0)
    return RING_OK;
  if ((s->acks = calloc(r->n, sizeof *s->acks)) == NULL)
    return ring__err(err, RING_ENOMEM, "out of memory reading %u acks", r->n);
  for (uint32_t i = 0; i < r->n; i++) {
    const ring_kv *kv = &r->kvs[i];
    rd_ack *a = &s->acks[s->n_acks];
    char why[RK_BAD_WHY_MAX];
    int ok = rd_ack_parse(kv, prefix_len, a, why, sizeof why);
    if (ok <= 0)
      note_bad(s, RK_BAD_ACKS, a->id, kv, why);
    s->n_acks += ok >= 0;
  }
  return RING_OK;
}

/* A prefix of records each host writes under its id (progress/,
 * missing/): entries of `size` bytes that start with the id, the decoded
 * value `at` bytes in. A bad value leaves the value zeroed (read as
 * nothing reported) and is noted, so it is never silent. */
typedef struct host_records {
  rk_host_kind kind;
  size_t size, at;
  value_decoder dec;
} host_records;

static int parse_host_records(rk_state *s, const ring_kvs *r, size_t prefix_len,
                              const host_records *h, void **out, uint32_t *n, ring_error *err) {
  if (r->n == 0)
    return RING_OK;
  char *list = calloc(r->n, h->size);
  if ((*out = list) == NULL)
    return ring__err(err, RING_ENOMEM, "out of memory reading %u %s keys", r->n,
                     rk_host_kind_name(h->kind));
  for (uint32_t i = 0; i < r->n; i++) {
    const ring_kv *kv = &r->kvs[i];
    char *e = list + (size_t)*n * h->size;
    int ok = host_checks(s, h->kind, kv, prefix_len, e);
    if (ok < 0)
      continue;
    ring_error why = {RING_OK, ""};
    if (ok > 0 && h->dec((const char *)kv->value, kv->value_len, e + h->at, &why) != RING_OK)
      note_bad(s, (rk_bad_kind)h->kind, e, kv, why.message);
    (*n)++;
  }
  return RING_OK;
}

static int dec_progress(const char *j, size_t n, void *out, ring_error *err) {
  return rk_progress_decode(j, n, out, err);
}

static int parse_progress(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  static const host_records h = {RK_HOST_PROGRESS, sizeof(rk_agent_progress),
                                 offsetof(rk_agent_progress, p), dec_progress};
  return parse_host_records(s, r, prefix_len, &h, (void **)&s->progress, &s->n_progress, err);
}

static int dec_missing(const char *j, size_t n, void *out, ring_error *err) {
  return rk_missing_decode(j, n, out, err);
}

/* A host's missing arcs (missing/<id>). */
static int parse_missing(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  static const host_records h = {RK_HOST_MISSING, sizeof(rk_agent_missing),
                                 offsetof(rk_agent_missing, m), dec_missing};
  return parse_host_records(s, r, prefix_len, &h, (void **)&s->missing, &s->n_missing, err);
}

static int dec_sizes(const char *j, size_t n, void *out, ring_error *err) {
  return rk_sizes_decode(j, n, out, err);
}

/* A host's arc sizes (sizes/<id>). */
static int parse_sizes(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  static const host_records h = {RK_HOST_SIZES, sizeof(rk_agent_sizes), offsetof(rk_agent_sizes, z),
                                 dec_sizes};
  return parse_host_records(s, r, prefix_len, &h, (void **)&s->sizes, &s->n_sizes, err);
}

/* A single value read tolerantly: decoded into out when it parses, else
 * noted as `kind`. Returns whether it parsed; false when absent. */
static bool parse_tolerant(rk_state *s, const ring_kvs *r, value_decoder dec, void *out,
                           rk_bad_kind kind) {
  if (r->n == 0)
    return false;
  const ring_kv *kv = &r->kvs[0];
  ring_error why = {0};
  bool ok = dec((const char *)kv->value, kv->value_len, out, &why) == RING_OK;
  if (!ok)
    note_bad(s, kind, "", kv, why.message);
  return ok;
}

static int dec_leader(const char *j, size_t n, void *out, ring_error *err) {
  return rk_leader_decode(j, n, out, err);
}

static int parse_leader(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  (void)prefix_len;
  (void)err;
  s->has_leader = parse_tolerant(s, r, dec_leader, &s->leader, RK_BAD_LEADER);
  return RING_OK;
}

/* The names are what matter: the key exists while its process's lease
 * does, so a name whose value is bad still takes part in the barrier. */
static int parse_clients(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  if (r->n == 0)
    return RING_OK;
  if ((s->clients = calloc(r->n, sizeof *s->clients)) == NULL)
    return ring__err(err, RING_ENOMEM, "out of memory reading %u clients", r->n);
  for (uint32_t i = 0; i < r->n; i++) {
    const ring_kv *kv = &r->kvs[i];
    int ok = host_checks(s, RK_HOST_CLIENT, kv, prefix_len, s->clients[s->n_clients]);
    if (ok < 0)
      continue;
    ring_error why = {RING_OK, ""};
    if (ok > 0 && rk_client_decode((const char *)kv->value, kv->value_len, NULL, &why) != RING_OK)
      note_bad(s, RK_BAD_CLIENTS, s->clients[s->n_clients], kv, why.message);
    s->n_clients++;
  }
  return RING_OK;
}

static int dec_stuck(const char *j, size_t n, void *out, ring_error *err) {
  return rk_stuck_decode(j, n, out, err);
}

/* Written by the leader; a value that does not parse is noted and read as
 * absent (stuck_mod still says the key is there), so the leader that must
 * rewrite it can still read the cluster. */
static int parse_stuck(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  (void)prefix_len;
  (void)err;
  s->has_stuck = parse_tolerant(s, r, dec_stuck, &s->stuck, RK_BAD_STUCK);
  s->stuck_mod = r->n > 0 ? r->kvs[0].mod_revision : 0;
  return RING_OK;
}

/* A restored etcd (proto/etcd.md): `recovered` is written by `ringctl
 * recover` alone, so it is strict like the other control-plane keys. */
static int dec_recovered(const char *j, size_t n, void *out, ring_error *err) {
  return ring__recovered_decode(j, n, out, err);
}

static int parse_recovered(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  (void)prefix_len;
  int64_t mod = 0;
  return parse_single(r, dec_recovered, &s->recovered, &s->has_recovered, &mod, err);
}

static int parse_recovery(rk_state *s, const ring_kvs *r, size_t prefix_len, ring_error *err) {
  if (r->n == 0)
    return RING_OK;
  if ((s->recovery = calloc(r->n, sizeof *s->recovery)) == NULL)
    return ring__err(err, RING_ENOMEM, "out of memory reading %u recovery keys", r->n);
  for (uint32_t i = 0; i < r->n; i++) {
    const ring_kv *kv = &r->kvs[i];
    rk_agent_recovery *e = &s->recovery[s->n_recovery];
    int ok = host_checks(s, RK_HOST_RECOVERY, kv, prefix_len, e->id);
    if (ok < 0)
      continue;
    ring_error why = {RING_OK, ""};
    e->r = (rk_recovery){0};
    if (ok > 0 &&
        rk_recovery_decode((const char *)kv->value, kv->value_len, &e->r, &why) != RING_OK) {
      e->r = (rk_recovery){0};
      note_bad(s, RK_BAD_RECOVERY, e->id, kv, why.message);
    }
    s->n_recovery++;
  }
  return RING_OK;
}

/* ------------------------------------------------------ 3. lookups, tables */

cJSON *rk_bad_json(const rk_state *s, uint32_t max) {
  cJSON *list = cJSON_CreateArray();
  for (uint32_t i = 0; list != NULL && i < s->n_bad && i < max; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", rk_bad_kind_name(s->bad[i].kind));
    cJSON_AddStringToObject(o, "host", s->bad[i].host);
    cJSON_AddStringToObject(o, "why", s->bad[i].why);
    cJSON_AddItemToArray(list, o);
  }
  return list;
}

const char *rk_bad_kind_name(rk_bad_kind k) {
  if (k == RK_BAD_LEADER)
    return "leader";
  if (k == RK_BAD_STUCK)
    return "stuck";
  return rk_host_kind_name((rk_host_kind)k);
}

const char *rk_bad_text(const rk_bad_record *b, char *buf, size_t size) {
  snprintf(buf, size, "%s%s%s: %s", rk_bad_kind_name(b->kind), b->host[0] ? "/" : "", b->host,
           b->why);
  return buf;
}

static int by_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

uint32_t rk_bad_hosts(const rk_state *s) {
  const char **hosts = calloc(s->n_bad ? s->n_bad : 1, sizeof *hosts);
  uint32_t n = 0, distinct = 0;
  for (uint32_t i = 0; hosts != NULL && i < s->n_bad; i++)
    if (s->bad[i].kind < (rk_bad_kind)RK_HOST_KINDS)
      hosts[n++] = s->bad[i].host;
  if (hosts == NULL)
    return s->n_bad; /* out of memory: an upper bound */
  qsort(hosts, n, sizeof *hosts, by_str);
  for (uint32_t i = 0; i < n; i++)
    distinct += i == 0 || strcmp(hosts[i], hosts[i - 1]) != 0;
  free(hosts);
  return distinct;
}

static int by_id(const void *key, const void *elem) {
  return strcmp((const char *)key, (const char *)elem); /* every element starts with its id */
}

rk_node *rk_state_node(const rk_state *s, const char *id) {
  return s->n_nodes ? bsearch(id, s->nodes, s->n_nodes, sizeof *s->nodes, by_id) : NULL;
}

const rk_alive_entry *rk_state_alive(const rk_state *s, const char *id) {
  return s->n_alive ? bsearch(id, s->alive, s->n_alive, sizeof *s->alive, by_id) : NULL;
}

uint64_t rk_state_ack(const rk_state *s, const char *id) {
  const rd_ack *a = s->n_acks ? bsearch(id, s->acks, s->n_acks, sizeof *s->acks, by_id) : NULL;
  return a ? a->version : 0;
}

const rk_progress *rk_state_progress(const rk_state *s, const char *id) {
  const rk_agent_progress *p =
      s->n_progress ? bsearch(id, s->progress, s->n_progress, sizeof *s->progress, by_id) : NULL;
  return p ? &p->p : NULL;
}

const rk_missing *rk_state_missing(const rk_state *s, const char *id) {
  const rk_agent_missing *m =
      s->n_missing ? bsearch(id, s->missing, s->n_missing, sizeof *s->missing, by_id) : NULL;
  return m != NULL && m->m.n_tokens > 0 ? &m->m : NULL;
}

const rk_sizes *rk_state_sizes(const rk_state *s, const char *id) {
  const rk_agent_sizes *z =
      s->n_sizes ? bsearch(id, s->sizes, s->n_sizes, sizeof *s->sizes, by_id) : NULL;
  return z != NULL && z->z.n > 0 ? &z->z : NULL;
}

const char *rk_barrier_laggard(const rk_state *s, const ring_table *t, uint64_t version) {
  rd_barrier_view v = {s->alive,    sizeof *s->alive, s->n_alive,
                       s->acks,     s->n_acks,        (const char(*)[RING_ID_MAX + 1]) s->clients,
                       s->n_clients};
  return rd_barrier_laggard(&v, t, version);
}

int rk_table_read(ring_etcd *c, const char *cluster, uint64_t version, ring_table **out,
                  ring_error *err) {
  char key[RK_KEY_MAX];
  int len = rk_key_version(key, cluster, "tables/", version);
  if (len < 0)
    return ring__err(err, RING_EINVAL, "cluster name \"%.63s\" is not valid", cluster);
  ring_kvs r;
  int rc = ring_etcd_range(c, key, (size_t)len, NULL, &r, err);
  if (rc != RING_OK)
    return rc;
  if (r.n == 0)
    rc = ring__err(err, RING_ENOTFOUND, "tables/%" PRIu64 ": not in etcd", version);
  else if ((rc = ring_table_decode((const char *)r.kvs[0].value, r.kvs[0].value_len, out, err)) !=
           RING_OK)
    keyed(err, rc, &r.kvs[0]);
  else if (ring_table_version(*out) != version) {
    ring_table_free(*out);
    rc = ring__err(err, RING_EVERSION, "tables/%" PRIu64 ": holds version %" PRIu64, version,
                   ring_table_version(*out));
  }
  ring_kvs_clear(&r);
  return rc;
}

/* ------------------------------------------- 4. the planner's input */

/* The state the planner is given for a node record (cluster.h). A removed
 * node that owns nothing leaves the table even while down: nothing of it
 * needs streaming. One that still owns replicas and is down stays down, so
 * the planner streams them from live replicas rather than from it. */
static ring_node_state planned_state(const rk_node *n, bool owns) {
  if (n->desired == RK_WANT_REMOVED && !owns)
    return RING_NODE_REMOVED;
  if (n->state == RING_NODE_DOWN)
    return RING_NODE_DOWN;
  if (n->desired == RK_WANT_REMOVED)
    return RING_NODE_REMOVED;
  if (n->desired == RK_WANT_DRAINED)
    return RING_NODE_DRAINING;
  return RING_NODE_ACTIVE;
}

/* A table node that has no record (records lost or never written): kept as
 * the table has it, so a missing record never moves data by itself. */
static void node_from_table(const ring_table *t, uint16_t i, rk_node *n) {
  *n = (rk_node){.weight = ring_table_node_weight(t, i), .state = ring_table_node_state(t, i)};
  snprintf(n->id, sizeof n->id, "%s", ring_table_node_id(t, i));
  snprintf(n->addr, sizeof n->addr, "%s", ring_table_node_addr(t, i));
}

/* The throttle is not the planner's: its waves are the dependency layers
 * alone (at most one replica of a token per wave), and the limits apply
 * live, at each step of the run (coord_run.c) and where the bytes flow
 * (the agents), so changing them never changes a plan or its digest. The
 * plan document keeps the fields (0) so that documents made with limits
 * still compute to their digest. */
static void input_settings(const rk_config *c, rk_plan_input *in) {
  in->tokens = c->tokens;
  in->replicas = c->replicas;
  in->seed = c->seed;
  snprintf(in->failure_domain, sizeof in->failure_domain, "%s", c->failure_domain);
  snprintf(in->best_effort, sizeof in->best_effort, "%s", c->best_effort);
  in->balance = c->balance; /* bytes: rk_input_weigh adds the sizes, or falls back */
}

int rk_desired_input(const rk_state *s, const ring_table *table, rk_plan_input *in,
                     ring_error *err) {
  if (!s->has_config)
    return ring__err(err, RING_ENOTFOUND, "the cluster is not initialised (no config)");
  uint32_t in_table = table ? ring_table_node_count(table) : 0;
  rk_plan_input r = {0};
  input_settings(&s->config, &r);
  if ((r.nodes = calloc((size_t)in_table + s->n_nodes + 1, sizeof *r.nodes)) == NULL)
    return ring__err(err, RING_ENOMEM, "out of memory building the planner's input");
  for (uint16_t i = 0; i < in_table; i++) {
    const rk_node *rec = rk_state_node(s, ring_table_node_id(table, i));
    rk_node *n = &r.nodes[r.n_nodes++];
    if (rec == NULL) {
      node_from_table(table, i, n);
      continue;
    }
    *n = *rec;
    n->state = planned_state(rec, ring_table_node_replicas(table, i) > 0);
  }
  for (uint32_t i = 0; i < s->n_nodes; i++) {
    const rk_node *rec = &s->nodes[i];
    bool known = table && ring_table_find_node(table, rec->id) >= 0;
    if (known || rec->state == RING_NODE_REMOVED || planned_state(rec, false) == RING_NODE_REMOVED)
      continue; /* a node that never held anything and is gone needs no plan */
    r.nodes[r.n_nodes] = *rec;
    r.nodes[r.n_nodes++].state = planned_state(rec, false);
  }
  *in = r;
  return RING_OK;
}

static bool same_labels(const rk_node *n, const ring_table *t, uint16_t i) {
  if (n->labels.n != ring_table_node_label_count(t, i))
    return false;
  for (uint32_t k = 0; k < n->labels.n; k++) {
    const char *v = ring_table_node_label(t, i, n->labels.key[k]);
    if (v == NULL || strcmp(v, n->labels.value[k]) != 0)
      return false; /* keys are unique, so equal counts and all found = equal sets */
  }
  return true;
}

bool rk_input_matches_table(const rk_plan_input *in, const ring_table *table) {
  if (table == NULL || in->n_nodes != ring_table_node_count(table))
    return false;
  for (uint16_t i = 0; i < in->n_nodes; i++) {
    const rk_node *n = &in->nodes[i];
    if (n->state == RING_NODE_REMOVED)
      return false; /* it should leave the table: a plan drops it once it owns nothing */
    if (strcmp(n->id, ring_table_node_id(table, i)) != 0 ||
        strcmp(n->addr, ring_table_node_addr(table, i)) != 0 ||
        n->weight != ring_table_node_weight(table, i) ||
        n->state != ring_table_node_state(table, i) || !same_labels(n, table, i))
      return false;
  }
  /* Under bytes balance the sizes drift as data grows: a table matches
   * while its hard rules hold, and a rebalance for drift is the operator's
   * (ringctl plan --balance bytes), never a plan every step. */
  char *report = NULL;
  int violations = in->balance == RING_BALANCE_BYTES
                       ? ring_table_verify_rules(table, in->failure_domain, &report)
                       : ring_table_verify(table, in->failure_domain, &report);
  free(report);
  return violations == 0;
}

/* ----------------------------------------- 5. a table's weighted targets */

/* Serving nodes (active, joining) take a share; the others give theirs up. */
static bool serving(ring_node_state s) { return s == RING_NODE_ACTIVE || s == RING_NODE_JOINING; }

/* The plain weighted shares T*R*w/sum(w) of t's nodes into targets[]. */
static void plain_targets(const ring_table *t, double *targets) {
  uint32_t n = ring_table_node_count(t);
  double sum = 0, slots = (double)ring_table_tokens(t) * (double)ring_table_replicas(t);
  for (uint32_t i = 0; i < n; i++)
    if (serving(ring_table_node_state(t, (uint16_t)i)))
      sum += ring_table_node_weight(t, (uint16_t)i);
  for (uint32_t i = 0; i < n; i++) {
    bool serves = serving(ring_table_node_state(t, (uint16_t)i));
    targets[i] = serves && sum > 0 ? slots * ring_table_node_weight(t, (uint16_t)i) / sum : 0;
  }
}

/* The planner's targets for t's own membership (ring_plan_node_load, so
 * domain caps apply: a domain holds at most T). Returns a ring_errno; a
 * refusal (too few domains) leaves targets[] as they were. */
static int planned_targets(const ring_table *t, double *targets) {
  uint32_t n = ring_table_node_count(t);
  const char *level = ring_table_failure_domain(t), *keys[1] = {level};
  ring_node_spec *specs = calloc(n ? n : 1, sizeof *specs);
  const char **values = calloc(n ? n : 1, sizeof *values);
  int rc = specs && values ? RING_OK : RING_ENOMEM;
  for (uint32_t i = 0; rc == RING_OK && i < n; i++) {
    uint16_t k = (uint16_t)i;
    values[i] = level[0] ? ring_table_node_label(t, k, level) : NULL;
    specs[i] = (ring_node_spec){ring_table_node_id(t, k),
                                ring_table_node_addr(t, k),
                                keys,
                                &values[i],
                                values[i] != NULL,
                                ring_table_node_weight(t, k),
                                ring_table_node_state(t, k)};
  }
  ring_plan_config cfg = {.cluster = ring_table_cluster(t),
                          .tokens = ring_table_tokens(t),
                          .replicas = ring_table_replicas(t),
                          .seed = ring_table_seed(t),
                          .failure_domain = level};
  ring_plan *p = NULL;
  if (rc == RING_OK)
    rc = ring_plan_compute(t, specs, n, &cfg, &p, NULL);
  for (uint32_t i = 0; rc == RING_OK && i < n; i++) {
    ring_plan_load l;
    if (ring_plan_node_load(p, (uint16_t)i, &l) == RING_OK)
      targets[i] = l.target;
  }
  ring_plan_free(p);
  free(specs);
  free(values);
  return rc;
}

void rk_node_targets(const ring_table *t, double *targets) {
  plain_targets(t, targets);
  planned_targets(t, targets); /* better where the planner can say */
}
