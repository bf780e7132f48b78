/*
 * etcd_elect.c: leader election on one key, and the fenced txn that lets a
 * leader write only while it still leads.
 *
 * Sections:
 *   1. campaign, observe, resign
 *   2. the fenced txn
 *
 * Leadership is the key existing with our lease; its create revision is
 * the fencing token. Every write a leader makes through the fenced txn
 * carries the compare create_revision(key) == token, which etcd evaluates
 * atomically with the write, so a leader that paused (GC, SIGSTOP, a slow
 * disk) past its lease, and was replaced, has each later write refused by
 * etcd itself: the token it carries names a key that no longer exists.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "etcd_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAMPAIGN_TRIES 3 /* txns sent when outcomes stay unknown */
#define RESIGN_TRIES 3
#define FENCE_TRIES 8 /* rounds of the fenced txn while compared keys keep changing */

/* ------------------------------------------ 1. campaign, observe, resign */

/* Moves kvs->kvs[0] into *kv (kvs keeps an empty entry). */
static void take_first(ring_kvs *kvs, ring_kv *kv) {
  *kv = kvs->kvs[0];
  memset(&kvs->kvs[0], 0, sizeof kvs->kvs[0]);
}

static bool is_ours(const ring_kv *kv, const void *value, size_t value_len, int64_t lease) {
  return kv->lease == lease && kv->value_len == value_len &&
         (value_len == 0 || memcmp(kv->value, value, value_len) == 0);
}

/* The outcome of one campaign txn whose fate is unknown, decided by reading
 * the key: ours (value and lease match: we won, the key's create revision
 * is our token), someone else's (RING_EBUSY), or absent (*again: nothing of
 * ours is there, so another txn is safe: its compare still guards). */
static int campaign_reread(ring_etcd *c, const char *key, const void *value, size_t value_len,
                           int64_t lease, int64_t *token, ring_kv *current, bool *again,
                           ring_error *err) {
  ring_kvs kvs;
  char why[RING_ERROR_MESSAGE_MAX];
  snprintf(why, sizeof why, "%s", err ? err->message : "");
  int rc = ring_etcd_range(c, key, strlen(key), NULL, &kvs, err);
  if (rc != RING_OK)
    return ring__err(err, RING_EUNKNOWN, "campaign for %s: %s; re-reading failed too", key, why);
  *again = kvs.n == 0;
  if (kvs.n == 0)
    rc = RING_EUNKNOWN;
  else if (is_ours(&kvs.kvs[0], value, value_len, lease))
    *token = kvs.kvs[0].create_revision;
  else {
    rc = ring__err(err, RING_EBUSY, "%s is held by another leader (lease %lld)", key,
                   (long long)kvs.kvs[0].lease);
    if (current)
      take_first(&kvs, current);
  }
  ring_kvs_clear(&kvs);
  return rc;
}

/* What a campaign txn that got a reply says: won (*token), or RING_EBUSY
 * with the leader's key-value moved into *current. */
static int campaign_outcome(ring_txn_result *r, const char *key, int64_t *token, ring_kv *current,
                            ring_error *err) {
  if (r->succeeded) {
    *token = r->revision; /* the txn's one write made the key at the header's revision */
    return RING_OK;
  }
  if (r->n_ranges != 1 || r->ranges[0].n != 1) /* the compare failed, so the key exists */
    return ring__err(err, RING_EPROTO, "campaign for %s: failed compare without a key", key);
  int rc = ring__err(err, RING_EBUSY, "%s is held by another leader (lease %lld)", key,
                     (long long)r->ranges[0].kvs[0].lease);
  if (current)
    take_first(&r->ranges[0], current);
  return rc;
}

/* One txn: if create_revision(key) == 0, put key = value under lease; else
 * range key, which tells who leads. When the reply is lost (RING_EUNKNOWN)
 * the key is re-read instead of sending the txn blindly again; only when
 * the key is absent (nothing of ours there) is the txn sent again. */
