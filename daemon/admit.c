/*
 * admit.c: rd_admit, who may hold a connection to a libmicrohttpd listener
 * and how long a request's headers may take (daemon.h tells the rules).
 *
 * Sections: addresses; the allow-list; counts per address; the registry
 * and the reaper; libmicrohttpd's callbacks; life cycle; counters.
 *
 * libmicrohttpd alone cannot keep slow clients from holding a listener:
 * its idle timeout restarts with every byte, its connection limit is one
 * for everyone and its per-address limit at half of that. Here its accept
 * policy refuses a connection before libmicrohttpd sets one up, and a
 * reaper thread calls shutdown(2) on the socket of a connection whose
 * headers are overdue; libmicrohttpd then reads the end of the stream and
 * closes the connection itself.
 *
 * Locking: one mutex (rd_admit.mu) guards the registry, the counts per
 * address, the allow-list pointer and the reaper's schedule. The counters
 * are atomics, read without it. Lock order: mu, then the waker's own.
 *
 * Why shutdown(2) cannot hit a reused descriptor: a registered fd leaves
 * the registry in the CLOSED notification, under mu, and the reaper calls
 * shutdown(2) under mu on registered fds only. libmicrohttpd sends CLOSED
 * before it closes the socket: in MHD_cleanup_connections the notification
 * precedes MHD_socket_close_chk_(pos->socket_fd), and the failure path
 * after STARTED in adding a connection notifies before its close too (so
 * in its sources of the 0.9.5x series and of 2024, either side of the
 * 0.9.75 this project builds with). So while an fd is in the registry, it
 * is still that connection's socket. test_daemon_admit checks the order
 * at run time against the installed library (the fd is open in every
 * CLOSED) and churns connections against the reaper.
 *
 * The accept policy only checks; the counting happens in STARTED (checked
 * again, under the same lock), so a connection libmicrohttpd drops between
 * the two (out of memory) leaves no count behind, and two threads of a
 * pool that both passed the check cannot both take the last place: the
 * loser is shut down at once and counted as refused.
 */
#define _POSIX_C_SOURCE 200809L /* getaddrinfo */
#include <microhttpd.h>         /* before daemon.h: it declares the MHD side then */

#include "daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define REAP_TICK_MS 50 /* the reaper looks at most this often */
#define MHD_SLACK 16    /* libmicrohttpd's limit above ours, per thread */

enum { NOT_ALLOWED, OVER_TOTAL, OVER_PER_ADDR, REASONS, ADMIT = REASONS };

/* A client address: IPv6, IPv4 as ::ffff:a.b.c.d (so an IPv4-mapped IPv6
 * peer is its IPv4 address); compared with memcmp. */
typedef struct addr_key {
  uint8_t b[16];
} addr_key;

/* A connection in the registry (a slot of rd_admit.conns). */
typedef struct conn {
  int fd;            /* libmicrohttpd's socket; -1: the slot is free */
  bool cut;          /* shut down by the reaper: never again, nor a new deadline */
  uint32_t next;     /* the next free slot, while free */
  uint64_t deadline; /* rd_now_ms() by which headers are due; 0: none (being answered) */
  addr_key key;      /* the client */
} conn;

/* Open connections from one address; n == 0: an empty place. */
typedef struct addr_count {
  addr_key key;
  uint32_t n;
} addr_count;

/* A set of addresses: sorted, no repeats (rd_addrs too). */
typedef struct rd_addrs {
  uint32_t n;
  addr_key keys[];
} addr_set;

