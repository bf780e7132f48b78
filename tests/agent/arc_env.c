/* arc_env.c: the definitions of arc_env.h (see there). */
#include "arc_env.h"

#include <sodium.h>

arc_keyring *test_keyring;

pthread_once_t test_keyring_once = PTHREAD_ONCE_INIT;

/* "elsewhere": a real node with a key of its own, which nobody here holds. */
static unsigned char elsewhere_pk[ARC_PK_LEN];
static pthread_once_t elsewhere_once = PTHREAD_ONCE_INIT;
static void elsewhere_make(void) {
  unsigned char sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_keypair(elsewhere_pk, sk);
}

/* The test keyring's own key, pinned for TEST_SRC_ID, TEST_DST_ID and
 * "another-node": both ends of a test are one process with one key. */
uint32_t test_pins(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]) {
  if (pk == NULL)
    return 0; /* a failed pin: nothing to look at again here */
  if (strcmp(node, "elsewhere") == 0) {
    pthread_once(&elsewhere_once, elsewhere_make);
    memcpy(pk[0], elsewhere_pk, ARC_PK_LEN);
    return 1;
  }
  if (strcmp(node, TEST_SRC_ID) != 0 && strcmp(node, TEST_DST_ID) != 0 &&
      strcmp(node, "another-node") != 0)
    return 0;
  arc_keyring_public(ctx, pk[0]);
  return 1;
}

void test_keyring_make(void) {
  const char *s[] = {TEST_SECRET};
  ck_assert_int_eq(arc_keyring_new(s, 1, &test_keyring, NULL), RING_OK);
  arc_keyring_set_pins(test_keyring, test_pins, test_keyring);
}

uint32_t test_pins_from_etcd(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]) {
  if (pk == NULL)
    return 0; /* a failed pin: nothing to look at again here */
  const test_etcd_pins *p = ctx;
  char key[RK_KEY_MAX];
  snprintf(key, sizeof key, "%snodes/%s", p->prefix, node);
  ring_kvs r = {0};
  rk_node n;
  size_t got = 0;
  bool ok = ring_etcd_range(p->etcd, key, strlen(key), NULL, &r, NULL) == RING_OK && r.n == 1 &&
            rk_node_decode((const char *)r.kvs[0].value, r.kvs[0].value_len, &n, NULL) == RING_OK &&
            n.key[0] != '\0' &&
            sodium_hex2bin(pk[0], ARC_PK_LEN, n.key, RK_KEY_HEX, NULL, &got, NULL) == 0 &&
            got == ARC_PK_LEN;
  ring_kvs_clear(&r);
  return ok;
}

arc_keyring *test_member_keys(const char *secret_file, const char *data_dir, test_etcd_pins *pins) {
  arc_keyring *k = NULL;
  ring_error err;
  ck_assert_msg(arc_keyring_load(secret_file, &k, &err) == RING_OK, "%s", err.message);
  char path[4200];
  snprintf(path, sizeof path, "%s/node.key", data_dir);
  ck_assert_msg(arc_keyring_node_key(k, path, &err) == RING_OK, "%s", err.message);
  arc_keyring_set_pins(k, test_pins_from_etcd, pins);
  return k;
}

const arc_keyring *test_keys(void) {
  pthread_once(&test_keyring_once, test_keyring_make);
  return test_keyring;
}

arc_fetch_opts test_fetch_opts(void) {
  return (arc_fetch_opts){
      .keys = test_keys(), .self_id = TEST_DST_ID, .source_id = TEST_SRC_ID, .timeout_ms = 5000};
}

arc_server_opts test_server_opts(void) {
  return (arc_server_opts){
      .listen = "127.0.0.1:0", .keys = test_keys(), .node_id = TEST_SRC_ID, .open_to_all = true};
}

double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

