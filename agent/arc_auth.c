/*
 * arc_auth.c: authenticated arc requests and answers (proto/arc.md,
 * "Authentication"), on libsodium: HMAC-SHA-256 under the cluster secret
 * (membership) and, for identity, the node's own Ed25519 key.
 *
 * Sections: the keyring; key and secret files; the header syntax; MAC
 * input; pair keys; requests; answers; the replay cache.
 *
 * Neither the cluster secret nor a node's private key leaves its host.
 * Every request carries a MAC over what it asks (method, path, range),
 * when (wall-clock ms), a fresh nonce, who asks and whom, and a MAC of the
 * same under the key the asker shares with the server (the X25519
 * agreement of their two node keys, as WireGuard's static keys): only the
 * two of them can make it, and it costs an HMAC where a signature and its
 * check cost 75 us, paid per file. The server answers what a receiver acts
 * on (a manifest, "not held", any refusal) with a MAC and an Ed25519
 * signature over its status, the token, the request's nonce, its own node
 * id and the body: a signature, so that even a thief of the receiver's
 * key cannot make answers in the server's name. The MAC says "a member";
 * the pair MAC or signature, checked with the key pinned for the node
 * named in `node=`, says "that member": one member holding the secret
 * cannot speak for another. Arc file bytes are not signed: the signed
 * manifest's checksums vouch for them.
 *
 * MAC inputs are length-prefixed fields, so no choice of field contents
 * can make two different requests sign alike.
 */
#define _GNU_SOURCE /* clock_gettime */
#include "arc_int.h"
#include "ringx.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REQ_DOMAIN "ringkeeper.arc.req.v1"
#define RESP_DOMAIN "ringkeeper.arc.resp.v1"
#define KEY_DOMAIN "ringkeeper.arc.key.v1"
#define PAIR_DOMAIN "ringkeeper.arc.pair.v1"
#define PAIR_SLOTS 256       /* peers' pair keys kept; a miss costs one X25519 (about 35 us) */
#define SECRET_LINE_MAX 1024 /* bytes of one secret line, newline included */

int64_t arc__wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------ the keyring */

/* The pair keys of the peers met lately: a request's MAC by pair key costs
 * an HMAC, not a public-key operation. Direct-mapped by the peer's key, so
 * bounded; a slot taken by another peer is computed again. */
typedef struct pair_slot {
  bool full;
  unsigned char pk[ARC_PK_LEN];   /* the peer's Ed25519 key */
  unsigned char key[ARC_MAC_LEN]; /* the key it shares with this node */
} pair_slot;

typedef struct pair_cache {
  pthread_mutex_t mu;
  pair_slot slot[PAIR_SLOTS];
} pair_cache;

struct arc_keyring {
  uint32_t n;                                   /* 1 .. ARC_KEYS_MAX */
  uint32_t kid[ARC_KEYS_MAX];                   /* names the key in headers */
  unsigned char key[ARC_KEYS_MAX][ARC_MAC_LEN]; /* HMAC keys derived from the secrets */
  unsigned char sk[crypto_sign_SECRETKEYBYTES]; /* this node's Ed25519 key */
  unsigned char pk[ARC_PK_LEN];
  unsigned char xsk[crypto_scalarmult_SCALARBYTES]; /* sk as an X25519 key: pair keys */
  pair_cache *pairs; /* its own allocation: filled by threads holding a const keyring */
  arc_pins_fn pins;  /* the keys pinned for a node; NULL: nobody is trusted */
  void *pins_ctx;
};

static bool hex_to(const char *s, size_t n, unsigned char *out, size_t len);

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;
static int sodium_rc;
static void sodium_start(void) { sodium_rc = sodium_init(); }

/* key = HMAC(secret, KEY_DOMAIN); kid = the first 4 bytes of HMAC(key, "kid"). */
static void derive(const char *secret, size_t n, unsigned char key[ARC_MAC_LEN], uint32_t *kid) {
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, (const unsigned char *)secret, n);
  crypto_auth_hmacsha256_update(&st, (const unsigned char *)KEY_DOMAIN, sizeof KEY_DOMAIN - 1);
  crypto_auth_hmacsha256_final(&st, key);
  unsigned char id[ARC_MAC_LEN];
  crypto_auth_hmacsha256(id, (const unsigned char *)"kid", 3, key);
  *kid = (uint32_t)id[0] << 24 | (uint32_t)id[1] << 16 | (uint32_t)id[2] << 8 | id[3];
  sodium_memzero(&st, sizeof st);
}

/* This node's key pair is in sk and pk: its X25519 half follows, and the
 * pair keys made with the key before are forgotten. */