struct rd_admit {
  pthread_mutex_t mu;  /* guards the fields down to `stopping` */
  conn *conns;         /* max_total slots */
  uint32_t free_head;  /* the first free slot; max_total: none */
  uint32_t open;       /* slots in use */
  addr_count *counts;  /* open addressing, count_mask + 1 places, at most half full */
  addr_set *allowed;   /* the allow-list with the extras merged in; NULL: everyone */
  uint64_t wake_at;    /* when the reaper looks next; 0: not until woken */
  bool stopping;       /* rd_admit_free: the reaper returns */
  uint32_t count_mask; /* fixed after rd_admit_new, like everything below */
  uint32_t max_total, max_per_addr, header_ms;
  addr_set *extra; /* always allowed */
  rd_waker wake;   /* the reaper sleeps on it */
  pthread_t reaper;
  atomic_uint_fast64_t accepted, open_now, cuts, server_errors;
  atomic_uint_fast64_t refused[REASONS]; /* by NOT_ALLOWED, OVER_TOTAL, OVER_PER_ADDR */
};

/* -------------------------------------------------------------- addresses */

/* sa's address as a key; false for a family other than IPv4 and IPv6. */
static bool key_of(const struct sockaddr *sa, socklen_t len, addr_key *k) {
  memset(k, 0, sizeof *k);
  if (sa != NULL && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
    k->b[10] = k->b[11] = 0xff;
    memcpy(k->b + 12, &in->sin_addr, 4);
    return true;
  }
  if (sa != NULL && sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    memcpy(k->b, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    return true;
  }
  return false;
}

static int key_cmp(const void *a, const void *b) { return memcmp(a, b, sizeof(addr_key)); }

/* The host of an address list entry (see daemon.h) into host; false if
 * it is malformed or too long. */
static bool entry_host(const char *s, char *host, size_t cap) {
  const char *h = s, *end = s + strlen(s), *colon = strchr(s, ':');
  const char *port = NULL;
  if (s[0] == '[') {
    h = s + 1;
    end = strchr(s, ']');
    if (end == NULL || (end[1] != '\0' && end[1] != ':'))
      return false;
    port = end[1] == ':' ? end + 2 : NULL;
  } else if (colon != NULL && strchr(colon + 1, ':') == NULL) { /* one colon: HOST:PORT */
    end = colon;
    port = colon + 1;
  } /* else a name, an IPv4 address or a bare IPv6 address */
  if (port != NULL && (port[0] == '\0' || strspn(port, "0123456789") != strlen(port)))
    return false;
  size_t n = (size_t)(end - h);
  if (n == 0 || n >= cap)
    return false;
  memcpy(host, h, n);
  host[n] = '\0';
  return true;
}

/* A growing array of keys. */
typedef struct key_vec {
  addr_key *v;
  size_t n, cap;
} key_vec;

static int vec_push(key_vec *kv, const addr_key *k) {
  if (kv->n == kv->cap) {
    size_t cap = kv->cap ? kv->cap * 2 : 16;
    addr_key *v = realloc(kv->v, cap * sizeof *v);
    if (v == NULL)
      return -ENOMEM;
    kv->v = v, kv->cap = cap;
  }
  kv->v[kv->n++] = *k;
  return 0;
}

/* Appends the addresses one entry names. Returns 1 when it named some, 0
 * when skipped (malformed, unknown), -ENOMEM. Numeric addresses skip the
 * resolver. */
static int resolve_entry(const char *entry, key_vec *kv) {
  char host[256];
  if (entry == NULL || !entry_host(entry, host, sizeof host))
    return 0;
  struct sockaddr_in in = {.sin_family = AF_INET};
  struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
  addr_key k;
  bool numeric = true;
  if (inet_pton(AF_INET, host, &in.sin_addr) == 1)
    key_of((struct sockaddr *)&in, sizeof in, &k);
  else if (inet_pton(AF_INET6, host, &in6.sin6_addr) == 1)
    key_of((struct sockaddr *)&in6, sizeof in6, &k);
  else
    numeric = false;
  if (numeric)
    return vec_push(kv, &k) == 0 ? 1 : -ENOMEM;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  if (getaddrinfo(host, NULL, &hints, &res) != 0)
    return 0;
  int rc = 0;
  for (const struct addrinfo *ai = res; ai != NULL && rc >= 0; ai = ai->ai_next)
    if (key_of(ai->ai_addr, ai->ai_addrlen, &k))
      rc = vec_push(kv, &k) == 0 ? 1 : -ENOMEM;
  freeaddrinfo(res);
  return rc;
}

/* -------------------------------------------------------- the allow-list */

/* Resolves n entries into kv. Returns how many were skipped, or -ENOMEM. */
static int resolve_all(const char *const *entries, uint32_t n, key_vec *kv) {
  int skipped = 0;
  for (uint32_t i = 0; entries != NULL && i < n; i++) {
    int rc = resolve_entry(entries[i], kv);
    if (rc < 0)
      return rc;
    if (rc == 0 && skipped < INT32_MAX)
      skipped++;
  }
  return skipped;
}

/* kv's keys and more's (NULL: none) as a set; NULL when out of memory.
 * Sorts kv in place. */
static addr_set *set_of(key_vec *kv, const addr_set *more) {
  for (uint32_t i = 0; more != NULL && i < more->n; i++)
    if (vec_push(kv, &more->keys[i]) != 0)
      return NULL;
  if (kv->n > 0)
    qsort(kv->v, kv->n, sizeof *kv->v, key_cmp);
  size_t u = 0;
  for (size_t i = 0; i < kv->n; i++)
    if (u == 0 || key_cmp(&kv->v[u - 1], &kv->v[i]) != 0)
      kv->v[u++] = kv->v[i];
  addr_set *s = u <= UINT32_MAX ? malloc(sizeof *s + u * sizeof(addr_key)) : NULL;
  if (s == NULL)
    return NULL;
  s->n = (uint32_t)u;
  if (u > 0)
    memcpy(s->keys, kv->v, u * sizeof(addr_key));
  return s;
}

/* The set of n entries' addresses and more's into *out (free()). Returns
 * how many entries were skipped, or -ENOMEM with *out untouched. */
static int build_set(const char *const *entries, uint32_t n, const addr_set *more, addr_set **out) {
  key_vec kv = {0};
  int skipped = resolve_all(entries, n, &kv);
  addr_set *s = skipped >= 0 ? set_of(&kv, more) : NULL;
  free(kv.v);
  if (s == NULL)
    return -ENOMEM;
  *out = s;
  return skipped;
}

static bool set_has(const addr_set *s, const addr_key *k) {
  return bsearch(k, s->keys, s->n, sizeof *k, key_cmp) != NULL;
}

/* Resolves the comma-separated entries of list (modified in place) into
 * kv. Returns 0, or -1 with the reason in msg. */
static int resolve_list(char *list, key_vec *kv, char *msg, size_t cap) {
  uint32_t n = 0;
  for (char *p = list, *next; p != NULL; p = next) {
    next = strchr(p, ',');
    if (next != NULL)
      *next++ = '\0';
    if (++n > RD_ADDRS_MAX)
      return snprintf(msg, cap, "more than %d addresses", RD_ADDRS_MAX), -1;
    int got = resolve_entry(p, kv);
    if (got < 0)
      return snprintf(msg, cap, "out of memory"), -1;
    if (got == 0)
      return snprintf(msg, cap, "\"%s\" is not an address or a name that resolves", p), -1;
  }
  return 0;
}

int rd_addrs_parse(const char *list, rd_addrs **out, char *msg, size_t cap) {
  *out = NULL;
  if (list != NULL && strcmp(list, "any") == 0)
    return 0;
  char *copy = list != NULL ? strdup(list) : NULL;
  if (copy == NULL)
    return snprintf(msg, cap, "%s", list != NULL ? "out of memory" : "no address list"), -1;
  key_vec kv = {0};
  int rc = resolve_list(copy, &kv, msg, cap);
  addr_set *s = rc == 0 ? set_of(&kv, NULL) : NULL;
  if (rc == 0 && s == NULL) {
    snprintf(msg, cap, "out of memory");
    rc = -1;
  }
  free(kv.v);
  free(copy);
  *out = s;
  return rc;
}

bool rd_addrs_has(const rd_addrs *s, const struct sockaddr *sa) {
  addr_key k;
  socklen_t len = sa != NULL && sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                          : sizeof(struct sockaddr_in);
  return s != NULL && key_of(sa, len, &k) && set_has(s, &k);
}

void rd_addrs_free(rd_addrs *s) { free(s); }

int rd_admit_set_allowed(rd_admit *adm, const char *const *addrs, uint32_t n) {
  if (adm == NULL)
    return -EINVAL;
  addr_set *s = NULL; /* NULL addrs: unset */
  int skipped = addrs != NULL ? build_set(addrs, n, adm->extra, &s) : 0;
  if (skipped < 0)
    return skipped;
  pthread_mutex_lock(&adm->mu);
  addr_set *old = adm->allowed;
  adm->allowed = s;
  pthread_mutex_unlock(&adm->mu);
  free(old);
  return skipped;
}

/* ------------------------------------------------------ counts per address */

static uint32_t key_hash(const addr_key *k) {
  uint64_t lo, hi;
  memcpy(&lo, k->b, 8);
  memcpy(&hi, k->b + 8, 8);
  uint64_t h = (lo ^ (hi * 0x9e3779b97f4a7c15u)) * 0xbf58476d1ce4e5b9u;
  return (uint32_t)(h ^ (h >> 31));
}

/* Where k's count is, or the empty place it would take (linear probing;
 * the table is at most half full, so the probe ends). Under mu. */
static uint32_t count_place(const rd_admit *a, const addr_key *k) {
  uint32_t i = key_hash(k) & a->count_mask;
  while (a->counts[i].n != 0 && key_cmp(&a->counts[i].key, k) != 0)
    i = (i + 1) & a->count_mask;
  return i;
}

static void count_add(rd_admit *a, const addr_key *k) {
  addr_count *c = &a->counts[count_place(a, k)];
  c->key = *k;
  c->n++;
}

/* One fewer from k. An address at zero leaves the table and the rest of
 * its probe run moves back over the hole (deletion without tombstones). */
static void count_remove(rd_admit *a, const addr_key *k) {
  uint32_t m = a->count_mask, i = count_place(a, k);
  if (a->counts[i].n == 0 || --a->counts[i].n > 0)
    return;
  for (uint32_t j = (i + 1) & m; a->counts[j].n != 0; j = (j + 1) & m) {
    uint32_t home = key_hash(&a->counts[j].key) & m;
    if (((j - home) & m) >= ((j - i) & m)) { /* the hole is on j's probe path */
      a->counts[i] = a->counts[j];
      a->counts[j].n = 0;
      i = j;
    }
  }
}

/* ADMIT when a connection from k may open now, else the reason not.
 * Under mu. */
static int verdict(const rd_admit *a, const addr_key *k) {
  if (a->allowed != NULL && !set_has(a->allowed, k))
    return NOT_ALLOWED;
  if (a->open >= a->max_total)
    return OVER_TOTAL;
  if (a->counts[count_place(a, k)].n >= a->max_per_addr)
    return OVER_PER_ADDR;
  return ADMIT;
}

/* ------------------------------------------------ the registry, the reaper */

/* Gives c a header deadline header_ms from now, unless the reaper cut it,
 * and wakes the reaper if it sleeps with no deadline to wait for. Every
 * deadline is now + header_ms, so a new one is never earlier than those
 * the reaper already waits for. Under mu. */
static void arm(rd_admit *a, conn *c) {
  if (c->cut)
    return;
  c->deadline = rd_now_ms() + a->header_ms;
  if (a->wake_at == 0) {
    a->wake_at = c->deadline;
    rd_waker_wake(&a->wake);
  }
}

/* Registers a connection from k on fd: its slot, or NULL with *why set
 * when the verdict is no. Under mu. */
static conn *enter(rd_admit *a, int fd, const addr_key *k, int *why) {
  if ((*why = verdict(a, k)) != ADMIT)
    return NULL;
  conn *c = &a->conns[a->free_head];
  a->free_head = c->next;
  *c = (conn){.fd = fd, .key = *k};
  a->open++;
  count_add(a, k);
  arm(a, c);
  atomic_fetch_add(&a->accepted, 1);
  atomic_fetch_add(&a->open_now, 1);
  return c;
}

/* Forgets c; from here on its fd may be closed and reused. Under mu. */
static void leave(rd_admit *a, conn *c) {
  count_remove(a, &c->key);
  c->fd = -1;
  c->next = a->free_head;
  a->free_head = (uint32_t)(c - a->conns);
  a->open--;
  atomic_fetch_sub(&a->open_now, 1);
}

/* Shuts down every connection whose headers are overdue. Returns the
 * earliest deadline still running, 0 if none. Under mu. */
static uint64_t sweep(rd_admit *a, uint64_t now) {
  uint64_t next = 0;
  for (uint32_t i = 0, seen = 0; i < a->max_total && seen < a->open; i++) {
    conn *c = &a->conns[i];
    if (c->fd < 0)
      continue;
    seen++;
    if (c->deadline == 0)
      continue;
    if (c->deadline <= now) { /* counted first: whoever sees the cut sees the count */
      atomic_fetch_add(&a->cuts, 1);
      shutdown(c->fd, SHUT_RDWR); /* registered, so still this connection's socket */
      c->deadline = 0, c->cut = true;
    } else if (next == 0 || c->deadline < next) {
      next = c->deadline;
    }
  }
  return next;
}

/* The reaper: sweeps when the earliest deadline comes (at most every
 * REAP_TICK_MS), and sleeps until woken while no deadline runs. */
static void *reap(void *arg) {
  rd_admit *a = arg;
  pthread_mutex_lock(&a->mu);
  while (!a->stopping) {
    uint64_t now = rd_now_ms(), next = sweep(a, now);
    if (next != 0 && next < now + REAP_TICK_MS)
      next = now + REAP_TICK_MS;
    a->wake_at = next;
    pthread_mutex_unlock(&a->mu);
    rd_waker_wait(&a->wake, next != 0 ? next - now : UINT64_MAX);
    pthread_mutex_lock(&a->mu);
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

/* ------------------------------------------------ libmicrohttpd's callbacks */

rd_mhd_result rd_admit_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
  rd_admit *a = cls;
  addr_key k;
  key_of(addr, addrlen, &k);
  pthread_mutex_lock(&a->mu);
  int why = verdict(a, &k);
  pthread_mutex_unlock(&a->mu);
  if (why == ADMIT)
    return MHD_YES;
  atomic_fetch_add(&a->refused[why], 1);
  return MHD_NO;
}

/* The slot in a connection's socket_context; NULL if not registered. */
static conn *conn_of(struct MHD_Connection *mc) {
  const union MHD_ConnectionInfo *i =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return i != NULL ? i->socket_context : NULL;
}

/* Registers a new connection, checked again under the lock: the loser of
 * a race between a pool's threads is shut down now and counted as
 * refused (here, in libmicrohttpd's own callback, the fd is its socket). */
static void started(rd_admit *a, struct MHD_Connection *mc, void **ctx) {
  const union MHD_ConnectionInfo *fd =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  const union MHD_ConnectionInfo *peer =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (fd == NULL)
    return; /* cannot be watched: libmicrohttpd's idle timeout still holds */
  addr_key k;
  key_of(peer != NULL ? peer->client_addr : NULL, sizeof(struct sockaddr_in6), &k);
  int why;
  pthread_mutex_lock(&a->mu);
  *ctx = enter(a, fd->connect_fd, &k, &why);
  pthread_mutex_unlock(&a->mu);
  if (why != ADMIT) {
    atomic_fetch_add(&a->refused[why], 1);
    shutdown(fd->connect_fd, SHUT_RDWR);
  }
}

void rd_admit_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                            enum MHD_ConnectionNotificationCode code) {
  rd_admit *a = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    started(a, c, socket_context);
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context != NULL) {
    pthread_mutex_lock(&a->mu); /* the socket is still open: see the top */
    leave(a, *socket_context);
    pthread_mutex_unlock(&a->mu);
    *socket_context = NULL;
  }
}

