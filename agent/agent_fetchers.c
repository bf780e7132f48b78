/*
 * agent_fetchers.c: the fetch workers and the job list.
 *
 * Sections: the job list; one fetch; the workers; starting and stopping.
 *
 * A fixed pool of AGENT_WORKERS_MAX threads waits on jobs_cv; at most
 * a->parallel of them fetch at once (throttle.moves_per_node, read live).
 * A worker takes the first queued job, fetches it from its sources in
 * order (a source that does not answer gives way to the next), and marks
 * it done or failed; the loop requeues failed jobs after a backoff with
 * sources read afresh. All transfers share one byte-rate limiter. A job's
 * `stop` abandons its fetch (a cancelled pending entry, SIGTERM); the
 * temporary directory stays, so the next attempt or the next start
 * resumes it.
 */
#define _GNU_SOURCE
#include "agent.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ the job list */

agent_job *agent_job_find(agent *a, uint32_t token) {
  for (uint32_t i = 0; i < a->n_jobs; i++)
    if (a->jobs[i]->token == token)
      return a->jobs[i];
  return NULL;
}

agent_job *agent_job_add(agent *a, uint32_t token, uint64_t version) {
  if (a->n_jobs == a->cap_jobs) {
    uint32_t cap = a->cap_jobs ? a->cap_jobs * 2 : 16;
    agent_job **jobs = realloc(a->jobs, cap * sizeof *jobs);
    if (jobs == NULL)
      return NULL;
    a->jobs = jobs;
    a->cap_jobs = cap;
  }
  agent_job *j = calloc(1, sizeof *j);
  if (j == NULL)
    return NULL;
  j->token = token;
  j->version = version;
  j->state = AGENT_JOB_QUEUED;
  a->jobs[a->n_jobs++] = j;
  return j;
}

void agent_jobs_reap(agent *a) {
  uint32_t k = 0, queued = 0;
  for (uint32_t i = 0; i < a->n_jobs; i++) {
    agent_job *j = a->jobs[i];
    if (j->cancelled && j->state != AGENT_JOB_RUNNING) {
      free(j);
      continue;
    }
    queued += j->state == AGENT_JOB_QUEUED || j->state == AGENT_JOB_RETRY;
    a->jobs[k++] = j;
  }
  a->n_jobs = k;
  atomic_store(&a->m.queued, queued);
}

/* Bytes of the installed arc's regular files (0 when it is not there). */
uint64_t agent_arc_bytes(agent *a, uint32_t token) {
  char path[4096];
  snprintf(path, sizeof path, "%s/arcs/%" PRIu32, arc_store_dir(a->store), token);
  DIR *d = opendir(path);
  uint64_t bytes = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    struct stat st;
    if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))
      bytes += (uint64_t)st.st_size;
  }
  if (d)
    closedir(d);
  return bytes;
}

/* --------------------------------------------------------------- one fetch */

/* What a worker copies out of a job before fetching without the lock. */
typedef struct fetch_work {
  uint32_t token;
  uint64_t version;
  char sources[RING_REPLICAS_MAX][RING_ADDR_MAX + 1];
  char ids[RING_REPLICAS_MAX][RING_ID_MAX + 1];
  uint32_t n;
  bool refill; /* an owned arc we lack: what is installed is never touched */
} fetch_work;

/* A failure that another source may not have: try the next one. Local
 * trouble (disk full, local I/O) would follow us there. */
static bool try_next_source(int rc) { return rc != RING_ENOSPC && rc != RING_EIO; }

/* One arc_fetch from one source, counted. An arc already installed that no
 * fetch of ours verified (a copy from an earlier life of this host) is
 * taken out of service and the fetch made again, checking its files
 * against the source's: it is never reported as it is, and only what
 * differs is sent. */
