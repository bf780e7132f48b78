/*
 * cmd_accept_loss.c: `ringctl accept-loss`: the operator's explicit word
 * that the data of some moves in flight, or of replicas their owners
 * report missing (missing/<id>), is gone, so their receivers (or those
 * owners) may install those arcs empty (proto/etcd.md, `loss`). Nothing
 * else ever completes a move or a refill without its data (docs/DESIGN.md,
 * "Arcs on a host").
 *
 * Usage: ringctl accept-loss TOKENS|--stuck|--lost [--version V] [--yes]
 *
 * Sections: arguments; which tokens; the record; the command.
 *
 * It always prints the exact tokens and the version it would write; only
 * with --yes does it write, in one txn that compares the version key's mod
 * revision as read (and the loss key's, so two operators never drop each
 * other's tokens): a version that moved meanwhile is exit 3. A record for
 * the same version is extended (the union); one for an older version is
 * replaced (the agents ignore it anyway).
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACCEPTED_BY "ringctl"
#define BITS_BYTES (RING_TOKENS_MAX / 8)

/* -------------------------------------------------------------- arguments */

enum { OPT_STUCK, OPT_LOST, OPT_YES, OPT_VERSION };

static const ringctl_opt loss_opts[] = {{"stuck", OPT_STUCK, false},
                                        {"lost", OPT_LOST, false},
                                        {"yes", OPT_YES, false},
                                        {"version", OPT_VERSION, true},
                                        {NULL, 0, false}};

static const char help[] =
    "Usage: ringctl accept-loss TOKENS [--version V] [--yes]\n"
    "       ringctl accept-loss --stuck|--lost [--version V] [--yes]\n"
    "\n"
    "Accepts that the data of moves in flight, or of replicas their owners report\n"
    "missing (a wiped disk), is lost: the receivers of the listed pending tokens,\n"
    "and the owners missing the listed tokens, install them empty instead of\n"
    "waiting for a source that will never answer (an owner still fetches from any\n"
    "other owner that holds the token first). Data no replica holds any more is\n"
    "written off: use it only when every source of those tokens is gone for good\n"
    "(deploy/STUCK.md, deploy/PRODUCTION.md).\n"
    "\n"
    "TOKENS is a comma list of tokens and ranges (3,17,100-120); --stuck takes every\n"
    "move the coordinator reports stuck; --lost every token whose every owner\n"
    "reports it missing. Every token must be pending in the current table or\n"
    "reported missing by an owner (else exit 2). Without --yes nothing is written:\n"
    "the tokens, the version and the command that writes them are printed.\n"
    "\n"
    "Options:\n"
    "  --stuck      the tokens of the coordinator's stuck report\n"
    "  --lost       the tokens every owner reports missing (ringctl status: lost)\n"
    "  --version V  refuse (exit 3) unless the table is still at version V\n"
    "  --yes        write the record (one txn; exit 3 if the version moved meanwhile)\n"
    "  --json       {\"version\",\"tokens\":[...],\"written\"}, without the text\n";

typedef struct loss_settings {
  const char *list;      /* TOKENS as given; NULL with --stuck */
  bool stuck, lost, yes; /* --lost: every token whose every owner reports it missing */
  uint64_t version;      /* --version; 0: whatever is current */
  uint8_t *bits;         /* the tokens asked for, BITS_BYTES */
} loss_settings;

/* Digits only, below RING_TOKENS_MAX. */
static bool parse_token(const char *s, uint32_t *out) {
  uint32_t v = 0;
  size_t n = strspn(s, "0123456789");
  if (n == 0 || n > 5 || s[n] != '\0')
    return false;
  for (size_t i = 0; i < n; i++)
    v = v * 10 + (uint32_t)(s[i] - '0');
  *out = v;
  return v < RING_TOKENS_MAX;
}