void rd_admit_on_completed(void *cls, struct MHD_Connection *c, void **req,
                           enum MHD_RequestTerminationCode toe) {
  (void)req, (void)toe; /* on an error the connection closes: the deadline does no harm */
  rd_admit *a = cls;
  conn *k = conn_of(c);
  if (k == NULL)
    return;
  pthread_mutex_lock(&a->mu);
  arm(a, k);
  pthread_mutex_unlock(&a->mu);
}

void rd_admit_headers_done(rd_admit *adm, struct MHD_Connection *c) {
  conn *k = adm != NULL ? conn_of(c) : NULL;
  if (k == NULL)
    return;
  pthread_mutex_lock(&adm->mu);
  k->deadline = 0;
  pthread_mutex_unlock(&adm->mu);
}

void rd_admit_mhd_options(rd_admit *adm, unsigned threads, struct MHD_OptionItem *items) {
  uint64_t limit = ((uint64_t)adm->max_total + MHD_SLACK) * (threads > 1 ? threads : 1);
  items[0] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
                                     (intptr_t)(limit < UINT32_MAX ? limit : UINT32_MAX), NULL};
  items[1] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT, 0, NULL};
  items[2] =
      (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)rd_admit_on_connection, adm};
  items[3] =
      (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)rd_admit_on_completed, adm};
  items[4] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
}