int ring_etcd_campaign(ring_etcd *c, const char *key, const void *value, size_t value_len,
                       int64_t lease, ring_leadership *out, ring_kv *current, ring_error *err) {
  if (c == NULL || key == NULL || *key == '\0' || (value == NULL && value_len) || lease == 0 ||
      out == NULL)
    return ring__err(err, RING_EINVAL, "ring_etcd_campaign: bad argument");
  size_t klen = strlen(key);
  char *copy = strdup(key); /* before the txn: a won election must not fail for memory */
  if (copy == NULL)
    return ring__err(err, RING_ENOMEM, "campaign");
  ring_cmp absent = {key, klen, RING_CMP_CREATE, RING_CMP_EQ, 0, NULL, 0};
  ring_op put = {RING_OP_PUT, key, klen, value, value_len, lease, false};
  ring_op get = {RING_OP_RANGE, key, klen, NULL, 0, 0, false};
  int64_t token = 0;
  int rc = RING_EUNKNOWN;
  bool again = true;
  for (int i = 0; i < CAMPAIGN_TRIES && again; i++) {
    ring_txn_result r;
    again = false;
    rc = ring_etcd_txn(c, &absent, 1, &put, 1, &get, 1, &r, err);
    if (rc == RING_OK) {
      rc = campaign_outcome(&r, key, &token, current, err);
      ring_txn_result_clear(&r);
    } else if (rc == RING_EUNKNOWN) {
      rc = campaign_reread(c, key, value, value_len, lease, &token, current, &again, err);
    }
  }
  if (again)
    rc = ring__err(err, RING_EUNKNOWN, "campaign for %s: no reply after %d tries", key,
                   CAMPAIGN_TRIES);
  if (rc != RING_OK) {
    free(copy);
    return rc;
  }
  *out = (ring_leadership){.key = copy, .lease = lease, .create_revision = token};
  return RING_OK;
}

int ring_etcd_leader(ring_etcd *c, const char *key, ring_kv *out, ring_error *err) {
  if (c == NULL || key == NULL || out == NULL)
    return ring__err(err, RING_EINVAL, "ring_etcd_leader: NULL argument");
  ring_kvs kvs;
  int rc = ring_etcd_range(c, key, strlen(key), NULL, &kvs, err);
  if (rc != RING_OK)
    return rc;
  if (kvs.n == 0)
    rc = ring__err(err, RING_ENOTFOUND, "%s: nobody leads", key);
  else
    take_first(&kvs, out);
  ring_kvs_clear(&kvs);
  return rc;
}

/* Deletes the key only if its create revision is still our token.
 * RING_ENOTLEADER when it no longer was (nothing deleted). The txn is
 * idempotent, so an unknown outcome is settled by sending it again; if that
 * one finds the key gone, the first one (or the lease's expiry) removed it,
 * and resigning is done: RING_OK. */
int ring_etcd_resign(ring_etcd *c, const ring_leadership *l, ring_error *err) {
  if (c == NULL || l == NULL || l->key == NULL)
    return ring__err(err, RING_EINVAL, "ring_etcd_resign: NULL argument");
  size_t klen = strlen(l->key);
  ring_cmp ours = {l->key, klen, RING_CMP_CREATE, RING_CMP_EQ, l->create_revision, NULL, 0};
  ring_op del = {RING_OP_DELETE, l->key, klen, NULL, 0, 0, false};
  int rc = RING_EUNKNOWN;
  for (int i = 0; i < RESIGN_TRIES && rc == RING_EUNKNOWN; i++) {
    ring_txn_result r;
    if ((rc = ring_etcd_txn(c, &ours, 1, &del, 1, NULL, 0, &r, err)) != RING_OK)
      continue;
    if (!r.succeeded && i == 0)
      rc = ring__err(err, RING_ENOTLEADER, "%s: no longer ours to resign", l->key);
    ring_txn_result_clear(&r);
  }
  return rc;
}