/* One "N" or "N-M" of a token list into bits. */
static int parse_item(const ringctl_args *a, const char *item, size_t len, uint8_t *bits) {
  char buf[16];
  uint32_t lo = 0, hi = 0;
  bool ok = len > 0 && len < sizeof buf;
  if (ok) {
    memcpy(buf, item, len);
    buf[len] = '\0';
    char *dash = strchr(buf, '-');
    if (dash != NULL)
      *dash = '\0';
    ok = parse_token(buf, &lo) && (dash == NULL ? (hi = lo, true) : parse_token(dash + 1, &hi));
  }
  if (!ok)
    return ringctl_usage_error(a,
                               "TOKENS: \"%.*s\" is not a token below %u or a range of them "
                               "(e.g. 3,17,100-120)",
                               (int)(len < 32 ? len : 32), item, RING_TOKENS_MAX);
  if (hi < lo)
    return ringctl_usage_error(a, "TOKENS: range %.*s ends below its start", (int)len, item);
  for (uint32_t t = lo; t <= hi; t++)
    rk_bit_set(bits, t, true);
  return RINGCTL_EXIT_OK;
}

static int parse_list(const ringctl_args *a, const char *list, uint8_t *bits) {
  for (const char *p = list;;) {
    size_t len = strcspn(p, ",");
    int rc = parse_item(a, p, len, bits);
    if (rc != RINGCTL_EXIT_OK || p[len] == '\0')
      return rc;
    p += len + 1;
  }
}

static int apply(const ringctl_args *a, int id, const char *value, void *ud) {
  loss_settings *s = ud;
  switch (id) {
  case OPT_STUCK:
    s->stuck = true;
    return RINGCTL_EXIT_OK;
  case OPT_LOST:
    s->lost = true;
    return RINGCTL_EXIT_OK;
  case OPT_YES:
    s->yes = true;
    return RINGCTL_EXIT_OK;
  case OPT_VERSION:
    return ringctl_parse_uint(a, "version", value, 1, RING_VERSION_MAX, &s->version);
  default:
    break;
  }
  if (s->list != NULL)
    return ringctl_usage_error(a, "one token list: \"%s\" after \"%s\"", value, s->list);
  s->list = value;
  return parse_list(a, value, s->bits);
}

/* ---------------------------------------------------------- which tokens */

/* The tokens of bits, ascending, into a malloc()'ed array. */
static uint32_t *tokens_of(const uint8_t *bits, uint32_t *n) {
  uint32_t *t = malloc(RING_TOKENS_MAX * sizeof *t), k = 0;
  for (uint32_t i = 0; t != NULL && i < RING_TOKENS_MAX; i++)
    if (rk_bit(bits, i))
      t[k++] = i;
  *n = k;
  return t;
}

