/*
 * test_table.c: the table model: token boundaries, lookups against a
 * brute-force reference, write sets, builder rules, accessors, clones.
 */
#include "ring.h"
#include "ring_inline.h"
#include "test_tables.h"
#include "check_main.h"

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Token boundaries: the first and last hash of every token map to it, and
 * the hash after the last maps to the next token. */
static void check_boundaries(uint32_t T) {
  ring_table *t = test_table_rr(T, 1, 3, 3, NULL, 1);
  const uint32_t shift = 64 - (uint32_t)__builtin_ctz(T);
  ck_assert_uint_eq(ring_table_view(t)->shift, shift);
  for (uint64_t i = 0; i < T; i++) {
    uint64_t first = i << shift, last = first + ((1ull << shift) - 1);
    ck_assert_uint_eq(ring_table_token_of_hash(t, first), i);
    ck_assert_uint_eq(ring_table_token_of_hash(t, last), i);
    if (i + 1 < T)
      ck_assert_uint_eq(ring_table_token_of_hash(t, last + 1), i + 1);
  }
  ck_assert_uint_eq(ring_table_token_of_hash(t, UINT64_MAX), T - 1);
  ring_table_free(t);
}

START_TEST(token_boundaries_64) { check_boundaries(64); }
END_TEST

START_TEST(token_boundaries_65536) { check_boundaries(65536); }
END_TEST

/* The reference: token = the arc i with i*2^64/T <= h < (i+1)*2^64/T,
 * found by binary search over arc starts rather than by shifting. */