void ring_leadership_clear(ring_leadership *l) {
  if (l == NULL)
    return;
  free(l->key);
  memset(l, 0, sizeof *l);
}

/* --------------------------------------------------- 2. the fenced txn */

/*
 * Semantics. etcd has no "else if", and this client sends no nested txns,
 * so the caller's txn "if C then S else F" becomes, with L the leader
 * compare create_revision(l->key) == l->create_revision:
 *
 *   txn 1:  if L and C then S
 *           else range l->key, and range each key C compares
 *     - succeeded: S ran while we led. RING_OK, *out as from ring_etcd_txn.
 *     - l->key absent or with another create revision: RING_ENOTLEADER;
 *       txn 1 wrote nothing (its failure branch only reads).
 *     - else L held and C failed at txn 1's revision. Without failure ops
 *       that is RING_ECONFLICT at once. Otherwise, with m_k the mod
 *       revision txn 1 saw for each compared key k (0 when absent):
 *
 *   txn 2:  if L and mod_revision(k) == m_k for every k then F
 *           else range l->key
 *     - succeeded: no compared key changed since txn 1, so C was still
 *       false (a compare reads only its key's state), and F ran while we
 *       led: the same outcome as one atomic "if L then (if C then S else
 *       F)" at txn 2's revision. RING_ECONFLICT, *out with F's results
 *       (succeeded false, as for a plain txn's failure branch).
 *     - L failed: RING_ENOTLEADER; nothing was written.
 *     - a compared key changed: start again at txn 1 (FENCE_TRIES rounds;
 *       then RING_EBUSY, with nothing written).
 *
 * Every write either txn makes sits behind L in the same txn, so once the
 * leader key is gone or re-created, no call from this leadership writes
 * anything, however long the caller paused between deciding and sending.
 * A txn whose reply is lost gives RING_EUNKNOWN (from txn 1: S may have
 * run; from txn 2: F may have run): re-read before acting.
 */

/* Whether a range of the leader key shows our incarnation of it. */
static bool still_leader(const ring_txn_result *r, const ring_leadership *l) {
  return r->n_ranges >= 1 && r->ranges[0].n == 1 &&
         r->ranges[0].kvs[0].create_revision == l->create_revision;
}

/* Hands r to the caller (or frees it) and returns rc. */
static int deliver(ring_txn_result *r, ring_txn_result *out, int rc) {
  if (out)
    *out = *r;
  else
    ring_txn_result_clear(r);
  return rc;
}

/* Txn 2: F behind L and "no compared key changed since txn 1 (r1)". */
static int fenced_failure(ring_etcd *c, const ring_leadership *l, ring_cmp *guard,
                          const ring_cmp *cmps, uint32_t n_cmps, const ring_txn_result *r1,
                          const ring_op *probes, const ring_op *failure, uint32_t n_failure,
                          ring_txn_result *out, bool *again, ring_error *err) {
  for (uint32_t i = 0; i < n_cmps; i++) {
    const ring_kvs *seen = &r1->ranges[1 + i];
    int64_t mod = seen->n ? seen->kvs[0].mod_revision : 0; /* 0: absent, as etcd compares */
    guard[1 + i] = (ring_cmp){.key = cmps[i].key,
                              .key_len = cmps[i].key_len,
                              .target = RING_CMP_MOD,
                              .op = RING_CMP_EQ,
                              .number = mod};
  }
  ring_txn_result r2;
  int rc = ring_etcd_txn(c, guard, 1 + n_cmps, failure, n_failure, probes, 1, &r2, err);
  if (rc != RING_OK)
    return rc;
  if (r2.succeeded) {
    r2.succeeded = false; /* to the caller, the failure branch ran */
    return deliver(&r2, out, ring__err(err, RING_ECONFLICT, "fenced txn: a compare did not hold"));
  }
  *again = still_leader(&r2, l);
  ring_txn_result_clear(&r2);
  return *again ? RING_EBUSY
                : ring__err(err, RING_ENOTLEADER, "%s: leadership lost; nothing written", l->key);
}

