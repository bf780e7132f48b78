/*
 * fleet_hosts.c: one slice of the fleet's hosts (fleet.h). Sections:
 * shared helpers; registration; the watcher's callback (acks); the
 * progress writer; start and stop.
 *
 * What a host does, as proto/etcd.md asks of an agent:
 *   - alive/<id> under its own lease, created only where absent;
 *   - acks/<id> = each version it swaps in;
 *   - progress/<id> with the tokens of the pending entries naming it, once
 *     its (simulated) transfer is over.
 * What one slice shares: one ring_watcher (no ack id) follows the version
 * for all its hosts, so etcd sees one watch stream and one read of each
 * delta per slice, not per host; the acks of a version go out in txns of
 * FLEET_TXN_OPS puts; progress values likewise, from a thread of their own
 * so a transfer time never holds up the next version's acks.
 * Unlike a real agent, a host does not wait for the version barrier before
 * it "copies": the coordinator checks both the barrier and the progress
 * before a cutover, so this changes when progress lands, never the result.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fake_agent.h"
#include "fleet.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------- shared helpers */

uint64_t fleet_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void fleet_cond_init(pthread_cond_t *cond) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(cond, &ca);
  pthread_condattr_destroy(&ca);
}

int fleet_key(char *key, size_t cap, const char *cluster, const char *dir, const char *name) {
  int n = snprintf(key, cap, "/ringkeeper/%s/%s%s", cluster, dir, name);
  return n < 0 || (size_t)n >= cap ? -1 : n;
}

void fleet_seq_note(fleet_seq *s, uint64_t v) {
  if (s->installed++ == 0) {
    s->first = s->last = v;
    return;
  }
  if (v <= s->last) {
    s->backs++;
    return;
  }
  if (v > s->last + 1) {
    if (s->n_gaps < FLEET_GAPS) {
      s->gap_lo[s->n_gaps] = s->last + 1;
      s->gap_hi[s->n_gaps++] = v - 1;
    } else {
      s->gaps_dropped++;
    }
  }
  s->last = v;
}

static bool transient(int rc) {
  return rc == RING_ECONNECT || rc == RING_ETIMEDOUT || rc == RING_EUNKNOWN || rc == RING_EPROTO;
}

/* One txn of puts, retried (puts are idempotent) on transient errors with
 * backoff: 5 tries over about 3 s. */