static void node_key_set(arc_keyring *k) {
  if (crypto_sign_ed25519_sk_to_curve25519(k->xsk, k->sk) != 0)
    abort(); /* cannot fail for a key libsodium made */
  pthread_mutex_lock(&k->pairs->mu);
  sodium_memzero(k->pairs->slot, sizeof k->pairs->slot);
  pthread_mutex_unlock(&k->pairs->mu);
}

/* The secrets' MAC keys into k; RING_OK or RING_EINVAL. */
static int derive_all(arc_keyring *k, const char *const *secrets, uint32_t n, ring_error *err) {
  k->n = n;
  for (uint32_t i = 0; i < n; i++) {
    size_t len = secrets[i] ? strlen(secrets[i]) : 0;
    if (len == 0)
      return ring__err(err, RING_EINVAL, "arc keys: secret %" PRIu32 " is empty", i + 1);
    derive(secrets[i], len, k->key[i], &k->kid[i]);
  }
  if (n == 2 && k->kid[0] == k->kid[1])
    return ring__err(err, RING_EINVAL, "arc keys: the two secrets are the same");
  return RING_OK;
}

int arc_keyring_new(const char *const *secrets, uint32_t n, arc_keyring **out, ring_error *err) {
  if (secrets == NULL || out == NULL || n == 0 || n > ARC_KEYS_MAX)
    return ring__err(err, RING_EINVAL, "arc keys: one or two secrets");
  pthread_once(&sodium_once, sodium_start);
  if (sodium_rc < 0)
    return ring__err(err, RING_EIO, "arc keys: libsodium cannot start");
  arc_keyring *k = sodium_malloc(sizeof *k);
  pair_cache *pairs = sodium_malloc(sizeof *pairs);
  if (k == NULL || pairs == NULL) {
    sodium_free(k);
    sodium_free(pairs);
    return ring__err(err, RING_ENOMEM, "arc keys: out of memory");
  }
  pthread_mutex_init(&pairs->mu, NULL);
  k->pairs = pairs;
  k->pins = NULL;
  int rc = derive_all(k, secrets, n, err);
  if (rc != RING_OK) {
    arc_keyring_free(k);
    return rc;
  }
  crypto_sign_keypair(k->pk, k->sk); /* until arc_keyring_node_key replaces it */
  node_key_set(k);
  *out = k;
  return RING_OK;
}

/* ------------------------------------------------- key and secret files */

/* Refuses a file that a user other than its owner may read: a secret or
 * a private key another account of the host could copy. */
static int check_private(int fd, const char *path, ring_error *err) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return ring__err(err, RING_EIO, "%s: %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return ring__err(err, RING_EINVAL, "%s: not a regular file", path);
  if ((st.st_mode & 077) != 0)
    return ring__err(err, RING_EINVAL,
                     "%s: mode %04o lets group or others read it: chmod 600 it (owner only)", path,
                     (unsigned)(st.st_mode & 07777));
  return RING_OK;
}

/* Reads up to ARC_KEYS_MAX + 1 non-empty lines (the extra one to refuse
 * it). Every return leaves `line` zeroed: no secret stays on the stack. */
static int read_lines(FILE *f, const char *path, char lines[][SECRET_LINE_MAX], uint32_t *n,
                      ring_error *err) {
  char line[SECRET_LINE_MAX];
  int rc = RING_OK;
  *n = 0;
  while (rc == RING_OK && fgets(line, sizeof line, f) != NULL) {
    size_t len = strlen(line);
    if (len == sizeof line - 1 && line[len - 1] != '\n') {
      rc = ring__err(err, RING_EINVAL, "%s: a line over %d bytes", path, SECRET_LINE_MAX - 2);
      break;
    }
    line[strcspn(line, "\r\n")] = '\0';
    len = strlen(line);
    if (len == 0)
      continue;
    if (*n == ARC_KEYS_MAX)
      rc = ring__err(err, RING_EINVAL, "%s: more than %d secrets", path, ARC_KEYS_MAX);
    else if (len < ARC_SECRET_MIN)
      rc = ring__err(err, RING_EINVAL, "%s: secret %" PRIu32 " is %zu bytes, under %d", path,
                     *n + 1, len, ARC_SECRET_MIN);
    else
      memcpy(lines[(*n)++], line, len + 1);
  }
  sodium_memzero(line, sizeof line);
  if (rc == RING_OK && *n == 0)
    rc = ring__err(err, RING_EINVAL, "%s: no secret in it", path);
  return rc;
}