char *scratch_dir(void) {
  char *p = strdup("/tmp/arc-test-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(p));
  return p;
}

void scratch_free(char *p) {
  if (p != NULL)
    arc__rmtree(p);
  free(p);
}

uint8_t pattern(uint64_t seed, uint64_t i) {
  uint64_t x = (i >> 3) * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull + 1;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return (uint8_t)(x >> ((i & 7) * 8));
}

uint64_t write_pattern(const char *dir, const char *name, uint64_t size, uint64_t seed) {
  char path[4096 + ARC_NAME_MAX + 2];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ck_assert_int_ge(fd, 0);
  XXH3_state_t *h = XXH3_createState();
  XXH3_64bits_reset(h);
  static uint8_t buf[1 << 16];
  for (uint64_t off = 0; off < size;) {
    size_t n = size - off < sizeof buf ? (size_t)(size - off) : sizeof buf;
    for (size_t i = 0; i < n; i++)
      buf[i] = pattern(seed, off + i);
    ck_assert_int_eq(write(fd, buf, n), (ssize_t)n);
    XXH3_64bits_update(h, buf, n);
    off += n;
  }
  close(fd);
  uint64_t d = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  return d;
}

void make_arc(const char *data_dir, uint32_t token, uint32_t n, uint64_t size) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/arcs/%" PRIu32, data_dir, token);
  ck_assert_int_eq(mkdir(dir, 0755), 0);
  for (uint32_t i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "f%" PRIu32, i);
    write_pattern(dir, name, size, token * 100u + i);
  }
}

bool same_bytes(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  bool same = fa != NULL && fb != NULL;
  static char ba[1 << 16], bb[1 << 16];
  while (same) {
    size_t na = fread(ba, 1, sizeof ba, fa), nb = fread(bb, 1, sizeof bb, fb);
    same = na == nb && memcmp(ba, bb, na) == 0;
    if (na == 0)
      break;
  }
  if (fa)
    fclose(fa);
  if (fb)
    fclose(fb);
  return same;
}

bool same_arc(arc_store *a, arc_store *b, uint32_t token) {
  arc_manifest ma, mb;
  ck_assert_int_eq(arc_store_manifest(a, token, &ma, NULL), RING_OK);
  ck_assert_int_eq(arc_store_manifest(b, token, &mb, NULL), RING_OK);
  bool same = ma.n_files == mb.n_files && ma.bytes == mb.bytes;
  for (uint32_t i = 0; same && i < ma.n_files; i++) {
    char pa[4096], pb[4096];
    snprintf(pa, sizeof pa, "%s/arcs/%" PRIu32 "/%s", arc_store_dir(a), token, ma.files[i].name);
    snprintf(pb, sizeof pb, "%s/arcs/%" PRIu32 "/%s", arc_store_dir(b), token, mb.files[i].name);
    same = strcmp(ma.files[i].name, mb.files[i].name) == 0 &&
           ma.files[i].xxh3 == mb.files[i].xxh3 && same_bytes(pa, pb);
  }
  arc_manifest_free(&ma);
  arc_manifest_free(&mb);
  return same;
}

void env_start_with(arc_env *e, uint32_t timeout_s) {
  memset(e, 0, sizeof *e);
  e->src_dir = scratch_dir();
  e->dst_dir = scratch_dir();
  ring_error err;
  ck_assert_msg(arc_store_open(e->src_dir, &e->src, &err) == RING_OK, "%s", err.message);
  ck_assert_msg(arc_store_open(e->dst_dir, &e->dst, &err) == RING_OK, "%s", err.message);
  arc_server_opts o = test_server_opts();
  o.timeout_s = timeout_s;
  ck_assert_msg(arc_server_start(e->src, &o, &e->srv, &err) == RING_OK, "%s", err.message);
  snprintf(e->source, sizeof e->source, "127.0.0.1:%u", (unsigned)arc_server_port(e->srv));
}

void env_start(arc_env *e) { env_start_with(e, 0); }

void env_stop(arc_env *e) {
  arc_server_stop(e->srv);
  arc_store_close(e->src);
  arc_store_close(e->dst);
  scratch_free(e->src_dir);
  scratch_free(e->dst_dir);
}

size_t count_body(char *p, size_t size, size_t n, void *ud) {
  http_reply *r = ud;
  size_t len = size * n;
  if (r->body < sizeof r->text) {
    size_t k = len < sizeof r->text - r->body ? len : sizeof r->text - r->body;
    memcpy(r->text + r->body, p, k);
  }
  r->body += len;
  return len;
}

size_t keep_range(char *p, size_t size, size_t n, void *ud) {
  http_reply *r = ud;
  size_t len = size * n;
  if (len > 15 && strncasecmp(p, "Content-Range: ", 15) == 0)
    snprintf(r->content_range, sizeof r->content_range, "%.*s", (int)strcspn(p + 15, "\r\n"),
             p + 15);
  if (len > 12 && strncasecmp(p, ARC_SIG_HEADER ": ", 12) == 0)
    snprintf(r->sig, sizeof r->sig, "%.*s", (int)strcspn(p + 12, "\r\n"), p + 12);
  return len;
}