/* ---------------------------------------------------------------- life cycle */

/* Frees what rd_admit_new allocated (the thread and locks are gone). */
static void free_parts(rd_admit *a) {
  free(a->allowed);
  free(a->extra);
  free(a->counts);
  free(a->conns);
  free(a);
}

/* The limits of o with the defaults filled in, the registry's slots all
 * free and the count table sized. -ENOMEM when an allocation fails. */
static int setup(rd_admit *a, const rd_admit_opts *o) {
  a->max_total = o->max_total ? o->max_total : RD_ADMIT_TOTAL;
  a->max_per_addr = o->max_per_addr ? o->max_per_addr : RD_ADMIT_PER_ADDR;
  a->header_ms = o->header_ms ? o->header_ms : RD_ADMIT_HEADER_MS;
  uint32_t places = 2;
  while (places < 2 * a->max_total)
    places <<= 1;
  a->count_mask = places - 1;
  a->conns = malloc(a->max_total * sizeof *a->conns);
  a->counts = calloc(places, sizeof *a->counts);
  if (a->conns == NULL || a->counts == NULL)
    return -ENOMEM;
  for (uint32_t i = 0; i < a->max_total; i++)
    a->conns[i] = (conn){.fd = -1, .next = i + 1};
  a->free_head = 0;
  return 0;
}