static int by_value(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static void print_tokens(FILE *f, const uint32_t *t, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    fprintf(f, "%s%" PRIu32, i ? "," : "", t[i]);
}

/* --stuck: the tokens of the coordinator's report into bits. */
static void take_stuck(const rk_state *st, uint8_t *bits) {
  const rk_stuck *k = ringctl_stuck_of(st);
  for (uint32_t i = 0; k != NULL && i < k->n_moves; i++)
    rk_bit_set(bits, k->moves[i].token, true);
  if (k != NULL && k->more > 0)
    printf("the report lists %u stuck moves and %u more: run accept-loss --stuck again for "
           "those once these are in\n",
           k->n_moves, k->more);
}

/* The tokens pending in t into bits. */
static void mark_pending(const ring_table *t, uint8_t *bits) {
  for (uint32_t i = 0; t != NULL && i < ring_table_pending_count(t); i++) {
    uint32_t token, slot;
    uint16_t node;
    if (ring_table_pending_at(t, i, &token, &slot, &node) == RING_OK)
      rk_bit_set(bits, token, true);
  }
}

/* The tokens an owner reports missing (missing/<id>) into bits. */
static void mark_missing(const rk_missing_view *mv, uint8_t *bits) {
  for (uint32_t i = 0; i < mv->n_hosts; i++)
    for (uint32_t k = 0; k < mv->hosts[i].n; k++)
      rk_bit_set(bits, mv->hosts[i].tokens[k], true);
}

/* Refuses (exit 2) tokens that are neither pending in t (t NULL: no
 * table) nor reported missing by an owner. */
static int check_acceptable(ringctl_ctx *ctx, const ring_table *t, const rk_missing_view *mv,
                            uint64_t version, const uint32_t *tok, uint32_t n) {
  uint8_t *ok = calloc(BITS_BYTES, 1);
  if (ok == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  mark_pending(t, ok);
  mark_missing(mv, ok);
  uint32_t bad = 0;
  for (uint32_t i = 0; i < n; i++)
    if (!rk_bit(ok, tok[i]) && bad++ < 8)
      fprintf(stderr,
              "%s: token %" PRIu32 " is not pending in version %" PRIu64
              " and no owner reports it missing\n",
              ctx->a->prog, tok[i], version);
  free(ok);
  if (bad == 0)
    return RINGCTL_EXIT_OK;
  return ringctl_say(ctx, RINGCTL_EXIT_USAGE,
                     "%" PRIu32 " of the tokens are neither moves in flight nor missing replicas: "
                     "only those can be accepted as lost (ringctl status shows both)",
                     bad);
}

/* The owners that report a token of tok missing, and whether it is lost. */
static void show_missing(const rk_missing_view *mv, const uint32_t *tok, uint32_t n) {
  for (uint32_t i = 0; i < mv->n_hosts; i++)
    for (uint32_t k = 0; k < mv->hosts[i].n; k++) {
      uint32_t token = mv->hosts[i].tokens[k];
      if (bsearch(&token, tok, n, sizeof *tok, by_value) == NULL)
        continue;
      bool lost = bsearch(&token, mv->lost, mv->n_lost, sizeof *mv->lost, by_value) != NULL;
      printf("  token %" PRIu32 ": owner %s lacks it and installs it empty%s\n", token,
             mv->hosts[i].id,
             lost ? " (every owner lacks it)"
                  : " only if no other owner serves it (another owner may hold it)");
    }
}

/* What the record will say, and each move it lets complete. */
static void show(const ring_table *t, uint64_t version, const uint32_t *tok, uint32_t n) {
  printf("accept-loss: version %" PRIu64 ", %" PRIu32 " token%s: ", version, n, n == 1 ? "" : "s");
  print_tokens(stdout, tok, n);
  putchar('\n');
  for (uint32_t i = 0; i < ring_table_pending_count(t); i++) {
    uint32_t token, slot;
    uint16_t node;
    if (ring_table_pending_at(t, i, &token, &slot, &node) != RING_OK ||
        bsearch(&token, tok, n, sizeof *tok, by_value) == NULL)
      continue;
    uint16_t owner = ring_table_owner(t, token, slot);
    printf("  token %" PRIu32 " slot %" PRIu32 ": %s -> %s installs it empty\n", token, slot,
           owner != RING_NODE_NONE ? ring_table_node_id(t, owner) : "-",
           ring_table_node_id(t, node));
  }
}

/* The command that writes what was shown (dry run). */
static void show_command(const ringctl_ctx *ctx, uint64_t version, const uint32_t *tok,
                         uint32_t n) {
  const ringctl_globals *g = ctx->a->globals;
  printf("dry run: nothing written. To write it:\n  ringctl%s%s --cluster %s accept-loss ",
         g->endpoints ? " --endpoints " : "", g->endpoints ? g->endpoints : "", ctx->cluster);
  print_tokens(stdout, tok, n);
  printf(" --version %" PRIu64 " --yes\n", version);
}

/* -------------------------------------------------------------- the record */

/* The record to write: tok, with the tokens of a record for the same
 * version already in kv (the union). */
static int merge(ringctl_ctx *ctx, const ring_kv *kv, uint64_t version, const uint32_t *tok,
                 uint32_t n, rk_loss *out) {
  uint8_t *bits = calloc(BITS_BYTES, 1);
  if (bits == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  for (uint32_t i = 0; i < n; i++)
    rk_bit_set(bits, tok[i], true);
  if (kv != NULL) {
    rk_loss old;
    ring_error err = {RING_OK, ""};
    int rc = rk_loss_decode((const char *)kv->value, kv->value_len, &old, &err);
    if (rc != RING_OK) {
      free(bits);
      return ringctl_fail(ctx, rc, &err, "the loss key holds no loss record");
    }
    for (uint32_t i = 0; old.version == version && i < old.n_tokens; i++)
      rk_bit_set(bits, old.tokens[i], true);
    rk_loss_free(&old);
  }
  *out = (rk_loss){.version = version, .at_ms = ringctl_now_ms()};
  snprintf(out->by, sizeof out->by, "%s", ACCEPTED_BY);
  out->tokens = tokens_of(bits, &out->n_tokens);
  free(bits);
  return out->tokens != NULL ? RINGCTL_EXIT_OK
                             : ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
}

/* Puts rec if the version key and the loss key are as read. */
static int write_record(ringctl_ctx *ctx, const rk_state *st, int64_t loss_mod,
                        const rk_loss *rec) {
  char *json = NULL, kv[RK_KEY_MAX], kl[RK_KEY_MAX];
  size_t len = 0;
  if (rk_loss_encode(rec, &json, &len) != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "encoding the loss record failed");
  ringctl_key(ctx, "version", kv);
  ringctl_key(ctx, "loss", kl);
  ring_cmp cmps[2] = {
      {kv, strlen(kv), RING_CMP_MOD, RING_CMP_EQ, st->version_mod, NULL, 0},
      {kl, strlen(kl), loss_mod ? RING_CMP_MOD : RING_CMP_CREATE, RING_CMP_EQ, loss_mod, NULL, 0}};
  ring_op put = {RING_OP_PUT, kl, strlen(kl), json, len, 0, false};
  bool won = false;
  ringctl_audit(ctx, "loss.accept", NULL, "version %llu: %u tokens written off (first %u)",
                (unsigned long long)rec->version, rec->n_tokens, rec->tokens[0]);
  int rc = ringctl_txn(ctx, cmps, 2, &put, 1, "writing loss", &won);
  free(json);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if (!won)
    return ringctl_say(ctx, RINGCTL_EXIT_CONFLICT,
                       "the version moved (or another accept-loss wrote) meanwhile: nothing "
                       "was written; review ringctl status and run it again");
  return RINGCTL_EXIT_OK;
}

/* Reads loss, merges and writes; prints what it wrote. */
static int accept(ringctl_ctx *ctx, const rk_state *st, const uint32_t *tok, uint32_t n) {
  char key[RK_KEY_MAX];
  ring_kv kv;
  bool found = false;
  ringctl_key(ctx, "loss", key);
  int rc = ringctl_get(ctx, key, &kv, &found);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  rk_loss rec = {0}; /* merge writes it only on success */
  rc = merge(ctx, found ? &kv : NULL, st->version, tok, n, &rec);
  if (rc == RINGCTL_EXIT_OK)
    rc = write_record(ctx, st, found ? kv.mod_revision : 0, &rec);
  if (rc == RINGCTL_EXIT_OK && !ctx->a->globals->json)
    printf("wrote loss for version %" PRIu64 ": %" PRIu32 " token%s accepted as lost in all\n",
           st->version, rec.n_tokens, rec.n_tokens == 1 ? "" : "s");
  rk_loss_free(&rec);
  if (found)
    ring_kv_clear(&kv);
  return rc;
}

/* ------------------------------------------------------------- the command */

/* --json: {"version","tokens":[...],"written"}: the tokens accepted (or
 * that would be, without --yes) and whether the record was written. */
static int report_json(uint64_t version, const uint32_t *tok, uint32_t n, bool written) {
  cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "tokens");
  cJSON_AddNumberToObject(o, "version", (double)version);
  for (uint32_t i = 0; arr != NULL && i < n; i++)
    cJSON_AddItemToArray(arr, cJSON_CreateNumber(tok[i]));
  cJSON_AddBoolToObject(o, "written", written);
  return ringctl_json_emit(o);
}

static void show_text(ringctl_ctx *ctx, const loss_settings *s, const rk_state *st,
                      const ring_table *t, const rk_missing_view *mv, const uint32_t *tok,
                      uint32_t n) {
  show(t, st->version, tok, n);
  show_missing(mv, tok, n);
  if (!s->yes)
    show_command(ctx, st->version, tok, n);
}

static int decide(ringctl_ctx *ctx, const loss_settings *s, const rk_state *st, const ring_table *t,
                  const rk_missing_view *mv) {
  uint32_t n = 0;
  uint32_t *tok = tokens_of(s->bits, &n);
  if (tok == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  bool json = ctx->a->globals->json;
  int rc = RINGCTL_EXIT_OK;
  if (n == 0 && !json)
    printf("no moves are reported stuck and no tokens lost in version %" PRIu64
           ": nothing to accept\n",
           st->version);
  else if (n > 0 && (rc = check_acceptable(ctx, t, mv, st->version, tok, n)) == RINGCTL_EXIT_OK) {
    if (!json)
      show_text(ctx, s, st, t, mv, tok, n);
    if (s->yes)
      rc = accept(ctx, st, tok, n);
  }
  if (json && rc == RINGCTL_EXIT_OK)
    rc = report_json(st->version, tok, n, s->yes && n > 0);
  free(tok);
  return rc;
}

/* Checks the version asked for, gathers --stuck and --lost, decides. */
static int take(ringctl_ctx *ctx, loss_settings *s, const rk_state *st, const ring_table *t,
                const rk_missing_view *mv) {
  if (s->version != 0 && s->version != st->version)
    return ringctl_say(ctx, RINGCTL_EXIT_CONFLICT,
                       "the table is at version %" PRIu64 ", not %" PRIu64
                       ": nothing was written; review ringctl status again",
                       st->version, s->version);
  if (t == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_USAGE, "no table is published yet: nothing is pending");
  if (s->stuck)
    take_stuck(st, s->bits);
  for (uint32_t i = 0; s->lost && i < mv->n_lost; i++)
    rk_bit_set(s->bits, mv->lost[i], true);
  return decide(ctx, s, st, t, mv);
}

static int run(ringctl_ctx *ctx, void *ud) {
  rk_state st;
  ring_table *t = NULL;
  int rc = ringctl_read_live(ctx, RK_READ_VERSION | RK_READ_PLANS | RK_READ_STUCK | RK_READ_MISSING,
                             &st, &t);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  rk_missing_view mv;
  if (rk_missing_view_make(&st, t, &mv) != RING_OK)
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  else
    rc = take(ctx, ud, &st, t, &mv), rk_missing_view_free(&mv);
  ring_table_free(t);
  rk_state_free(&st);
  return rc;
}

int ringctl_cmd_accept_loss(ringctl_args *a) {
  loss_settings s = {NULL, false, false, false, 0, calloc(BITS_BYTES, 1)};
  bool help_shown = false;
  if (s.bits == NULL)
    return RINGCTL_EXIT_FAILURE;
  int rc = ringctl_parse(a, loss_opts, help, apply, &s, &help_shown);
  int ways = (s.list != NULL) + s.stuck + s.lost;
  if (rc == RINGCTL_EXIT_OK && !help_shown && ways != 1)
    rc = ringctl_usage_error(a, ways > 1 ? "one of TOKENS, --stuck or --lost"
                                         : "which tokens? give TOKENS (3,17,100-120), --stuck "
                                           "or --lost");
  if (rc == RINGCTL_EXIT_OK && !help_shown)
    rc = ringctl_with_etcd(a, run, &s);
  free(s.bits);
  return rc;
}

const ringctl_command ringctl_command_accept_loss = {
    "accept-loss", ringctl_cmd_accept_loss,
    "let stuck moves complete empty: their data is written off (--yes)", loss_opts, help};