void percent_decode(const char *in, char *out, size_t cap) {
  size_t n = 0;
  bool keep = strstr(in, "%00") != NULL;
  for (const char *p = in; *p && n + 1 < cap; p++) {
    unsigned v;
    if (!keep && p[0] == '%' && p[1] && p[2] && sscanf(p + 1, "%2x", &v) == 1 &&
        strspn(p + 1, "0123456789abcdefABCDEF") >= 2) {
      out[n++] = (char)v;
      p += 2;
    } else {
      out[n++] = *p;
    }
  }
  out[n] = '\0';
}

void signed_line(char *line, size_t cap, const char *method, const char *path, const char *range,
                 int64_t ts_ms) {
  int n = snprintf(line, cap, "%s: ", ARC_AUTH_HEADER);
  ck_assert_int_eq(arc_auth_sign_request(test_keys(), TEST_DST_ID, TEST_SRC_ID, method, path, range,
                                         ts_ms, NULL, line + n, cap - (size_t)n),
                   RING_OK);
}

http_reply arc_http_get(const char *source, const char *path, const char *auth, const char *range,
                        const char *extra) {
  http_reply r = {0};
  char url[8192], line[1024];
  snprintf(url, sizeof url, "http://%s%s", source, path);
  CURL *c = curl_easy_init();
  struct curl_slist *h = NULL;
  if (auth && strcmp(auth, SIGNED) == 0) {
    char rv[256] = "";
    if (range)
      snprintf(rv, sizeof rv, "bytes=%s", range);
    else if (extra && strncasecmp(extra, "Range: ", 7) == 0)
      snprintf(rv, sizeof rv, "%s", extra + 7);
    char decoded[8192]; /* signed as the server reads it: percent-decoded */
    percent_decode(path, decoded, sizeof decoded);
    signed_line(line, sizeof line, "GET", decoded, rv, arc__wall_ms());
    h = curl_slist_append(h, line);
  } else if (auth) {
    snprintf(line, sizeof line, "%s: %s", ARC_AUTH_HEADER, auth);
    h = curl_slist_append(h, line);
  }
  if (extra)
    h = curl_slist_append(h, extra);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, count_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, keep_range);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
  if (range)
    curl_easy_setopt(c, CURLOPT_RANGE, range);
  curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_easy_cleanup(c);
  curl_slist_free_all(h);
  return r;
}

void *job_run(void *p) {
  job *j = p;
  j->rc = arc_fetch(j->dst, j->source, j->token, 1, &j->o, &j->res, &j->err);
  return NULL;
}

void job_start_with(job *j, arc_store *dst, const char *source, uint32_t token, uint64_t rate,
                    const atomic_bool *stop, uint32_t retries) {
  memset(j, 0, sizeof *j);
  j->dst = dst;
  j->source = source;
  j->token = token;
  ck_assert_int_eq(arc_limiter_new(rate, &j->lim), RING_OK);
  j->o = test_fetch_opts();
  j->o.limiter = j->lim;
  j->o.stop = stop;
  j->o.max_retries = retries;
  ck_assert_int_eq(pthread_create(&j->thread, NULL, job_run, j), 0);
}

void job_start(job *j, arc_store *dst, const char *source, uint32_t token, uint64_t rate,
               const atomic_bool *stop) {
  job_start_with(j, dst, source, token, rate, stop, 0);
}

void job_join(job *j) {
  pthread_join(j->thread, NULL);
  arc_limiter_free(j->lim);
}

long long partial_size_in(const char *data_dir, uint32_t token, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/tmp/%" PRIu32 ".1/%s", data_dir, token, name);
  struct stat st;
  return stat(p, &st) == 0 ? (long long)st.st_size : -1;
}

void wait_partial_in(const char *data_dir, uint32_t token, const char *name, long long at) {
  double deadline = now_s() + 10;
  while (partial_size_in(data_dir, token, name) <= at && now_s() < deadline)
    usleep(2000);
  ck_assert_msg(partial_size_in(data_dir, token, name) > at, "%s never passed %lld bytes", name,
                at);
}