int arc_keyring_load(const char *path, arc_keyring **out, ring_error *err) {
  FILE *f = path ? fopen(path, "r") : NULL;
  if (f == NULL)
    return ring__err(err, RING_EIO, "%s: %s", path ? path : "(no secret file)",
                     path ? strerror(errno) : "not given");
  char lines[ARC_KEYS_MAX][SECRET_LINE_MAX];
  uint32_t n = 0;
  int rc = check_private(fileno(f), path, err);
  if (rc == RING_OK)
    rc = read_lines(f, path, lines, &n, err);
  fclose(f);
  const char *secrets[ARC_KEYS_MAX] = {lines[0], lines[1]};
  if (rc == RING_OK)
    rc = arc_keyring_new(secrets, n, out, err);
  sodium_memzero(lines, sizeof lines);
  return rc;
}

/* The key file: the 32-byte Ed25519 seed as 64 lowercase hex digits and a
 * newline, mode 0600. Made with O_EXCL and fsynced before it is used, so
 * two starts never make two keys and a crash leaves none half-written
 * (a torn file is refused, not replaced). */
#define KEY_FILE_LEN (2 * crypto_sign_SEEDBYTES + 1)

static int make_key_file(const char *path, unsigned char seed[crypto_sign_SEEDBYTES],
                         ring_error *err) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return ring__err(err, RING_EIO, "%s: cannot create: %s", path, strerror(errno));
  char text[KEY_FILE_LEN + 1];
  randombytes_buf(seed, crypto_sign_SEEDBYTES);
  sodium_bin2hex(text, sizeof text, seed, crypto_sign_SEEDBYTES);
  text[KEY_FILE_LEN - 1] = '\n';
  bool ok = write(fd, text, KEY_FILE_LEN) == KEY_FILE_LEN && fsync(fd) == 0;
  int e = errno;
  sodium_memzero(text, sizeof text);
  close(fd);
  if (!ok) {
    unlink(path);
    return ring__err(err, RING_EIO, "%s: cannot write: %s", path, strerror(e));
  }
  return RING_OK;
}

static int read_key_file(int fd, const char *path, unsigned char seed[crypto_sign_SEEDBYTES],
                         ring_error *err) {
  char text[KEY_FILE_LEN + 1];
  ssize_t got = read(fd, text, sizeof text);
  int rc = RING_OK;
  if (got != KEY_FILE_LEN || text[KEY_FILE_LEN - 1] != '\n' ||
      !hex_to(text, KEY_FILE_LEN - 1, seed, crypto_sign_SEEDBYTES))
    rc = ring__err(err, RING_EINVAL, "%s: not a node key (64 lowercase hex digits and a newline)",
                   path);
  sodium_memzero(text, sizeof text);
  return rc;
}

/* The seed of the key file at path, made when absent. */
static int load_seed(const char *path, unsigned char seed[crypto_sign_SEEDBYTES], ring_error *err) {
  if (path == NULL)
    return ring__err(err, RING_EINVAL, "node key: no key file");
  pthread_once(&sodium_once, sodium_start);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT)
    return make_key_file(path, seed, err);
  if (fd < 0)
    return ring__err(err, RING_EIO, "%s: %s", path, strerror(errno));
  int rc = check_private(fd, path, err);
  if (rc == RING_OK)
    rc = read_key_file(fd, path, seed, err);
  close(fd);
  return rc;
}

int arc_keyring_node_key(arc_keyring *k, const char *path, ring_error *err) {
  unsigned char seed[crypto_sign_SEEDBYTES];
  int rc = k != NULL ? load_seed(path, seed, err) : ring__err(err, RING_EINVAL, "no keyring");
  if (rc == RING_OK) {
    crypto_sign_seed_keypair(k->pk, k->sk, seed);
    node_key_set(k);
  }
  sodium_memzero(seed, sizeof seed);
  return rc;
}

int arc_node_key_public(const char *path, unsigned char pk[ARC_PK_LEN], ring_error *err) {
  unsigned char seed[crypto_sign_SEEDBYTES], sk[crypto_sign_SECRETKEYBYTES];
  int rc = load_seed(path, seed, err);
  if (rc == RING_OK)
    crypto_sign_seed_keypair(pk, sk, seed);
  sodium_memzero(seed, sizeof seed);
  sodium_memzero(sk, sizeof sk);
  return rc;
}

void arc_keyring_public(const arc_keyring *k, unsigned char pk[ARC_PK_LEN]) {
  memcpy(pk, k->pk, ARC_PK_LEN);
}

void arc_keyring_set_pins(arc_keyring *k, arc_pins_fn fn, void *ctx) {
  k->pins = fn;
  k->pins_ctx = ctx;
}