static int fetch_one(agent *a, const char *source, const fetch_work *w, const arc_fetch_opts *fo,
                     arc_fetch_result *out, ring_error *err) {
  for (int attempt = 0;; attempt++) {
    arc_fetch_result res = {0};
    int rc = arc_fetch(a->store, source, w->token, w->version, fo, &res, err);
    *out = res;
    atomic_fetch_add(&a->m.bytes_in, res.bytes);
    atomic_fetch_add(&a->m.checksum_failures, res.checksum_failures);
    atomic_fetch_add(&a->m.resumed_files, res.resumed_files);
    atomic_fetch_add(&a->m.stale_files, res.stale_files);
    atomic_fetch_add(&a->m.reused_bytes, res.reused_bytes);
    atomic_fetch_add(&a->m.empty_arcs, res.empty);
    if (rc != RING_EEXIST || attempt > 0 || w->refill) /* a refill leaves an arc that came */
      return rc;
    if ((rc = arc_store_recheck(a->store, w->token, w->version)) != 0)
      return snprintf(err->message, sizeof err->message, "rechecking an unverified copy: %s",
                      ring_strerror(rc)),
             rc;
    atomic_fetch_add(&a->m.stale_removed, 1);
  }
}

/* Whether the operator accepted the loss of w's token in the version the
 * job is for (ringctl accept-loss wrote the `loss` key). */
static bool loss_accepted(agent *a, const fetch_work *w) {
  pthread_mutex_lock(&a->jobs_mu);
  bool ok = w->token < a->tokens && a->loss_version != 0 && a->loss_version == a->seen_version &&
            agent_bit(a->loss_ok, w->token);
  pthread_mutex_unlock(&a->jobs_mu);
  return ok;
}

/* Every source failed and the operator wrote the token off: the arc is
 * installed empty, on that word alone (never on a source's silence). */
static int install_lost(agent *a, const fetch_work *w, ring_error *err) {
  int rc = arc_store_install_empty(a->store, w->token, w->version, err);
  if (rc == RING_EEXIST && !w->refill && arc_store_remove(a->store, w->token) == 0)
    rc = arc_store_install_empty(a->store, w->token, w->version, err); /* an unverified copy */
  if (rc != RING_OK)
    return rc;
  char token[16];
  snprintf(token, sizeof token, "%" PRIu32, w->token);
  rd_log(RD_WARN, "arc installed empty: the operator accepted its loss", "token", token, NULL);
  atomic_fetch_add(&a->m.empty_arcs, 1);
  atomic_fetch_add(&a->m.losses_accepted, 1);
  return RING_OK;
}

/* Counts and logs what a source's answer says about the table's truth: an
 * owner that does not hold its arc, or an answer no cluster node signed. */
static void note_answer(agent *a, const fetch_work *w, uint32_t i, const arc_fetch_result *res,
                        const ring_error *err) {
  char token[16];
  snprintf(token, sizeof token, "%" PRIu32, w->token);
  if (res->not_held) {
    atomic_fetch_add(&a->m.not_held, 1);
    rd_log(RD_ERROR, "a source the table names does not hold the arc: not taken as empty", "token",
           token, "node", w->ids[i], "addr", w->sources[i], NULL);
  }
  if (res->bad_signature) {
    atomic_fetch_add(&a->m.bad_signatures, 1);
    rd_log(RD_ERROR, "answer refused: not signed by the node the table names", "token", token,
           "node", w->ids[i], "addr", w->sources[i], "err", err->message, NULL);
  }
}

/* Fetches w from its sources in order (live ones first: job_sources), each
 * answer judged on its own: nothing but a signed manifest installs the
 * arc. Returns RING_OK (installed) or the last source's error, with err
 * filled; *from the index of the source. */