int rd_admit_new(const rd_admit_opts *opts, rd_admit **out) {
  const rd_admit_opts none = {0};
  const rd_admit_opts *o = opts != NULL ? opts : &none;
  if (out == NULL || o->max_total > RD_ADMIT_TOTAL_MAX)
    return -EINVAL;
  rd_admit *a = calloc(1, sizeof *a);
  if (a == NULL)
    return -ENOMEM;
  int rc = setup(a, o), more = 0, skipped = 0;
  if (rc == 0 && (rc = skipped = build_set(o->extra, o->n_extra, NULL, &a->extra)) >= 0 &&
      o->allowed != NULL)
    rc = more = build_set(o->allowed, o->n_allowed, a->extra, &a->allowed);
  if (rc < 0)
    goto fail_alloc;
  if ((rc = pthread_mutex_init(&a->mu, NULL)) != 0)
    goto fail_errno;
  if ((rc = rd_waker_init(&a->wake)) != 0)
    goto fail_mutex;
  if ((rc = pthread_create(&a->reaper, NULL, reap, a)) != 0)
    goto fail_waker;
  *out = a;
  int64_t total = (int64_t)skipped + more;
  return total < INT32_MAX ? (int)total : INT32_MAX;
fail_waker:
  rd_waker_destroy(&a->wake);
fail_mutex:
  pthread_mutex_destroy(&a->mu);
fail_errno:
  rc = -rc;
fail_alloc:
  free_parts(a);
  return rc;
}