void arc_keyring_free(arc_keyring *k) {
  if (k == NULL)
    return;
  pthread_mutex_destroy(&k->pairs->mu);
  sodium_free(k->pairs); /* zeroes them */
  sodium_free(k);
}

uint32_t arc_keyring_count(const arc_keyring *k) { return k ? k->n : 0; }

/* The key named kid, or NULL. */
static const unsigned char *key_of(const arc_keyring *k, uint32_t kid) {
  for (uint32_t i = 0; i < k->n; i++)
    if (k->kid[i] == kid)
      return k->key[i];
  return NULL;
}

/* --------------------------------------------------------- header syntax */

static bool hex_to(const char *s, size_t n, unsigned char *out, size_t len) {
  if (n != 2 * len)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false; /* lowercase only: one spelling per value */
  size_t got = 0;
  return sodium_hex2bin(out, len, s, n, NULL, &got, NULL) == 0 && got == len;
}

static bool parse_u64_exact(const char *s, size_t n, uint64_t max, uint64_t *out) {
  if (n == 0 || n > 19 || (n > 1 && s[0] == '0'))
    return false;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    x = x * 10 + (uint64_t)(s[i] - '0');
  }
  if (x > max)
    return false;
  *out = x;
  return true;
}

static bool copy_id(const char *s, size_t n, char out[RING_ID_MAX + 1]) {
  if (n == 0 || n > RING_ID_MAX)
    return false;
  memcpy(out, s, n);
  out[n] = '\0';
  return ring_id_valid(out);
}

enum {
  F_KID = 1,
  F_NODE = 2,
  F_TO = 4,
  F_TS = 8,
  F_NONCE = 16,
  F_MAC = 32,
  F_SIG = 64,
  F_PMAC = 128
};

/* "pmac=": one MAC, or two joined by a comma (a server mid-rotation). */
static bool parse_pmac(const char *v, size_t n, arc_auth *a) {
  const size_t one = 2 * ARC_MAC_LEN;
  a->n_pmac = n == one ? 1 : n == 2 * one + 1 && v[one] == ',' ? 2 : 0;
  for (uint32_t i = 0; i < a->n_pmac; i++)
    if (!hex_to(v + i * (one + 1), one, a->pmac[i], ARC_MAC_LEN))
      return false;
  return a->n_pmac > 0;
}

/* One "name=value" field into a; false when unknown, repeated or bad. */
static bool parse_field(const char *p, size_t n, arc_auth *a, unsigned *seen) {
  const char *eq = memchr(p, '=', n);
  if (eq == NULL)
    return false;
  size_t kn = (size_t)(eq - p), vn = n - kn - 1;
  const char *v = eq + 1;
  unsigned bit = 0;
  uint64_t x = 0;
  bool ok = false;
  if (kn == 3 && memcmp(p, "kid", 3) == 0) {
    bit = F_KID;
    unsigned char b[4] = {0};
    ok = hex_to(v, vn, b, 4);
    a->kid = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
  } else if (kn == 4 && memcmp(p, "node", 4) == 0) {
    bit = F_NODE, ok = copy_id(v, vn, a->node);
  } else if (kn == 2 && memcmp(p, "to", 2) == 0) {
    bit = F_TO, ok = copy_id(v, vn, a->to);
  } else if (kn == 2 && memcmp(p, "ts", 2) == 0) {
    bit = F_TS, ok = parse_u64_exact(v, vn, (uint64_t)INT64_MAX, &x), a->ts_ms = (int64_t)x;
  } else if (kn == 5 && memcmp(p, "nonce", 5) == 0) {
    bit = F_NONCE, ok = hex_to(v, vn, a->nonce, ARC_NONCE_LEN);
  } else if (kn == 3 && memcmp(p, "mac", 3) == 0) {
    bit = F_MAC, ok = hex_to(v, vn, a->mac, ARC_MAC_LEN);
  } else if (kn == 3 && memcmp(p, "sig", 3) == 0) {
    bit = F_SIG, ok = hex_to(v, vn, a->sig, ARC_SIG_LEN);
  } else if (kn == 4 && memcmp(p, "pmac", 4) == 0) {
    bit = F_PMAC, ok = parse_pmac(v, vn, a);
  }
  if (!ok || (*seen & bit))
    return false;
  *seen |= bit;
  return true;
}