/* One round: txn 1, then txn 2 if L held and C did not. *again: a compared
 * key changed between the two, nothing was written. */
static int fenced_round(ring_etcd *c, const ring_leadership *l, ring_cmp *guard,
                        const ring_cmp *cmps, uint32_t n_cmps, const ring_op *probes,
                        const ring_op *success, uint32_t n_success, const ring_op *failure,
                        uint32_t n_failure, ring_txn_result *out, bool *again, ring_error *err) {
  ring_txn_result r1;
  int rc = ring_etcd_txn(c, guard, 1 + n_cmps, success, n_success, probes, 1 + n_cmps, &r1, err);
  if (rc != RING_OK)
    return rc;
  if (r1.succeeded)
    return deliver(&r1, out, RING_OK);
  bool leads = still_leader(&r1, l), complete = r1.n_ranges == 1 + n_cmps;
  if (!leads || !complete) {
    ring_txn_result_clear(&r1);
    return !leads ? ring__err(err, RING_ENOTLEADER, "%s: leadership lost; nothing written", l->key)
                  : ring__err(err, RING_EPROTO, "fenced txn: %u ranges in the reply", r1.n_ranges);
  }
  if (n_failure == 0) {
    ring_txn_result none = {.succeeded = false, .revision = r1.revision};
    ring_txn_result_clear(&r1);
    return deliver(&none, out,
                   ring__err(err, RING_ECONFLICT, "fenced txn: a compare did not hold"));
  }
  rc = fenced_failure(c, l, guard, cmps, n_cmps, &r1, probes, failure, n_failure, out, again, err);
  ring_txn_result_clear(&r1);
  return rc;
}

int ring_etcd_fenced_txn(ring_etcd *c, const ring_leadership *l, const ring_cmp *cmps,
                         uint32_t n_cmps, const ring_op *success, uint32_t n_success,
                         const ring_op *failure, uint32_t n_failure, ring_txn_result *out,
                         ring_error *err) {
  if (c == NULL || l == NULL || l->key == NULL || (cmps == NULL && n_cmps) ||
      (success == NULL && n_success) || (failure == NULL && n_failure))
    return ring__err(err, RING_EINVAL, "ring_etcd_fenced_txn: NULL argument");
  size_t klen = strlen(l->key);
  ring_cmp *guard = malloc((1 + (size_t)n_cmps) * sizeof *guard);
  ring_op *probes = malloc((1 + (size_t)n_cmps) * sizeof *probes);
  if (guard == NULL || probes == NULL) {
    free(guard);
    free(probes);
    return ring__err(err, RING_ENOMEM, "fenced txn");
  }
  guard[0] = (ring_cmp){l->key, klen, RING_CMP_CREATE, RING_CMP_EQ, l->create_revision, NULL, 0};
  probes[0] = (ring_op){RING_OP_RANGE, l->key, klen, NULL, 0, 0, false};
  for (uint32_t i = 0; i < n_cmps; i++)
    probes[1 + i] = (ring_op){RING_OP_RANGE, cmps[i].key, cmps[i].key_len, NULL, 0, 0, false};
  int rc = RING_EBUSY;
  bool again = true;
  for (int i = 0; i < FENCE_TRIES && again; i++) {
    again = false;
    if (n_cmps) /* txn 2 overwrote them */
      memcpy(guard + 1, cmps, n_cmps * sizeof *cmps);
    rc = fenced_round(c, l, guard, cmps, n_cmps, probes, success, n_success, failure, n_failure,
                      out, &again, err);
  }
  if (again)
    rc = ring__err(err, RING_EBUSY, "fenced txn: the compared keys kept changing; nothing written");
  free(guard);
  free(probes);
  return rc;
}
