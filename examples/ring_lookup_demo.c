/*
 * ring_lookup_demo.c: what an embedding service does with libring. Loads a
 * table (ringkeeper.table.v1 JSON from a file, or a built-in 3-node table),
 * routes keys to owners and read replicas, and swaps a newer table in while
 * a reader thread keeps routing.
 * Usage: ring_lookup_demo [TABLE.json] [KEY...]
 */
#define _POSIX_C_SOURCE 200809L
#include "ring.h"
#include "ring_inline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A table of three nodes in three zones, owners laid out round-robin. */
static ring_table *builtin_table(uint64_t version) {
  ring_table_params p = {"demo", "zone", version, 0, 1024, 3};
  ring_table *t;
  ring_error err;
  if (ring_table_new(&p, &t, &err) != RING_OK) {
    fprintf(stderr, "ring_table_new: %s\n", err.message);
    exit(1);
  }
  static const char *const zones[] = {"z1", "z2", "z3"};
  for (int i = 0; i < 3; i++) {
    char id[8], addr[32];
    snprintf(id, sizeof id, "n%d", i + 1);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", 7101 + i);
    const char *k[] = {"zone"}, *v[] = {zones[i]};
    ring_node_spec s = {id, addr, k, v, 1, 1.0, RING_NODE_ACTIVE};
    ring_table_add_node(t, &s, NULL, NULL);
  }
  for (uint32_t tok = 0; tok < 1024; tok++)
    for (uint32_t r = 0; r < 3; r++)
      ring_table_set_owner(t, tok, r, (uint16_t)((tok + r + version) % 3));
  if (ring_table_seal(t, &err) != RING_OK) {
    fprintf(stderr, "seal: %s\n", err.message);
    exit(1);
  }
  return t;
}

static ring_table *load(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *buf = malloc((size_t)n + 1);
  if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "%s: read failed\n", path);
    exit(1);
  }
  fclose(f);
  ring_table *t;
  ring_error err;
  if (ring_table_decode(buf, (size_t)n, &t, &err) != RING_OK) {
    fprintf(stderr, "%s: %s (%s)\n", path, err.message, ring_strerror(err.code));
    exit(1);
  }
  free(buf);
  return t;
}

static void show(const ring_table *t, const char *key) {
  uint16_t o[RING_REPLICAS_MAX], reader;
  int n = ring_lookup(t, key, strlen(key), o, RING_REPLICAS_MAX);
  printf("  %-12s token %5u  owners", key, ring_table_token(t, key, strlen(key)));
  for (int i = 0; i < n; i++)
    printf(" %s", ring_table_node_id(t, o[i]));
  if (ring_read_replica(t, key, strlen(key), &reader) == RING_OK)
    printf("  reads from %s", ring_table_node_id(t, reader));
  printf("\n");
}

typedef struct {
  ring_live *live;
  atomic_bool stop;
  atomic_ulong lookups;
} reader_ctx;

static void *reader(void *arg) {
  reader_ctx *c = arg;
  unsigned long n = 0;
  char key[32];
  while (!atomic_load(&c->stop)) {
    const ring_table *t = ring_live_enter(c->live);
    int len = snprintf(key, sizeof key, "session-%lu", n % 100000);
    (void)ring_view_primary(ring_table_view(t), key, (size_t)len);
    ring_live_exit(c->live);
    n++;
  }
  atomic_store(&c->lookups, n);
  return NULL;
}

int main(int argc, char **argv) {
  /* Built with one libring's headers, run against another's library: say
   * so and stop (a demo can be strict; the SONAME already keeps 0.x minor
   * versions apart). */
  if (strcmp(ring_version(), RING_VERSION_STRING) != 0) {
    fprintf(stderr, "libring %s, built with headers %s\n", ring_version(), RING_VERSION_STRING);
    return 1;
  }
  ring_table *t = argc > 1 ? load(argv[1]) : builtin_table(1);
  printf("table: cluster %s, version %llu, T=%u, R=%u, %u nodes\n", ring_table_cluster(t),
         (unsigned long long)ring_table_version(t), ring_table_tokens(t), ring_table_replicas(t),
         ring_table_node_count(t));
  const char *defaults[] = {"user:42", "session-7", "cart:9001", "img/cat.png"};
  for (int i = 0; i < (argc > 2 ? argc - 2 : 4); i++)
    show(t, argc > 2 ? argv[i + 2] : defaults[i]);

  reader_ctx c = {0};
  ring_live_new(&c.live);
  ring_live_swap(c.live, t);
  pthread_t th;
  pthread_create(&th, NULL, reader, &c);
  uint64_t v = ring_table_version(t);
  for (int i = 1; i <= 1000; i++)
    ring_live_swap(c.live, builtin_table(v + (uint64_t)i));
  atomic_store(&c.stop, true);
  pthread_join(th, NULL);
  printf("live: 1000 swaps to version %llu while a reader made %lu lookups, no lock taken\n",
         (unsigned long long)ring_live_version(c.live), atomic_load(&c.lookups));
  ring_live_free(c.live);
  return 0;
}