void rd_admit_free(rd_admit *adm) {
  if (adm == NULL)
    return;
  pthread_mutex_lock(&adm->mu);
  adm->stopping = true;
  pthread_mutex_unlock(&adm->mu);
  rd_waker_wake(&adm->wake);
  pthread_join(adm->reaper, NULL);
  rd_waker_destroy(&adm->wake);
  pthread_mutex_destroy(&adm->mu);
  free_parts(adm);
}

/* ------------------------------------------------------------------ counters */

void rd_admit_stats(const rd_admit *adm, rd_admit_counts *out) {
  if (out == NULL)
    return;
  *out = (rd_admit_counts){0};
  if (adm == NULL)
    return;
  out->accepted = atomic_load(&adm->accepted);
  out->open = atomic_load(&adm->open_now);
  out->refused_not_allowed = atomic_load(&adm->refused[NOT_ALLOWED]);
  out->refused_total = atomic_load(&adm->refused[OVER_TOTAL]);
  out->refused_per_addr = atomic_load(&adm->refused[OVER_PER_ADDR]);
  out->header_deadline_cut = atomic_load(&adm->cuts);
  out->server_errors = atomic_load(&adm->server_errors);
}

void rd_admit_note_error(rd_admit *adm) {
  if (adm != NULL)
    atomic_fetch_add(&adm->server_errors, 1);
}