static int fetch_from_sources(agent *a, arc_fetcher *fx, const fetch_work *w,
                              const atomic_bool *stop, uint32_t *from, bool *all_busy,
                              ring_error *err) {
  arc_fetch_opts fo = {.keys = a->keys,
                       .self_id = a->o.id,
                       .fetcher = fx,
                       .ca_file = a->o.ca_file,
                       .limiter = a->limiter,
                       .stop = stop};
  int rc = RING_EUNAVAIL;
  bool any_busy = false; /* a busy source may hold the arc: never written off while one is */
  *all_busy = w->n > 0;
  snprintf(err->message, sizeof err->message, "no source: no other owner of the token");
  for (uint32_t i = 0; i < w->n && !atomic_load(stop); i++) {
    char source[RING_ADDR_MAX + 16];
    snprintf(source, sizeof source, "%s%s", agent_tls(a) ? "https://" : "", w->sources[i]);
    *from = i;
    fo.source_id = w->ids[i];
    arc_fetch_result res = {0};
    rc = fetch_one(a, source, w, &fo, &res, err);
    note_answer(a, w, i, &res, err);
    *all_busy = *all_busy && rc != RING_OK && res.busy;
    any_busy = any_busy || res.busy;
    if (rc == RING_OK || atomic_load(stop) || !try_next_source(rc) ||
        (rc == RING_EEXIST && w->refill))
      break;
    if (i + 1 < w->n) {
      char token[16];
      snprintf(token, sizeof token, "%" PRIu32, w->token);
      rd_log(RD_WARN, "source failed: trying the next replica", "token", token, "source", w->ids[i],
             "next", w->ids[i + 1], "err", err->message, NULL);
      atomic_fetch_add(&a->m.source_switches, 1);
    }
  }
  if (rc != RING_OK && !(w->refill && rc == RING_EEXIST) && try_next_source(rc) && !any_busy &&
      !atomic_load(stop) && loss_accepted(a, w))
    rc = install_lost(a, w, err);
  return rc;
}

/* How long a job waits when every source was busy: short, jittered, and
 * not a failure (the sources are pacing, not failing). */
#define BUSY_WAIT_MS 200

/* Records the outcome of a fetch of job j. Caller holds jobs_mu. */
static void finish(agent *a, agent_job *j, const fetch_work *w, int rc, uint64_t bytes,
                   uint32_t from, bool busy, const ring_error *err) {
  char token[16], version[24];
  snprintf(token, sizeof token, "%" PRIu32, w->token);
  snprintf(version, sizeof version, "%" PRIu64, w->version);
  if (rc == RING_EEXIST && w->refill) { /* the arc came meanwhile: it stays as it is */
    j->state = AGENT_JOB_DONE;
    rd_log(RD_INFO, "missing arc present again: left as it is", "token", token, NULL);
    return;
  }
  if (rc == RING_OK) {
    j->state = AGENT_JOB_DONE;
    j->bytes = bytes;
    j->failures = 0;
    j->last_error[0] = '\0';
    if (w->token < a->tokens)
      agent_bit_set(a->verified, w->token, true);
    atomic_fetch_add(&a->m.fetched, 1);
    atomic_fetch_add(&a->m.held, 1);
    atomic_fetch_add(&a->m.refilled, w->refill);
    rd_log(RD_INFO, w->refill ? "missing arc refilled" : "arc installed", "token", token, "source",
           w->n ? w->ids[from] : "", "version", version, NULL);
    return;
  }
  j->state = AGENT_JOB_RETRY;
  if (atomic_load(&j->stop)) { /* abandoned: not a failure of the source */
    j->retry_at_ms = rd_now_ms();
    return;
  }
  if (busy) { /* every source at its limit: come back soon, counted, not failing */
    j->retry_at_ms = rd_now_ms() + BUSY_WAIT_MS + (uint64_t)(rd_now_ms() % BUSY_WAIT_MS);
    atomic_fetch_add(&a->m.busy_waits, 1);
    return;
  }
  j->failures++;
  snprintf(j->last_error, sizeof j->last_error, "%.*s", AGENT_ERROR_MAX, err->message);
  j->retry_at_ms = rd_now_ms() + agent_retry_delay(j->failures);
  atomic_fetch_add(&a->m.fetch_failures, 1);
  rd_log(RD_WARN, "fetch failed: retrying later", "token", token, "version", version, "err",
         err->message, NULL);
}

/* ----------------------------------------------------------------- workers */

/* The first queued job when a fetch may start, else NULL. Caller holds jobs_mu. */
static agent_job *next_job(agent *a) {
  if (a->running >= a->parallel || a->barrier_version != 0 || agent_restored(a))
    return NULL; /* a restored etcd: no fetch starts (agent_restore.c) */
  for (uint32_t i = 0; i < a->n_jobs; i++)
    if (a->jobs[i]->state == AGENT_JOB_QUEUED && !a->jobs[i]->cancelled)
      return a->jobs[i];
  return NULL;
}