static int txn_retry(ring_etcd *c, const ring_op *ops, uint32_t n, ring_error *err) {
  int rc = RING_OK;
  long backoff_ms = 100;
  for (int attempt = 0; attempt < 5; attempt++, backoff_ms *= 2) {
    rc = ring_etcd_txn(c, NULL, 0, ops, n, NULL, 0, NULL, err);
    if (rc == RING_OK || !transient(rc))
      return rc;
    struct timespec ts = {backoff_ms / 1000, (backoff_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  return rc;
}

int fleet_put_batched(ring_etcd *c, const ring_op *ops, uint32_t n, uint64_t *txns,
                      ring_error *err) {
  for (uint32_t i = 0; i < n;) {
    uint32_t k = 0;
    size_t bytes = 0;
    while (i + k < n && k < FLEET_TXN_OPS &&
           (k == 0 || bytes + ops[i + k].key_len + ops[i + k].value_len <= FLEET_TXN_BYTES))
      bytes += ops[i + k].key_len + ops[i + k].value_len, k++;
    int rc = txn_retry(c, ops + i, k, err);
    if (rc != RING_OK)
      return rc;
    (*txns)++;
    i += k;
  }
  return RING_OK;
}

/* -------------------------------------------------------------- state */

typedef struct host {
  char id[16];
  char ack_key[FLEET_KEY_MAX];
  char progress_key[FLEET_KEY_MAX];
  uint32_t ack_key_len, progress_key_len;
  int64_t lease;
} host;

typedef struct grant {
  uint32_t host; /* index into hosts */
  uint32_t token;
} grant;

/* A version's progress for the slice, due at due_ms. */
typedef struct job {
  struct job *next;
  uint64_t due_ms, version;
  grant *g; /* sorted by (host, token), malloc()'ed */
  uint32_t n;
} job;

struct fleet_hosts {
  const fleet_opts *o;
  ring_etcd *c; /* borrowed */
  host *h;
  uint32_t n;
  ring_live *live;
  ring_watcher *w;
  fleet_seq seq;      /* the watcher's versions; watch thread until stopped */
  ring_op *ack_ops;   /* n, prebuilt: only the value changes */
  char ack_value[24]; /* the version being acked; watch thread */
  uint64_t txns, ops; /* watch thread (acks) */
  pthread_t writer;
  bool writer_running;
  pthread_mutex_t mu; /* guards the queue and stop */
  pthread_cond_t wake;
  job *head, *tail;
  bool stop;
  uint64_t progress_txns, progress_values; /* writer thread */
  _Atomic uint64_t errors;
};

/* The slice's index of node id "h<k>", or -1 when it is not the slice's. */
static int64_t host_index(const fleet_hosts *fh, const char *id) {
  char *end;
  if (id[0] != 'h')
    return -1;
  errno = 0;
  unsigned long k = strtoul(id + 1, &end, 10);
  const fleet_opts *o = fh->o;
  if (errno || *end || k < o->id_base || k >= (unsigned long)o->id_base + o->hosts ||
      (k - o->id_base) % o->procs != o->proc)
    return -1;
  return (int64_t)((k - o->id_base) / o->procs);
}

/* ------------------------------------------------------- registration */

/* alive/<id> for hosts [from, to): created only where absent, one txn per
 * FLEET_TXN_OPS hosts comparing each key's create revision with 0. */
static int register_batch(fleet_hosts *fh, uint32_t from, uint32_t to, ring_error *err) {
  ring_cmp cmps[FLEET_TXN_OPS];
  ring_op ops[FLEET_TXN_OPS];
  char keys[FLEET_TXN_OPS][FLEET_KEY_MAX], *vals[FLEET_TXN_OPS] = {0};
  uint32_t k = 0;
  int rc = RING_OK;
  for (uint32_t i = from; i < to; i++, k++) {
    host *h = &fh->h[i];
    uint32_t num = fh->o->id_base + i * fh->o->procs + fh->o->proc;
    char addr[32], zone[16];
    /* a distinct loopback address per host; nothing listens there */
    snprintf(addr, sizeof addr, "127.%u.%u.%u:7100", (num + 1) >> 16 & 255, (num + 1) >> 8 & 255,
             (num + 1) & 255);
    snprintf(zone, sizeof zone, "z%u", num % fh->o->zones);
    vals[k] = fake_alive_encode(h->id, addr, zone, NULL, 1.0);
    int klen = fleet_key(keys[k], sizeof keys[k], fh->o->cluster, "alive/", h->id);
    if (vals[k] == NULL || klen < 0) {
      rc = RING_ENOMEM;
      snprintf(err->message, sizeof err->message, "alive/%s: no memory", h->id);
      goto out;
    }
    cmps[k] = (ring_cmp){.key = keys[k],
                         .key_len = (size_t)klen,
                         .target = RING_CMP_CREATE,
                         .op = RING_CMP_EQ,
                         .number = 0};
    ops[k] = (ring_op){.type = RING_OP_PUT,
                       .key = keys[k],
                       .key_len = (size_t)klen,
                       .value = vals[k],
                       .value_len = strlen(vals[k]),
                       .lease = h->lease};
  }
  ring_txn_result r = {0};
  rc = ring_etcd_txn(fh->c, cmps, k, ops, k, NULL, 0, &r, err);
  if (rc == RING_OK && !r.succeeded) {
    rc = RING_ECONFLICT;
    snprintf(err->message, sizeof err->message,
             "an alive/ key of hosts %s..%s exists: another fleet or agent holds those ids",
             fh->h[from].id, fh->h[to - 1].id);
  }
  ring_txn_result_clear(&r);
  fh->txns++;
  fh->ops += k;
out:
  for (uint32_t i = 0; i < k + (rc == RING_ENOMEM); i++)
    free(vals[i]);
  return rc;
}

static int register_hosts(fleet_hosts *fh, fleet_leases *l, ring_error *err) {
  for (uint32_t i = 0; i < fh->n; i++) {
    int rc = fleet_leases_grant(l, &fh->h[i].lease, err);
    if (rc != RING_OK)
      return rc;
  }
  for (uint32_t i = 0; i < fh->n; i += FLEET_TXN_OPS) {
    int rc = register_batch(fh, i, i + FLEET_TXN_OPS < fh->n ? i + FLEET_TXN_OPS : fh->n, err);
    if (rc != RING_OK)
      return rc;
  }
  return RING_OK;
}

/* --------------------------------------------- the watcher's callback */

static int grant_cmp(const void *a, const void *b) {
  const grant *x = a, *y = b;
  if (x->host != y->host)
    return x->host < y->host ? -1 : 1;
  return x->token < y->token ? -1 : x->token > y->token;
}

/* The pending entries of t naming the slice's hosts, as a job; NULL when
 * there are none (or no memory: counted as an error). */
static job *pending_job(fleet_hosts *fh, const ring_table *t) {
  uint32_t n = ring_table_pending_count(t), k = 0;
  if (n == 0)
    return NULL;
  job *j = calloc(1, sizeof *j);
  grant *g = malloc((size_t)n * sizeof *g);
  if (j == NULL || g == NULL) {
    free(j);
    free(g);
    atomic_fetch_add(&fh->errors, 1);
    return NULL;
  }
  for (uint32_t i = 0; i < n; i++) {
    uint32_t token, slot;
    uint16_t node;
    if (ring_table_pending_at(t, i, &token, &slot, &node) != RING_OK)
      continue;
    int64_t hi = host_index(fh, ring_table_node_id(t, node));
    if (hi >= 0)
      g[k++] = (grant){(uint32_t)hi, token};
  }
  if (k == 0) {
    free(g);
    free(j);
    return NULL;
  }
  qsort(g, k, sizeof *g, grant_cmp);
  j->g = g;
  j->n = k;
  j->version = ring_table_version(t);
  j->due_ms = fleet_now_ms() + fh->o->transfer_ms;
  return j;
}

/* Each table: note it, ack it for every host of the slice, then queue
 * the progress of the hosts it names as receivers. Runs on the watch
 * thread (and at start on the caller's), one table at a time. */
static void on_table(void *ud, const ring_table *t) {
  fleet_hosts *fh = ud;
  uint64_t v = ring_table_version(t);
  fleet_seq_note(&fh->seq, v);
  int vlen = snprintf(fh->ack_value, sizeof fh->ack_value, "%" PRIu64, v);
  for (uint32_t i = 0; i < fh->n; i++)
    fh->ack_ops[i].value_len = (size_t)vlen;
  ring_error err;
  if (fleet_put_batched(fh->c, fh->ack_ops, fh->n, &fh->txns, &err) != RING_OK) {
    atomic_fetch_add(&fh->errors, 1);
    fprintf(stderr, "fleet_sim: acks of version %" PRIu64 ": %s\n", v, err.message);
  }
  fh->ops += fh->n;
  job *j = pending_job(fh, t);
  if (j == NULL)
    return;
  pthread_mutex_lock(&fh->mu);
  if (fh->tail)
    fh->tail->next = j;
  else
    fh->head = j;
  fh->tail = j;
  pthread_cond_signal(&fh->wake);
  pthread_mutex_unlock(&fh->mu);
}

/* ---------------------------------------------------- progress writer */

/* Writes the progress of every host a job names, batched. */
static void write_job(fleet_hosts *fh, const job *j) {
  ring_op *ops = calloc(j->n, sizeof *ops);
  uint32_t *tokens = malloc((size_t)j->n * sizeof *tokens);
  char **vals = calloc(j->n, sizeof *vals);
  uint32_t k = 0;
  if (ops == NULL || tokens == NULL || vals == NULL)
    goto fail;
  for (uint32_t i = 0; i < j->n;) {
    uint32_t h = j->g[i].host, m = 0;
    for (; i < j->n && j->g[i].host == h; i++)
      if (m == 0 || tokens[m - 1] != j->g[i].token) /* one token, two slots: listed once */
        tokens[m++] = j->g[i].token;
    if ((vals[k] = fake_progress_encode(j->version, tokens, m, (uint64_t)m * 4096u, NULL)) == NULL)
      goto fail;
    ops[k] = (ring_op){.type = RING_OP_PUT,
                       .key = fh->h[h].progress_key,
                       .key_len = fh->h[h].progress_key_len,
                       .value = vals[k],
                       .value_len = strlen(vals[k])};
    k++;
  }
  ring_error err;
  if (fleet_put_batched(fh->c, ops, k, &fh->progress_txns, &err) == RING_OK) {
    fh->progress_values += k;
  } else {
    atomic_fetch_add(&fh->errors, 1);
    fprintf(stderr, "fleet_sim: progress of version %" PRIu64 ": %s\n", j->version, err.message);
  }
  goto out;
fail:
  atomic_fetch_add(&fh->errors, 1);
  fprintf(stderr, "fleet_sim: progress of version %" PRIu64 ": no memory\n", j->version);
out:
  for (uint32_t i = 0; vals && i < k; i++)
    free(vals[i]);
  free(vals);
  free(tokens);
  free(ops);
}

static void *writer_main(void *arg) {
  fleet_hosts *fh = arg;
  pthread_mutex_lock(&fh->mu);
  while (!fh->stop) {
    if (fh->head == NULL) {
      pthread_cond_wait(&fh->wake, &fh->mu);
      continue;
    }
    uint64_t now = fleet_now_ms();
    if (fh->head->due_ms > now) { /* jobs are due in queue order: same delay for all */
      struct timespec until;
      clock_gettime(CLOCK_MONOTONIC, &until);
      uint64_t ns = (uint64_t)until.tv_nsec + (fh->head->due_ms - now) * 1000000u;
      until.tv_sec += (time_t)(ns / 1000000000u);
      until.tv_nsec = (long)(ns % 1000000000u);
      pthread_cond_timedwait(&fh->wake, &fh->mu, &until);
      continue;
    }
    job *j = fh->head;
    fh->head = j->next;
    if (fh->head == NULL)
      fh->tail = NULL;
    pthread_mutex_unlock(&fh->mu);
    write_job(fh, j);
    free(j->g);
    free(j);
    pthread_mutex_lock(&fh->mu);
  }
  pthread_mutex_unlock(&fh->mu);
  return NULL;
}

/* ------------------------------------------------------ start and stop */

static void hosts_free(fleet_hosts *fh) {
  while (fh->head) {
    job *j = fh->head;
    fh->head = j->next;
    free(j->g);
    free(j);
  }
  ring_live_free(fh->live);
  pthread_cond_destroy(&fh->wake);
  pthread_mutex_destroy(&fh->mu);
  free(fh->ack_ops);
  free(fh->h);
  free(fh);
}

static int hosts_alloc(const fleet_opts *o, ring_etcd *c, fleet_hosts **out) {
  fleet_hosts *fh = calloc(1, sizeof *fh);
  if (fh == NULL)
    return RING_ENOMEM;
  fh->o = o;
  fh->c = c;
  fh->n = o->hosts / o->procs + (o->proc < o->hosts % o->procs);
  pthread_mutex_init(&fh->mu, NULL);
  fleet_cond_init(&fh->wake);
  fh->h = calloc(fh->n ? fh->n : 1, sizeof *fh->h);
  fh->ack_ops = calloc(fh->n ? fh->n : 1, sizeof *fh->ack_ops);
  if (fh->h == NULL || fh->ack_ops == NULL || ring_live_new(&fh->live) != RING_OK) {
    hosts_free(fh);
    return RING_ENOMEM;
  }
  for (uint32_t i = 0; i < fh->n; i++) {
    host *h = &fh->h[i];
    snprintf(h->id, sizeof h->id, "h%05u", o->id_base + i * o->procs + o->proc);
    h->ack_key_len = (uint32_t)fleet_key(h->ack_key, sizeof h->ack_key, o->cluster, "acks/", h->id);
    h->progress_key_len = (uint32_t)fleet_key(h->progress_key, sizeof h->progress_key, o->cluster,
                                              "progress/", h->id);
    fh->ack_ops[i] = (ring_op){
        .type = RING_OP_PUT, .key = h->ack_key, .key_len = h->ack_key_len, .value = fh->ack_value};
  }
  *out = fh;
  return RING_OK;
}

int fleet_hosts_start(const fleet_opts *o, ring_etcd *c, fleet_leases *l, fleet_hosts **out,
                      ring_error *err) {
  fleet_hosts *fh;
  int rc = hosts_alloc(o, c, &fh);
  if (rc != RING_OK) {
    snprintf(err->message, sizeof err->message, "hosts: no memory");
    return rc;
  }
  rc = register_hosts(fh, l, err);
  if (rc != RING_OK)
    goto fail;
  int e = pthread_create(&fh->writer, NULL, writer_main, fh);
  if (e != 0) {
    snprintf(err->message, sizeof err->message, "pthread_create: %s", strerror(e));
    rc = RING_ENOMEM;
    goto fail;
  }
  fh->writer_running = true;
  ring_watcher_opts wo = {.cluster = o->cluster, .on_table = on_table, .ud = fh};
  rc = ring_watcher_start(c, &wo, fh->live, &fh->w, err);
  if (rc != RING_OK)
    goto fail;
  *out = fh;
  return RING_OK;
fail:
  fleet_hosts_stop(fh, NULL, NULL);
  return rc;
}

void fleet_hosts_stop(fleet_hosts *fh, fleet_report *r, fleet_seq *seq) {
  if (fh == NULL)
    return;
  ring_watcher_stop(fh->w);
  if (fh->writer_running) {
    pthread_mutex_lock(&fh->mu);
    fh->stop = true;
    pthread_cond_signal(&fh->wake);
    pthread_mutex_unlock(&fh->mu);
    pthread_join(fh->writer, NULL);
  }
  if (r) {
    r->hosts += fh->n;
    r->host_tables += fh->seq.installed;
    r->host_last = fh->seq.last;
    r->txns += fh->txns + fh->progress_txns;
    r->txn_ops += fh->ops + fh->progress_values;
    r->progress_values += fh->progress_values;
    r->errors += atomic_load(&fh->errors);
  }
  if (seq)
    *seq = fh->seq;
  hosts_free(fh);
}