int arc_auth_parse(const char *value, size_t len, arc_auth *out) {
  if (value == NULL || out == NULL || len > ARC_AUTH_VALUE_MAX || len < 3 ||
      memcmp(value, "v1 ", 3) != 0)
    return RING_EAUTH;
  arc_auth a;
  memset(&a, 0, sizeof a);
  unsigned seen = 0;
  for (size_t i = 3; i < len;) {
    const char *sp = memchr(value + i, ' ', len - i);
    size_t n = sp ? (size_t)(sp - (value + i)) : len - i;
    if (n == 0 || !parse_field(value + i, n, &a, &seen))
      return RING_EAUTH;
    i += n + (sp != NULL);
    if (sp != NULL && i == len)
      return RING_EAUTH; /* a trailing space */
  }
  if ((seen & (F_KID | F_NODE | F_MAC)) != (F_KID | F_NODE | F_MAC))
    return RING_EAUTH;
  a.has_request_fields = (seen & (F_TO | F_TS | F_NONCE)) == (F_TO | F_TS | F_NONCE);
  if (!a.has_request_fields && (seen & (F_TO | F_TS)) != 0)
    return RING_EAUTH; /* an answer names only kid, node, nonce, mac and sig */
  unsigned proof = a.has_request_fields ? F_PMAC : F_SIG; /* and never the other */
  if ((seen & (F_SIG | F_PMAC)) != proof)
    return RING_EAUTH;
  a.has_nonce = (seen & F_NONCE) != 0;
  *out = a;
  return RING_OK;
}

/* --------------------------------------------------------------- MAC input */

/* What is signed goes both into the MAC (under the cluster key) and into
 * a BLAKE2b-256 digest, which the node's Ed25519 key signs: one pass over
 * the fields (and over a manifest body) serves both. */
typedef struct signed_in {
  crypto_auth_hmacsha256_state mac;
  crypto_generichash_state digest;
} signed_in;

static void in_init(signed_in *st, const unsigned char *key) {
  crypto_auth_hmacsha256_init(&st->mac, key, ARC_MAC_LEN);
  crypto_generichash_init(&st->digest, NULL, 0, ARC_DIGEST_LEN);
}

static void in_bytes(signed_in *st, const void *p, size_t n) {
  crypto_auth_hmacsha256_update(&st->mac, p, n);
  crypto_generichash_update(&st->digest, p, n);
}

static void in_final(signed_in *st, unsigned char mac[ARC_MAC_LEN],
                     unsigned char digest[ARC_DIGEST_LEN]) {
  crypto_auth_hmacsha256_final(&st->mac, mac);
  crypto_generichash_final(&st->digest, digest, ARC_DIGEST_LEN);
}

static void put_field(signed_in *st, const void *p, size_t n) {
  unsigned char len[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 8), (unsigned char)n};
  in_bytes(st, len, 4);
  if (n > 0)
    in_bytes(st, p, n);
}

static void put_str(signed_in *st, const char *s) { put_field(st, s ? s : "", s ? strlen(s) : 0); }

static void put_u64(signed_in *st, uint64_t x) {
  char b[24];
  int n = snprintf(b, sizeof b, "%" PRIu64, x);
  put_field(st, b, (size_t)n);
}

static void request_mac(const unsigned char *key, const arc_auth *a, const char *method,
                        const char *path, const char *range, unsigned char mac[ARC_MAC_LEN],
                        unsigned char digest[ARC_DIGEST_LEN]) {
  signed_in st;
  in_init(&st, key);
  put_str(&st, REQ_DOMAIN);
  put_u64(&st, a->kid);
  put_str(&st, method);
  put_str(&st, path);
  put_str(&st, range);
  put_u64(&st, (uint64_t)a->ts_ms);
  put_field(&st, a->nonce, ARC_NONCE_LEN);
  put_str(&st, a->node);
  put_str(&st, a->to);
  in_final(&st, mac, digest);
}

static void answer_mac(const unsigned char *key, const arc_auth *a, unsigned status, uint32_t token,
                       const void *body, size_t len, unsigned char mac[ARC_MAC_LEN],
                       unsigned char digest[ARC_DIGEST_LEN]) {
  signed_in st;
  in_init(&st, key);
  put_str(&st, RESP_DOMAIN);
  put_u64(&st, a->kid);
  put_u64(&st, status);
  put_u64(&st, token);
  put_field(&st, a->nonce, a->has_nonce ? ARC_NONCE_LEN : 0);
  put_str(&st, a->node);
  put_field(&st, body, len);
  in_final(&st, mac, digest);
}

/* RING_OK when the MAC verifies and the signature is by a key pinned for
 * a->node; RING_EAUTH for a bad MAC (not a member), RING_ENODEID for a
 * member's MAC without the named node's signature. The MAC first: a
 * stranger's header costs no public-key work. */
