/*
 * ringctl_fixture.h: what the ringctl tests share: one real etcd per test
 * program, running the built ringctl (RINGCTL_PATH) as a process against
 * it, and seeding a cluster's keys directly through libring.
 *
 * Sections: etcd; running ringctl; JSON; seeding; plans; the suite.
 *
 * Each test uses a cluster name of its own, so tests share the etcd but
 * never each other's keys.
 */
#ifndef RINGCTL_FIXTURE_H
#define RINGCTL_FIXTURE_H

#include "etcd_harness.h" /* first: it sets _GNU_SOURCE */
#include "check_main.h"
#include "cluster.h"
#include "etcd_client.h"
#include "plan_doc.h"
#include "records.h"
#include "test_tables.h"

#include <check.h>
#include <cjson/cJSON.h>

#ifndef RINGCTL_PATH
#error "RINGCTL_PATH must name the built ringctl (tests/ringctl/CMakeLists.txt sets it)"
#endif

/* -------------------------------------------------------------------- etcd */

extern etcd_cluster fx_etcd;
extern ring_etcd *fx_client;

void fx_start(void);

void fx_stop(void);

/* ---------------------------------------------------------- running ringctl */

typedef struct fx_run {
  int code;  /* exit code, -1 if ringctl did not exit normally */
  char *out; /* stdout, malloc()'ed */
  char *err; /* stderr, malloc()'ed */
} fx_run;

char *fx_slurp_file(const char *path);

/* Runs a shell command and captures both streams. */
fx_run fx_shell(const char *command);

/* Runs `ringctl ARGS` (through sh: plain words) and captures both streams. */
fx_run fx_ringctl_raw(const char *args);

/* The same on a pseudo-terminal (util-linux script): as an operator sees it. */
fx_run fx_ringctl_tty(const char *cluster, const char *args);

/* Runs ringctl against the test etcd and cluster `cluster`. */
fx_run fx_ringctl(const char *cluster, const char *fmt, ...);

void fx_free(fx_run *r);

/* Runs and expects exit code `code`; frees the result. */
#define FX_EXPECT(want, cluster, ...)                                                              \
  do {                                                                                             \
    fx_run r_ = fx_ringctl(cluster, __VA_ARGS__);                                                  \
    ck_assert_msg(r_.code == (want), "exit %d, want %d\nstdout: %s\nstderr: %s", r_.code, (want),  \
                  r_.out, r_.err);                                                                 \
    fx_free(&r_);                                                                                  \
  } while (0)

/* Runs, expects exit `want` and `needle` in what stream `out` (r_.out or
 * r_.err) holds. */
#define FX_EXPECT_IN(want, stream, needle, cluster, ...)                                           \
  do {                                                                                             \
    fx_run r_ = fx_ringctl(cluster, __VA_ARGS__);                                                  \
    ck_assert_msg(r_.code == (want), "exit %d, want %d\nstdout: %s\nstderr: %s", r_.code, (want),  \
                  r_.out, r_.err);                                                                 \
    ck_assert_msg(strstr(r_.stream, needle) != NULL, "no \"%s\" in %s", needle, r_.stream);        \
    fx_free(&r_);                                                                                  \
  } while (0)

/* Runs each of args[0..n) and expects exit `want` with a message on stderr
 * that starts with `prefix`. */
void fx_expect_all(int want, const char *cluster, const char *const *args, size_t n,
                   const char *prefix);

/* -------------------------------------------------------------------- JSON */

/* Runs, expects exit `code` and JSON on stdout; returns it parsed. */
cJSON *fx_json(int code, const char *cluster, const char *fmt, ...);

const cJSON *fx_get(const cJSON *o, const char *name);

double fx_num(const cJSON *o, const char *name);

const char *fx_str(const cJSON *o, const char *name);

/* Whether o has exactly the fields names[0..n). */
void fx_fields(const cJSON *o, const char *const *names, int n);

/* ----------------------------------------------------------------- seeding */

void fx_put(const char *cluster, const char *what, const char *value, size_t len);

void fx_put_owned(const char *cluster, const char *what, char *json, size_t len);

/* The value of one key as a string ("" when absent); free() it. */
char *fx_value(const char *cluster, const char *what);
/* nodes/<id> of cluster, decoded (the test fails if absent or malformed). */
rk_node fx_node(const char *cluster, const char *id);

/* Checks that a key is absent. */
void fx_assert_absent(const char *cluster, const char *what);

/* config: T tokens, R replicas, failure domain zone. */
void fx_seed_config(const char *cluster, uint32_t tokens, uint32_t replicas);

/* Node records n0..n<n-1> as test_table_rr lays them out (zone z<i%zones>,
 * addr 127.0.0.1:<7000+i>), active, alive. */
void fx_seed_nodes(const char *cluster, uint32_t n, uint32_t zones);

/* tables/<v> and version = v. */
void fx_seed_table(const char *cluster, const ring_table *t);

/* test_table_rr's table for cluster `cluster` (its cluster name is "test"). */
ring_table *fx_table(const char *cluster, uint32_t tokens, uint32_t replicas, uint32_t n,
                     uint32_t zones, uint64_t version);

/* The shape every test cluster has: 64 tokens x 2 replicas, 6 nodes in 3 zones. */
#define FX_TOKENS 64
#define FX_REPLICAS 2
#define FX_NODES 6
#define FX_ZONES 3

/* A sealed table as fx_table, published as the live one (version 1). */
void fx_seed_cluster(const char *cluster);

/* ------------------------------------------------------------------- plans */

/* Proposes (writes plan/proposed) the plan that adds node `id` in `zone` to
 * the seeded cluster; its id goes to id_out. */
void fx_propose_add(const char *cluster, const char *id, const char *zone,
                    char id_out[RK_PLAN_ID_LEN + 1]);

/* Moves the table to version v (the same owners), as a coordinator would. */
void fx_bump_version(const char *cluster, uint64_t v);

/* --------------------------------------------------------------- the suite */

/* Runs tests[0..n) in one case sharing one etcd, in this process (the etcd
 * member is a child of it). Returns the exit status. */
int fx_main(const char *name, const TTest *const *tests, size_t n);

#endif /* RINGCTL_FIXTURE_H */
