/*
 * arc_env.h: what the arc tests share: scratch directories, files of
 * known pseudo-random bytes, a source store with its server and a
 * destination store, and plain HTTP requests made with curl.
 */
#ifndef RING_TEST_ARC_ENV_H
#define RING_TEST_ARC_ENV_H

#define _GNU_SOURCE
#include "arc_int.h"
#include "records.h"
#include "ring_etcd.h"

#include <check.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TEST_SECRET "s3cret-for-tests"
#define TEST_SRC_ID "src" /* the node id of the test source's server */
#define TEST_DST_ID "dst" /* the node id a test fetch signs as */

/* The keys of TEST_SECRET, made once for the test process (the keyring is
 * immutable: every thread may use it). Never freed: it lives as long as
 * the process, like the secret it stands for. */
extern arc_keyring *test_keyring;
extern pthread_once_t test_keyring_once;
void test_keyring_make(void);
/* arc_pins_fn: ctx's own key for TEST_SRC_ID, TEST_DST_ID and
 * "another-node"; for "elsewhere" a key nobody here holds; none else. */
uint32_t test_pins(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]);
const arc_keyring *test_keys(void);

/* The pins of a running cluster, as an agent reads them: the key in
 * <prefix>nodes/<node> (prefix "/ringkeeper/<cluster>/"). An arc_pins_fn
 * with a test_etcd_pins as ctx; reads etcd at every call (test code). */
typedef struct test_etcd_pins {
  ring_etcd *etcd;
  const char *prefix;
} test_etcd_pins;
uint32_t test_pins_from_etcd(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]);
/* What a member host holds: the cluster secret of secret_file and the node
 * key of its data dir (node.key), checking others against pins. */
arc_keyring *test_member_keys(const char *secret_file, const char *data_dir, test_etcd_pins *pins);

/* Fetch options signed as TEST_DST_ID, expecting TEST_SRC_ID's answers. */
arc_fetch_opts test_fetch_opts(void);

/* Server options of the test source, on 127.0.0.1 with a port picked. */
arc_server_opts test_server_opts(void);

double now_s(void);

/* A fresh directory under /tmp, malloc()'ed path. */
char *scratch_dir(void);

void scratch_free(char *p);

/* The byte at offset i of the file made with `seed`. */
uint8_t pattern(uint64_t seed, uint64_t i);

/* dir/name holding `size` pattern bytes of `seed`; returns its XXH3. */
uint64_t write_pattern(const char *dir, const char *name, uint64_t size, uint64_t seed);

/* Installs arc `token` in the store at data_dir: n files of `size` bytes
 * (names f0, f1, ...; seeds token*100 + i). */
void make_arc(const char *data_dir, uint32_t token, uint32_t n, uint64_t size);

/* Whether two files hold the same bytes. */
bool same_bytes(const char *a, const char *b);

/* Whether arc `token` of store b holds exactly the files of store a's. */
bool same_arc(arc_store *a, arc_store *b, uint32_t token);

/* ------------------------------------------- a source, its server, a sink */

typedef struct arc_env {
  char *src_dir, *dst_dir;
  arc_store *src, *dst;
  arc_server *srv;
  char source[64]; /* 127.0.0.1:<port> */
} arc_env;

void env_start_with(arc_env *e, uint32_t timeout_s);

void env_start(arc_env *e);

void env_stop(arc_env *e);

/* ------------------------------------------------------- plain requests */

typedef struct http_reply {
  long status;                      /* 0 when no response came */
  size_t body;                      /* bytes of body received */
  char text[4096];                  /* the body's first bytes */
  char content_range[96];           /* the Content-Range header, if any */
  char sig[ARC_AUTH_VALUE_MAX + 1]; /* the X-Ring-Sig header, if any */
} http_reply;

size_t count_body(char *p, size_t size, size_t n, void *ud);

size_t keep_range(char *p, size_t size, size_t n, void *ud);

/* A path percent-decoded as the server decodes it (a path holding %00
 * stays as it is). */
void percent_decode(const char *in, char *out, size_t cap);

#define SIGNED "(signed)" /* arc_http_get's auth: sign the request as TEST_DST_ID would */

/* The X-Ring-Auth header line of a GET of path from TEST_DST_ID to
 * TEST_SRC_ID, with the Range value range ("" or NULL: none), at ts_ms. */
void signed_line(char *line, size_t cap, const char *method, const char *path, const char *range,
                 int64_t ts_ms);

/* GET http://<source><path> as is (no dot-segment removal), with an
 * optional X-Ring-Auth value (SIGNED: a valid signature of this very
 * request, including a range given either way), Range and extra line. */
http_reply arc_http_get(const char *source, const char *path, const char *auth, const char *range,
                        const char *extra);

#define BEARER SIGNED

/* ------------------------------------------------ a fetch on its own thread */

typedef struct job {
  arc_store *dst;
  const char *source;
  uint32_t token;
  arc_fetch_opts o;
  arc_limiter *lim; /* the job's own, at the rate given */
  pthread_t thread;
  arc_fetch_result res;
  ring_error err;
  int rc;
} job;

void *job_run(void *p);

/* Starts fetching `token` (version 1) from source into dst at `rate`. */
void job_start_with(job *j, arc_store *dst, const char *source, uint32_t token, uint64_t rate,
                    const atomic_bool *stop, uint32_t retries);

void job_start(job *j, arc_store *dst, const char *source, uint32_t token, uint64_t rate,
               const atomic_bool *stop);

void job_join(job *j);

/* Size of <data_dir>/tmp/<token>.1/<name> (a job's file in the making), or -1. */
long long partial_size_in(const char *data_dir, uint32_t token, const char *name);

/* Waits (10 s at most) until that size passes `at`. */
void wait_partial_in(const char *data_dir, uint32_t token, const char *name, long long at);

#endif /* RING_TEST_ARC_ENV_H */