static int verify_both(const arc_keyring *k, const arc_auth *a, const unsigned char *mac,
                       const unsigned char *digest) {
  if (crypto_verify_32(mac, a->mac) != 0)
    return RING_EAUTH;
  unsigned char pk[ARC_PINS_MAX][ARC_PK_LEN];
  uint32_t n = k->pins ? k->pins(k->pins_ctx, a->node, pk) : 0;
  for (uint32_t i = 0; i < n && i < ARC_PINS_MAX; i++)
    if (crypto_sign_verify_detached(a->sig, digest, ARC_DIGEST_LEN, pk[i]) == 0)
      return RING_OK;
  if (n > 0)
    k->pins(k->pins_ctx, a->node, NULL); /* a key approved since may be pinned: look again */
  return RING_ENODEID;
}

static void hex(char *out, const unsigned char *p, size_t n) {
  sodium_bin2hex(out, 2 * n + 1, p, n);
}

/* The Ed25519 signature of digest by this node's key, as hex. */
static void sign_hex(const arc_keyring *k, const unsigned char digest[ARC_DIGEST_LEN],
                     char out[2 * ARC_SIG_LEN + 1]) {
  unsigned char sig[ARC_SIG_LEN];
  crypto_sign_detached(sig, NULL, digest, ARC_DIGEST_LEN, k->sk);
  hex(out, sig, ARC_SIG_LEN);
}

/* ------------------------------------------------------------- pair keys */

/* The key this node shares with the holder of `peer` (an Ed25519 public
 * key): BLAKE2b-256 of the domain, the two keys' X25519 agreement and both
 * public keys, the lower first, so both ends derive the same. Only these
 * two nodes can. false for a key that is no curve point or of small order
 * (an agreement of zeros). Cached: a request costs an HMAC. */
static bool pair_key(const arc_keyring *k, const unsigned char peer[ARC_PK_LEN],
                     unsigned char out[ARC_MAC_LEN]) {
  pair_cache *c = k->pairs;
  pair_slot *s = &c->slot[((size_t)peer[0] << 8 | peer[1]) % PAIR_SLOTS];
  pthread_mutex_lock(&c->mu);
  bool hit = s->full && memcmp(s->pk, peer, ARC_PK_LEN) == 0;
  if (hit)
    memcpy(out, s->key, ARC_MAC_LEN);
  pthread_mutex_unlock(&c->mu);
  if (hit)
    return true;
  unsigned char xpk[crypto_scalarmult_BYTES], q[crypto_scalarmult_BYTES];
  if (crypto_sign_ed25519_pk_to_curve25519(xpk, peer) != 0 ||
      crypto_scalarmult(q, k->xsk, xpk) != 0)
    return false;
  bool self_first = memcmp(k->pk, peer, ARC_PK_LEN) < 0;
  crypto_generichash_state st;
  crypto_generichash_init(&st, NULL, 0, ARC_MAC_LEN);
  crypto_generichash_update(&st, (const unsigned char *)PAIR_DOMAIN, sizeof PAIR_DOMAIN - 1);
  crypto_generichash_update(&st, q, sizeof q);
  crypto_generichash_update(&st, self_first ? k->pk : peer, ARC_PK_LEN);
  crypto_generichash_update(&st, self_first ? peer : k->pk, ARC_PK_LEN);
  crypto_generichash_final(&st, out, ARC_MAC_LEN);
  sodium_memzero(q, sizeof q);
  pthread_mutex_lock(&c->mu);
  s->full = true;
  memcpy(s->pk, peer, ARC_PK_LEN);
  memcpy(s->key, out, ARC_MAC_LEN);
  pthread_mutex_unlock(&c->mu);
  return true;
}

/* digest's MAC under the key shared with the holder of each key pinned
 * for `node` (two during its rotation: which one it holds is its affair);
 * how many were made. */
static uint32_t pair_macs(const arc_keyring *k, const char *node,
                          const unsigned char digest[ARC_DIGEST_LEN],
                          unsigned char out[ARC_PINS_MAX][ARC_MAC_LEN]) {
  unsigned char pk[ARC_PINS_MAX][ARC_PK_LEN], key[ARC_MAC_LEN];
  uint32_t n = k->pins ? k->pins(k->pins_ctx, node, pk) : 0, m = 0;
  for (uint32_t i = 0; i < n && i < ARC_PINS_MAX; i++)
    if (pair_key(k, pk[i], key))
      crypto_auth_hmacsha256(out[m++], digest, ARC_DIGEST_LEN, key);
  sodium_memzero(key, sizeof key);
  return m;
}

/* ---------------------------------------------------------------- requests */