/* The family prefix_suffix with one unlabelled sample. */
static void one(rd_text *t, const char *prefix, const char *suffix, const char *type,
                const char *help, uint64_t v) {
  char name[256];
  snprintf(name, sizeof name, "%s_%s", prefix, suffix);
  rd_metric(t, name, type, help, (double)v);
}

void rd_admit_metrics_text(const rd_admit *adm, const char *prefix, rd_text *t) {
  if (adm == NULL || prefix == NULL || t == NULL)
    return;
  rd_admit_counts s;
  rd_admit_stats(adm, &s);
  one(t, prefix, "connections_accepted_total", "counter", "HTTP connections admitted", s.accepted);
  one(t, prefix, "connections_open", "gauge", "HTTP connections admitted and not yet closed",
      s.open);
  char name[256];
  snprintf(name, sizeof name, "%s_connections_refused_total", prefix);
  rd_metric_head(t, name, "counter",
                 "HTTP connections refused at accept: address not allowed, the total cap "
                 "reached, the cap per client address reached");
  rd_metric_labeled(t, name, "reason", "not_allowed", (double)s.refused_not_allowed);
  rd_metric_labeled(t, name, "reason", "total", (double)s.refused_total);
  rd_metric_labeled(t, name, "reason", "per_addr", (double)s.refused_per_addr);
  one(t, prefix, "header_deadline_cuts_total", "counter",
      "HTTP connections shut down because a request's headers were not complete in time",
      s.header_deadline_cut);
  one(t, prefix, "server_errors_total", "counter",
      "complaints of the HTTP library (aborted, reset or refused connections), counted not "
      "logged",
      s.server_errors);
}