static uint32_t reference_token(uint32_t T, uint64_t h) {
  uint32_t lo = 0, hi = T;
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    unsigned __int128 start = ((unsigned __int128)mid << 64) / T;
    if ((unsigned __int128)h >= start)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

static void check_lookup(uint32_t T, uint32_t R, uint32_t n, uint64_t seed) {
  ring_table_params p = {"lk", "", 1, seed, T, R};
  ring_table *t;
  ck_assert_int_eq(ring_table_new(&p, &t, NULL), RING_OK);
  for (uint32_t i = 0; i < n; i++) {
    char id[16];
    snprintf(id, sizeof id, "n%u", i);
    ring_node_spec s = {id, "127.0.0.1:1", NULL, NULL, 0, 1.0, RING_NODE_ACTIVE};
    ck_assert_int_eq(ring_table_add_node(t, &s, NULL, NULL), RING_OK);
  }
  srand(7);
  for (uint32_t tok = 0; tok < T; tok++) /* a random permutation prefix per token */
    for (uint32_t r = 0; r < R; r++) {
      uint16_t cand;
      bool dup;
      do {
        cand = (uint16_t)(rand() % (int)n);
        dup = false;
        for (uint32_t q = 0; q < r; q++)
          dup |= ring_table_owner(t, tok, q) == cand;
      } while (dup);
      ring_table_set_owner(t, tok, r, cand);
    }
  ck_assert_int_eq(ring_table_seal(t, NULL), RING_OK);
  const ring_view *v = ring_table_view(t);
  for (int k = 0; k < 20000; k++) {
    char key[32];
    int len = snprintf(key, sizeof key, "session-%d", k);
    uint64_t h = XXH3_64bits_withSeed(key, (size_t)len, seed);
    uint32_t want = reference_token(T, h);
    ck_assert_uint_eq(ring_table_token(t, key, (size_t)len), want);
    ck_assert_uint_eq(ring_view_token(v, key, (size_t)len), want);
    uint16_t got[RING_REPLICAS_MAX], fast[RING_REPLICAS_MAX];
    ck_assert_int_eq(ring_lookup(t, key, (size_t)len, got, RING_REPLICAS_MAX), (int)R);
    ck_assert_int_eq(ring_view_lookup(v, key, (size_t)len, fast, RING_REPLICAS_MAX), (int)R);
    for (uint32_t r = 0; r < R; r++) {
      ck_assert_uint_eq(got[r], ring_table_owner(t, want, r));
      ck_assert_uint_eq(fast[r], got[r]);
    }
    ck_assert_uint_eq(ring_view_primary(v, key, (size_t)len), got[0]);
    ck_assert_int_eq(ring_lookup(t, key, (size_t)len, got, 1), 1);
  }
  ring_table_free(t);
}

START_TEST(lookup_matches_reference) {
  check_lookup(64, 1, 3, 0);
  check_lookup(1024, 3, 10, 99);
  check_lookup(65536, 5, 1000, 12345);
  check_lookup(16384, 7, 7, 1);
}
END_TEST

START_TEST(lookup_bad_args) {
  ring_table *t = test_table_rr(64, 3, 5, 5, NULL, 1);
  uint16_t o[3];
  ck_assert_int_eq(ring_lookup(NULL, "k", 1, o, 3), RING_EINVAL);
  ck_assert_int_eq(ring_lookup(t, NULL, 1, o, 3), RING_EINVAL);
  ck_assert_int_eq(ring_lookup(t, "k", 1, NULL, 3), RING_EINVAL);
  ck_assert_int_eq(ring_lookup(t, "k", 1, o, 0), RING_EINVAL);
  ck_assert_int_eq(ring_lookup(t, NULL, 0, o, 3), 3); /* the empty key is a key */
  ring_table_free(t);
}
END_TEST

START_TEST(write_set_includes_pending) {
  ring_table *base = test_table_rr(64, 3, 5, 5, NULL, 1), *t;
  ck_assert_int_eq(ring_table_clone(base, 2, &t), RING_OK);
  /* token 10: owners (30,31,32)%5 = 0,1,2; node 3 and 4 pending on slots 0 and 2 */
  ck_assert_int_eq(ring_table_add_pending(t, 10, 2, 4), RING_OK);
  ck_assert_int_eq(ring_table_add_pending(t, 10, 0, 3), RING_OK);
  ck_assert_int_eq(ring_table_add_pending(t, 12, 1, 4), RING_OK); /* owners 1,2,3 */
  ck_assert_int_eq(ring_table_seal(t, NULL), RING_OK);
  uint16_t ws[8];
  ck_assert_int_eq(ring_write_set(t, 10, ws, 8), 5);
  ck_assert_uint_eq(ws[0], 0);
  ck_assert_uint_eq(ws[1], 1);
  ck_assert_uint_eq(ws[2], 2);
  ck_assert_uint_eq(ws[3], 3); /* slot 0's pending first: (token, slot) order */
  ck_assert_uint_eq(ws[4], 4);
  ck_assert_int_eq(ring_write_set(t, 10, ws, 4), RING_ERANGE);
  ck_assert_int_eq(ring_write_set(t, 13, ws, 3), 3);
  ck_assert_int_eq(ring_write_set(t, 12, ws, 8), 4);
  ck_assert_int_eq(ring_write_set(t, 64, ws, 8), RING_EINVAL);
  ck_assert_int_eq(ring_write_set(base, 10, ws, 8), 3);
  /* the clone left the base untouched */
  ck_assert_uint_eq(ring_table_pending(base, 10, 2), RING_NODE_NONE);
  ck_assert_uint_eq(ring_table_version(t), 2);
  ring_table_free(base);
  ring_table_free(t);
}
END_TEST

START_TEST(builder_rules) {
  ring_table_params p = {"c", "zone", 1, 0, 64, 2};
  ring_table *t;
  ring_error err;
  ck_assert_int_eq(ring_table_new(&p, &t, &err), RING_OK);
  ring_node_spec a = {"a", "[::1]:7000", NULL, NULL, 0, 2.0, RING_NODE_ACTIVE};
  uint16_t ia, ib;
  ck_assert_int_eq(ring_table_add_node(t, &a, &ia, &err), RING_OK);
  ck_assert_int_eq(ring_table_add_node(t, &a, NULL, &err), RING_EDUPNODE);
  ring_node_spec b = {"b", "host-b.example:7000", NULL, NULL, 0, 1.0, RING_NODE_JOINING};
  ck_assert_int_eq(ring_table_add_node(t, &b, &ib, &err), RING_OK);
  ck_assert_uint_eq(ia, 0);
  ck_assert_uint_eq(ib, 1);
  /* unset owners fail the seal and leave the table unsealed and usable */
  ck_assert_int_eq(ring_table_seal(t, &err), RING_EINDEX);
  ck_assert_ptr_nonnull(strstr(err.message, "owners[0][0]"));
  for (uint32_t tok = 0; tok < 64; tok++) {
    ring_table_set_owner(t, tok, 0, tok % 2 ? ia : ib);
    ring_table_set_owner(t, tok, 1, tok % 2 ? ib : ia);
  }
  ck_assert_int_eq(ring_table_set_node(t, ib, RING_NODE_ACTIVE, 3.5), RING_OK);
  ck_assert_int_eq(ring_table_set_node(t, ib, RING_NODE_ACTIVE, 0), RING_EINVAL);
  ck_assert_int_eq(ring_table_seal(t, &err), RING_OK);
  ck_assert_int_eq(ring_table_seal(t, &err), RING_EINVAL);
  ck_assert_int_eq(ring_table_set_owner(t, 0, 0, ia), RING_EINVAL); /* sealed */
  ck_assert_int_eq(ring_table_add_node(t, &b, NULL, &err), RING_EINVAL);
  ck_assert_int_eq(ring_table_find_node(t, "b"), 1);
  ck_assert_int_eq(ring_table_find_node(t, "zz"), RING_ENOTFOUND);
  ck_assert_uint_eq(ring_table_node_replicas(t, ia), 64);
  ck_assert(ring_table_node_weight(t, ib) == 3.5);
  ck_assert_str_eq(ring_table_node_addr(t, ia), "[::1]:7000");
  ck_assert_ptr_null(ring_table_node_id(t, 2));
  ck_assert_ptr_null(ring_table_node_label(t, ia, "zone"));
  ck_assert_uint_eq(ring_table_owner(t, 64, 0), RING_NODE_NONE);
  ring_table_free(t);
}
END_TEST

START_TEST(params_rejected) {
  ring_table *t = NULL;
  ring_error err;
  ring_table_params p = {"c", "zone", 1, 0, 64, 2};
  p.tokens = 96;
  ck_assert_int_eq(ring_table_new(&p, &t, &err), RING_ETOKENS);
  p.tokens = 64, p.replicas = 0;
  ck_assert_int_eq(ring_table_new(&p, &t, &err), RING_EREPLICAS);
  p.replicas = 2, p.version = 0;
  ck_assert_int_eq(ring_table_new(&p, &t, &err), RING_EVERSION);
  p.version = 1, p.cluster = "UPPER";
  ck_assert_int_eq(ring_table_new(&p, &t, &err), RING_EFIELD);
  ck_assert_ptr_null(t);
  ck_assert_int_eq(ring_table_new(NULL, &t, &err), RING_EINVAL);
}
END_TEST

START_TEST(node_spec_rejected) {
  ring_table_params p = {"c", "", 1, 0, 64, 1};
  ring_table *t;
  ring_error err;
  ck_assert_int_eq(ring_table_new(&p, &t, &err), RING_OK);
  const char *addrs[] = {"h", ":80", "h:", "h:x", "[::1:80", "a b:80", "h:65536"};
  for (size_t i = 0; i < sizeof addrs / sizeof *addrs; i++) {
    ring_node_spec s = {"n", addrs[i], NULL, NULL, 0, 1.0, RING_NODE_ACTIVE};
    ck_assert_msg(ring_table_add_node(t, &s, NULL, &err) == RING_ENODE, "%s", addrs[i]);
  }
  const char *k[] = {"zone", "zone"}, *v[] = {"a", "b"};
  ring_node_spec s = {"n", "h:1", k, v, 2, 1.0, RING_NODE_ACTIVE};
  ck_assert_int_eq(ring_table_add_node(t, &s, NULL, &err), RING_ENODE);
  ck_assert_ptr_nonnull(strstr(err.message, "label zone given twice"));
  s.n_labels = 1, s.weight = 1e7;
  ck_assert_int_eq(ring_table_add_node(t, &s, NULL, &err), RING_ENODE);
  s.weight = 1, s.state = (ring_node_state)9;
  ck_assert_int_eq(ring_table_add_node(t, &s, NULL, &err), RING_ENODE);
  ck_assert_uint_eq(ring_table_node_count(t), 0);
  ring_table_free(t);
}
END_TEST

START_TEST(many_nodes_index) {
  /* 65535 nodes: the id index stays exact at the limit, and one more fails */
  ring_table_params p = {"c", "", 1, 0, 65536, 1};
  ring_table *t;
  ck_assert_int_eq(ring_table_new(&p, &t, NULL), RING_OK);
  for (uint32_t i = 0; i < RING_NODES_MAX; i++) {
    char id[16];
    snprintf(id, sizeof id, "n%u", i);
    ring_node_spec s = {id, "h:1", NULL, NULL, 0, 1.0, RING_NODE_ACTIVE};
    ck_assert_int_eq(ring_table_add_node(t, &s, NULL, NULL), RING_OK);
  }
  ring_node_spec s = {"one-more", "h:1", NULL, NULL, 0, 1.0, RING_NODE_ACTIVE};
  ring_error err;
  ck_assert_int_eq(ring_table_add_node(t, &s, NULL, &err), RING_ENODE);
  ck_assert_int_eq(ring_table_find_node(t, "n65534"), 65534);
  ck_assert_int_eq(ring_table_find_node(t, "n12345"), 12345);
  ring_table_free(t);
}
END_TEST

START_TEST(state_names) {
  for (int s = RING_NODE_JOINING; s <= RING_NODE_REMOVED; s++)
    ck_assert_int_eq(ring_node_state_parse(ring_node_state_name((ring_node_state)s)), s);
  ck_assert_int_eq(ring_node_state_parse("gone"), RING_EINVAL);
  ck_assert_int_eq(ring_node_state_parse(NULL), RING_EINVAL);
}
END_TEST

/* The id rule, in its one home: [a-z0-9._-]{1,63}. */
START_TEST(id_rule) {
  char longest[RING_ID_MAX + 2];
  memset(longest, 'a', sizeof longest);
  longest[RING_ID_MAX] = '\0';
  ck_assert(ring_id_valid(longest));
  longest[RING_ID_MAX] = 'a', longest[RING_ID_MAX + 1] = '\0';
  ck_assert(!ring_id_valid(longest));
  ck_assert(ring_id_valid("n1") && ring_id_valid("kv.n-1_x") && ring_id_valid("0"));
  ck_assert(!ring_id_valid("") && !ring_id_valid(NULL) && !ring_id_valid("N1") &&
            !ring_id_valid("n 1") && !ring_id_valid("n/1") && !ring_id_valid("n\xc3\xa9"));
}
END_TEST

static Suite *table_suite(void) {
  Suite *s = suite_create("table");
  TCase *tc = tcase_create("table");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, token_boundaries_64);
  tcase_add_test(tc, token_boundaries_65536);
  tcase_add_test(tc, lookup_matches_reference);
  tcase_add_test(tc, lookup_bad_args);
  tcase_add_test(tc, write_set_includes_pending);
  tcase_add_test(tc, builder_rules);
  tcase_add_test(tc, params_rejected);
  tcase_add_test(tc, node_spec_rejected);
  tcase_add_test(tc, many_nodes_index);
  tcase_add_test(tc, state_names);
  tcase_add_test(tc, id_rule);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(table_suite()); }