/* The "pmac=" value: the MACs as hex, joined by a comma. */
static void pmac_hex(const unsigned char pm[ARC_PINS_MAX][ARC_MAC_LEN], uint32_t n,
                     char out[ARC_PINS_MAX * (2 * ARC_MAC_LEN + 1)]) {
  for (uint32_t i = 0; i < n; i++) {
    if (i > 0)
      out[i * (2 * ARC_MAC_LEN + 1) - 1] = ',';
    hex(out + i * (2 * ARC_MAC_LEN + 1), pm[i], ARC_MAC_LEN);
  }
}

int arc_auth_sign_request(const arc_keyring *k, const char *self, const char *to,
                          const char *method, const char *path, const char *range, int64_t now_ms,
                          unsigned char nonce_out[ARC_NONCE_LEN], char *value, size_t cap) {
  arc_auth a;
  memset(&a, 0, sizeof a);
  if (k == NULL || value == NULL || now_ms < 0 || !copy_id(self, self ? strlen(self) : 0, a.node) ||
      !copy_id(to, to ? strlen(to) : 0, a.to))
    return RING_EINVAL;
  a.kid = k->kid[0];
  a.ts_ms = now_ms;
  randombytes_buf(a.nonce, sizeof a.nonce);
  if (nonce_out != NULL)
    memcpy(nonce_out, a.nonce, ARC_NONCE_LEN);
  unsigned char mac[ARC_MAC_LEN], digest[ARC_DIGEST_LEN], pm[ARC_PINS_MAX][ARC_MAC_LEN];
  request_mac(k->key[0], &a, method, path, range, mac, digest);
  uint32_t n_pm = pair_macs(k, a.to, digest, pm);
  if (n_pm == 0)
    return RING_ENODEID; /* no key pinned for the server: nothing it would take from us */
  char nonce[2 * ARC_NONCE_LEN + 1], m[2 * ARC_MAC_LEN + 1],
      pmac[ARC_PINS_MAX * (2 * ARC_MAC_LEN + 1)];
  hex(nonce, a.nonce, ARC_NONCE_LEN);
  hex(m, mac, ARC_MAC_LEN);
  pmac_hex(pm, n_pm, pmac);
  int n = snprintf(value, cap,
                   "v1 kid=%08" PRIx32 " node=%s to=%s ts=%" PRId64 " nonce=%s mac=%s pmac=%s",
                   a.kid, a.node, a.to, a.ts_ms, nonce, m, pmac);
  return n > 0 && (size_t)n < cap ? RING_OK : RING_EINVAL;
}

int arc_auth_verify_request(const arc_keyring *k, const arc_auth *a, const char *self,
                            const char *method, const char *path, const char *range) {
  const unsigned char *key = k && a && a->has_request_fields ? key_of(k, a->kid) : NULL;
  if (key == NULL || self == NULL || strcmp(a->to, self) != 0)
    return RING_EAUTH;
  unsigned char mac[ARC_MAC_LEN], digest[ARC_DIGEST_LEN], pm[ARC_PINS_MAX][ARC_MAC_LEN];
  request_mac(key, a, method, path, range, mac, digest);
  if (crypto_verify_32(mac, a->mac) != 0)
    return RING_EAUTH; /* not a member: no pair key is looked at */
  uint32_t n_pm = pair_macs(k, a->node, digest, pm);
  for (uint32_t i = 0; i < n_pm; i++)
    for (uint32_t j = 0; j < a->n_pmac && j < ARC_PINS_MAX; j++)
      if (crypto_verify_32(pm[i], a->pmac[j]) == 0)
        return RING_OK;
  if (n_pm > 0)
    k->pins(k->pins_ctx, a->node, NULL); /* a key approved since may be pinned: look again */
  return RING_ENODEID;
}

/* ----------------------------------------------------------------- answers */

int arc_auth_sign_answer(const arc_keyring *k, const char *self, const arc_auth *req,
                         unsigned status, uint32_t token, const void *body, size_t len, char *value,
                         size_t cap) {
  arc_auth a;
  memset(&a, 0, sizeof a);
  if (k == NULL || value == NULL || !copy_id(self, self ? strlen(self) : 0, a.node))
    return RING_EINVAL;
  a.kid = k->kid[0];
  if (req != NULL && req->has_nonce) {
    a.has_nonce = true;
    memcpy(a.nonce, req->nonce, ARC_NONCE_LEN);
  }
  unsigned char mac[ARC_MAC_LEN], digest[ARC_DIGEST_LEN];
  answer_mac(k->key[0], &a, status, token, body, len, mac, digest);
  char nonce[2 * ARC_NONCE_LEN + 1] = "", m[2 * ARC_MAC_LEN + 1], sig[2 * ARC_SIG_LEN + 1];
  if (a.has_nonce)
    hex(nonce, a.nonce, ARC_NONCE_LEN);
  hex(m, mac, ARC_MAC_LEN);
  sign_hex(k, digest, sig);
  int n = snprintf(value, cap, "v1 kid=%08" PRIx32 " node=%s%s%s mac=%s sig=%s", a.kid, a.node,
                   a.has_nonce ? " nonce=" : "", nonce, m, sig);
  return n > 0 && (size_t)n < cap ? RING_OK : RING_EINVAL;
}