static void *worker(void *ud) {
  agent *a = ud;
  arc_fetcher *fx = NULL; /* kept while there is work: its connection and buffers */
  pthread_mutex_lock(&a->jobs_mu);
  while (!a->workers_stop) {
    agent_job *j = next_job(a);
    if (j == NULL && fx != NULL) { /* idle: give back ~2 MiB and the connection */
      pthread_mutex_unlock(&a->jobs_mu);
      arc_fetcher_free(fx);
      fx = NULL;
      pthread_mutex_lock(&a->jobs_mu);
      continue;
    }
    if (j == NULL) {
      pthread_cond_wait(&a->jobs_cv, &a->jobs_mu);
      continue;
    }
    if (fx == NULL)
      fx = arc_fetcher_new(); /* NULL (no memory): arc_fetch makes one per arc */
    fetch_work w = {
        .token = j->token, .version = j->version, .n = j->n_sources, .refill = j->refill};
    memcpy(w.sources, j->sources, sizeof w.sources);
    memcpy(w.ids, j->source_ids, sizeof w.ids);
    j->state = AGENT_JOB_RUNNING;
    a->running++;
    atomic_store(&a->m.in_flight, a->running);
    pthread_mutex_unlock(&a->jobs_mu);

    ring_error err = {0};
    uint32_t from = 0;
    bool busy = false;
    int rc = fetch_from_sources(a, fx, &w, &j->stop, &from, &busy, &err);
    uint64_t bytes = rc == RING_OK ? agent_arc_bytes(a, w.token) : 0;

    pthread_mutex_lock(&a->jobs_mu);
    a->running--;
    atomic_store(&a->m.in_flight, a->running);
    finish(a, j, &w, rc, bytes, from, busy, &err);
    /* The slot this fetch frees is this worker's own next job (it loops
     * with the lock held), on the connection it has. No other worker is
     * woken: waking the idle pool on every arc cost each fetch a crowd of
     * threads contending for jobs_mu on a small host. */
    rd_waker_wake(&a->waker); /* report, requeue, reap */
  }
  pthread_mutex_unlock(&a->jobs_mu);
  arc_fetcher_free(fx);
  return NULL;
}

/* ------------------------------------------------- starting and stopping */

int agent_fetchers_start(agent *a) {
  a->parallel = AGENT_WORKERS_DEFAULT;
  atomic_store(&a->m.parallel, a->parallel);
  for (uint32_t i = 0; i < AGENT_WORKERS_MAX; i++) {
    if (pthread_create(&a->workers[i], NULL, worker, a) != 0) {
      agent_fetchers_stop(a);
      return -1;
    }
    a->n_workers++;
  }
  return 0;
}

void agent_fetchers_limit(agent *a, uint32_t parallel) {
  if (parallel == 0)
    parallel = AGENT_WORKERS_DEFAULT;
  if (parallel > AGENT_WORKERS_MAX)
    parallel = AGENT_WORKERS_MAX;
  pthread_mutex_lock(&a->jobs_mu);
  a->parallel = parallel; /* running fetches above a lower limit finish; no new one starts */
  pthread_cond_broadcast(&a->jobs_cv);
  pthread_mutex_unlock(&a->jobs_mu);
  atomic_store(&a->m.parallel, parallel);
}

void agent_fetchers_stop(agent *a) {
  pthread_mutex_lock(&a->jobs_mu);
  a->workers_stop = true;
  for (uint32_t i = 0; i < a->n_jobs; i++)
    atomic_store(&a->jobs[i]->stop, true);
  pthread_cond_broadcast(&a->jobs_cv);
  pthread_mutex_unlock(&a->jobs_mu);
  for (uint32_t i = 0; i < a->n_workers; i++)
    pthread_join(a->workers[i], NULL);
  a->n_workers = 0;
  for (uint32_t i = 0; i < a->n_jobs; i++)
    free(a->jobs[i]);
  a->n_jobs = 0;
}