int arc_auth_verify_answer(const arc_keyring *k, const char *value, size_t value_len,
                           const char *node, const unsigned char nonce[ARC_NONCE_LEN],
                           unsigned status, uint32_t token, const void *body, size_t len) {
  arc_auth a;
  if (k == NULL || node == NULL || nonce == NULL ||
      arc_auth_parse(value, value_len, &a) != RING_OK || a.has_request_fields || !a.has_nonce)
    return RING_EAUTH;
  const unsigned char *key = key_of(k, a.kid);
  if (key == NULL || strcmp(a.node, node) != 0 || sodium_memcmp(a.nonce, nonce, ARC_NONCE_LEN) != 0)
    return RING_EAUTH;
  unsigned char mac[ARC_MAC_LEN], digest[ARC_DIGEST_LEN];
  answer_mac(key, &a, status, token, body, len, mac, digest);
  return verify_both(k, &a, mac, digest);
}

/* -------------------------------------------------------- the replay cache */

/* An open-addressing table of the nonces of accepted requests, each kept
 * until its timestamp is out of the skew window (after which the request
 * would be refused for its time anyway). Bounded: when every slot a nonce
 * may take holds a live one, the request is refused as "busy", never
 * let through unchecked. */
#define PROBES 32

typedef struct replay_slot {
  unsigned char nonce[ARC_NONCE_LEN];
  int64_t ts_ms; /* 0: free */
} replay_slot;

struct arc_replay {
  pthread_mutex_t mu; /* guards slots */
  uint32_t mask;      /* slots - 1 */
  int64_t window_ms;
  int64_t floor_ms; /* requests older than this may have been accepted before a restart */
  replay_slot *slots;
};

int arc_replay_new(uint32_t slots, int64_t window_ms, int64_t floor_ms, arc_replay **out) {
  if (out == NULL || slots < PROBES || (slots & (slots - 1)) != 0 || window_ms <= 0)
    return RING_EINVAL;
  arc_replay *r = calloc(1, sizeof *r);
  if (r == NULL || (r->slots = calloc(slots, sizeof *r->slots)) == NULL) {
    free(r);
    return RING_ENOMEM;
  }
  pthread_mutex_init(&r->mu, NULL);
  r->mask = slots - 1;
  r->window_ms = window_ms;
  r->floor_ms = floor_ms;
  *out = r;
  return RING_OK;
}

void arc_replay_free(arc_replay *r) {
  if (r == NULL)
    return;
  pthread_mutex_destroy(&r->mu);
  free(r->slots);
  free(r);
}

int arc_replay_check(arc_replay *r, const unsigned char nonce[ARC_NONCE_LEN], int64_t ts_ms,
                     int64_t now_ms) {
  uint32_t h;
  memcpy(&h, nonce, sizeof h); /* nonces are random: their bytes are a hash */
  replay_slot *free_slot = NULL;
  if (ts_ms < r->floor_ms)
    return ARC_REPLAY_SEEN; /* its nonce may be in the table of a process before us */
  pthread_mutex_lock(&r->mu);
  /* Read under the lock: a thread holding an older time cannot take a
   * slot whose nonce a later thread has just found live. */
  int64_t oldest = (now_ms ? now_ms : arc__wall_ms()) - r->window_ms;
  for (uint32_t i = 0; i < PROBES; i++) {
    replay_slot *s = &r->slots[(h + i) & r->mask];
    bool live = s->ts_ms != 0 && s->ts_ms >= oldest;
    if (live && memcmp(s->nonce, nonce, ARC_NONCE_LEN) == 0) {
      pthread_mutex_unlock(&r->mu);
      return ARC_REPLAY_SEEN;
    }
    if (!live && free_slot == NULL)
      free_slot = s;
  }
  if (free_slot != NULL) {
    memcpy(free_slot->nonce, nonce, ARC_NONCE_LEN);
    free_slot->ts_ms = ts_ms > 0 ? ts_ms : 1;
  }
  pthread_mutex_unlock(&r->mu);
  return free_slot ? ARC_REPLAY_NEW : ARC_REPLAY_FULL;
}
