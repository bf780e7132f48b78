/* e2e_cluster.c: the definitions of e2e_cluster.h (see there). */
#include "e2e_cluster.h"

e2e_world w;

bool e2e_long(void) {
  const char *l = getenv("RING_LONG");
  return l && *l && strcmp(l, "0") != 0;
}

void e2e_defaults(e2e_opts *o) {
  if (!o->tokens)
    o->tokens = 256;
  if (!o->replicas)
    o->replicas = 2;
  if (!o->migration)
    o->migration = "stream";
  if (!o->down_after_ms)
    o->down_after_ms = 1500;
  if (!o->per_node)
    o->per_node = 8;
  if (!o->per_wave)
    o->per_wave = 32;
  if (!o->keys)
    o->keys = e2e_long() ? 20000 : 2000;
  if (!o->value_size)
    o->value_size = 100;
}

/* ------------------------------------------------------------- etcd auth */

#define ROOT_PASSWORD "e2e-root-password"

bool e2e_auth(void) {
  const char *a = getenv("RING_E2E_AUTH");
  return a && *a && strcmp(a, "0") != 0;
}

static void write_secret(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
  ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

/* The user of actor kind/name, made with `ringctl auth add` as root the
 * first time (its password file is the mark). */
static void auth_user(const char *kind, const char *name, const char *service, char *pw,
                      size_t cap) {
  snprintf(pw, cap, "%s/%s.%s.pw", env.dir, kind, name);
  if (access(pw, F_OK) == 0)
    return;
  char text[128], out[4096], svc[80] = "";
  snprintf(text, sizeof text, "pw-%s-%s-%08x\n", kind, name, (unsigned)random());
  write_secret(pw, text);
  if (service)
    snprintf(svc, sizeof svc, "--service %s", service);
  int rc = proc_runf(60, out, sizeof out,
                     "%s --endpoints %s --cluster " ENV_CLUSTER " --user root --password-file "
                     "%s/root.pw auth add %s %s --new-password-file %s %s",
                     RINGCTL_BIN, env.etcd.endpoints, env.dir, kind, name, pw, svc);
  ck_assert_msg(rc == 0, "ringctl auth add %s %s -> %d: %s", kind, name, rc, out);
}

const char *e2e_etcd(const char *kind, const char *name, const char *service, char *buf,
                     size_t cap) {
  int n = snprintf(buf, cap, "--endpoints %s --cluster " ENV_CLUSTER, env.etcd.endpoints);
  if (!e2e_auth())
    return buf;
  char pw[200];
  auth_user(kind, name, service, pw, sizeof pw);
  snprintf(buf + n, cap - (size_t)n, " --user " ENV_CLUSTER ".%s.%s --password-file %s", kind, name,
           pw);
  return buf;
}

static void agent_creds(const char *id, char *flags, size_t cap) {
  char all[600];
  e2e_etcd("host", id, NULL, all, sizeof all);
  snprintf(flags, cap, "%s", strstr(all, " --user "));
}

/* etcd's root, the cluster's roles and auth on, through `ringctl auth
 * setup`; the test's own client (env.c: config, checks) is then root, every
 * daemon a user of its own. */
static void auth_setup(void) {
  char root[200], out[4096];
  snprintf(root, sizeof root, "%s/root.pw", env.dir);
  write_secret(root, ROOT_PASSWORD "\n");
  int rc =
      proc_runf(60, out, sizeof out,
                "%s --endpoints %s --cluster " ENV_CLUSTER " auth setup --root-password-file %s",
                RINGCTL_BIN, env.etcd.endpoints, root);
  ck_assert_msg(rc == 0, "ringctl auth setup -> %d: %s", rc, out);
  snprintf(env.etcd.root_password, sizeof env.etcd.root_password, ROOT_PASSWORD);
  ring_etcd_close(env.c);
  env.c = test_client_as(env.etcd.endpoints, "root", ROOT_PASSWORD, 5000);
  env.agent_creds = agent_creds;
}

static void e2e_setup_world(void) {
  memset(&w, 0, sizeof w);
  snprintf(w.reader_log, sizeof w.reader_log, "%s/reader.log", env.dir);
  if (e2e_auth())
    auth_setup();
}

/* The fixture's setup: env_setup (one etcd member) or the same with
 * three, then this file's part. */
static void e2e_setup1(void) {
  env_setup();
  e2e_setup_world();
}

static void e2e_setup3(void) {
  env_setup(); /* then three members in place of its one */
  ring_etcd_close(env.c);
  etcd_cluster_stop(&env.etcd);
  etcd_cluster_start(&env.etcd, 3, NULL);
  env.c = test_client(env.etcd.endpoints, 5000, 0);
  e2e_setup_world();
}

/* Stops what env_teardown does not know: ring-kv, coordinators, the
 * reader; agents on a tmpfs (so it can be unmounted). Runs before
 * env_teardown, which stops the other agents and etcd. */
static void e2e_teardown(void) {
  bool clean = true;
  proc_kill(&w.reader);
  for (int i = 0; i < E2E_COORDS; i++) {
    if (!w.coord_used[i])
      continue;
    proc_signal(&w.coord[i], SIGCONT);
    if (proc_running(&w.coord[i]) && proc_term(&w.coord[i], 15) != 0) {
      fprintf(stderr, "ring-coordinator %s did not stop cleanly on SIGTERM\n", w.coord_id[i]);
      clean = false;
    }
    proc_kill(&w.coord[i]);
    if (file_contains(w.coord[i].log, "Sanitizer") ||
        file_contains(w.coord[i].log, "runtime error"))
      clean = false, fprintf(stderr, "sanitizer report in %s\n", w.coord[i].log);
    if (!env.passed || !clean)
      file_tail(w.coord[i].log, 60);
  }
  for (int i = 0; i < ENV_AGENTS; i++) {
    if (!env.a[i].used)
      continue;
    if (w.kv_up[i] && !proc_running(&w.kv[i])) {
      fprintf(stderr, "ring-kv %s died during the test (wait status 0x%x)\n", env.a[i].id,
              (unsigned)w.kv[i].status);
      clean = false;
    }
    if (proc_running(&w.kv[i]) && proc_term(&w.kv[i], 15) != 0) {
      fprintf(stderr, "ring-kv %s did not stop cleanly on SIGTERM\n", env.a[i].id);
      clean = false;
    }
    proc_kill(&w.kv[i]);
    if (file_contains(w.kv_log[i], "Sanitizer") || file_contains(w.kv_log[i], "runtime error"))
      clean = false, fprintf(stderr, "sanitizer report in %s\n", w.kv_log[i]);
    if (!env.passed || !clean)
      file_tail(w.kv_log[i], 30);
    if (w.mounted[i]) {
      proc_signal(&env.a[i].p, SIGCONT);
      if (proc_running(&env.a[i].p) && proc_term(&env.a[i].p, 15) != 0)
        clean = false;
      proc_kill(&env.a[i].p);
      if (!env.passed)
        file_tail(env.a[i].log, 60);
      e2e_unmount(i);
    }
  }
  if (!env.passed)
    file_tail(w.reader_log, 20);
  env.passed = env.passed && clean;
}

void e2e_config_put(void) {
  const e2e_opts *o = &w.o;
  char json[800];
  snprintf(json, sizeof json,
           "{\"format\":\"ringkeeper.config.v1\",\"tokens\":%u,\"replicas\":%u,\"seed\":0,"
           "\"failure_domain\":\"zone\",\"best_effort\":\"\",\"migration\":\"%s\","
           "\"down_after_ms\":%u,\"auto_apply\":false,"
           "\"throttle\":{\"moves_per_node\":%u,\"moves_per_domain\":0,\"moves_per_wave\":%u,"
           "\"bytes_per_sec\":%" PRIu64 "},\"retention\":{\"versions\":16,\"plans\":32}}",
           o->tokens, o->replicas, o->migration, o->down_after_ms, o->per_node, o->per_wave,
           o->bytes_per_sec);
  env_put("config", json);
}

void e2e_field(const char *what, const char *field, char *out, size_t cap) {
  char *v = env_get(what);
  cJSON *j = v ? cJSON_Parse(v) : NULL;
  free(v);
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, field);
  snprintf(out, cap, "%s", cJSON_IsString(f) ? f->valuestring : "");
  cJSON_Delete(j);
}

void e2e_wait_listening(proc *p, const char *hostport, const char *what) {
  char url[64];
  snprintf(url, sizeof url, "http://%s/healthz", hostport);
  double end = harness_now() + 15;
  while (http_get(url, NULL) == 0) {
    ck_assert_msg(proc_running(p), "%s exited at start; see %s", what, p->log);
    ck_assert_msg(harness_now() < end, "%s does not listen on %s", what, hostport);
    harness_sleep_ms(50);
  }
}

void e2e_kv_start(int i) {
  env_agent *a = &env.a[i];
  ck_assert_msg(a->used, "slot %d has no agent", i);
  if (!w.kv_listen[i][0]) {
    snprintf(w.kv_listen[i], sizeof w.kv_listen[i], "127.0.0.1:%d", harness_free_port());
    snprintf(w.kv_log[i], sizeof w.kv_log[i], "%s/kv-%s.log", env.dir, a->id);
  }
  char line[1800], *argv[PROC_ARGS_MAX], etcd[600], client[32], service[40];
  snprintf(client, sizeof client, "kv.%s", a->id);
  snprintf(service, sizeof service, "kv/%s", a->id);
  snprintf(line, sizeof line,
           "%s %s --id %s --listen %s --data-dir %s"
           " --lease-ttl 2s --rescan-interval 100ms --log-level info",
           RING_KV_BIN, e2e_etcd("client", client, service, etcd, sizeof etcd), a->id,
           w.kv_listen[i], a->data);
  env_argv(line, argv);
  ck_assert_int_eq(proc_spawn(&w.kv[i], w.kv_log[i], argv), 0);
  w.kv_up[i] = true;
  e2e_wait_listening(&w.kv[i], w.kv_listen[i], a->id);
}

void e2e_node_start(int i, const char *id, const char *extra) {
  env_agent_start(i, id, extra);
  e2e_kv_start(i);
}

void e2e_node_kill(int i) {
  w.kv_up[i] = false;
  proc_kill(&env.a[i].p);
  proc_kill(&w.kv[i]);
}

void e2e_node_stop(int i) {
  w.kv_up[i] = false;
  ck_assert_int_eq(proc_term(&w.kv[i], 15), 0);
  ck_assert_int_eq(proc_term(&env.a[i].p, 15), 0);
}

int e2e_slot(const char *id) {
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.a[i].used && strcmp(env.a[i].id, id) == 0)
      return i;
  return -1;
}

void e2e_coord_start(int k) { e2e_coord_start_with(k, NULL); }

int e2e_leader(void) {
  char id[64];
  e2e_field("leader", "id", id, sizeof id);
  for (int i = 0; i < E2E_COORDS; i++)
    if (w.coord_used[i] && strcmp(w.coord_id[i], id) == 0)
      return i;
  return -1;
}

int e2e_ringctl(char *out, size_t cap, const char *fmt, ...) {
  char args[512], local[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  if (out == NULL)
    out = local, cap = sizeof local;
  char etcd[600];
  int rc = proc_runf(60, out, cap, "%s %s %s", RINGCTL_BIN,
                     e2e_etcd("operator", "e2e", NULL, etcd, sizeof etcd), args);
  ck_assert_msg(rc >= 0, "ringctl %s did not finish in 60 s", args);
  fprintf(stderr, "ringctl %s -> %d%s%.*s\n", args, rc, *out ? ": " : "", 300, out);
  return rc;
}

ring_table *e2e_table(void) { return env_current_table(); }

uint64_t e2e_version(void) {
  char *v = env_get("version");
  uint64_t n = v ? strtoull(v, NULL, 10) : 0;
  free(v);
  return n;
}

bool e2e_proposed(char id[24], uint32_t *moves) {
  char *v = env_get("plan/proposed");
  cJSON *j = v ? cJSON_Parse(v) : NULL;
  free(v);
  const cJSON *i = cJSON_GetObjectItemCaseSensitive(j, "id");
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "moves_total");
  id[0] = '\0';
  if (cJSON_IsString(i))
    snprintf(id, 24, "%s", i->valuestring);
  if (moves)
    *moves = cJSON_IsNumber(m) ? (uint32_t)m->valuedouble : 0;
  cJSON_Delete(j);
  return id[0] != '\0';
}

void e2e_history_state(const char *id, char state[16], char *reason) {
  char what[64];
  snprintf(what, sizeof what, "plan/history/%s", id);
  e2e_field(what, "state", state, 16);
  if (reason)
    e2e_field(what, "reason", reason, 256);
}

bool e2e_new_proposal(char id[24]) {
  char state[16];
  if (!e2e_proposed(id, NULL))
    return false;
  e2e_history_state(id, state, NULL);
  return state[0] == '\0';
}

bool e2e_active(void) {
  char *v = env_get("plan/active");
  free(v);
  return v != NULL;
}

void e2e_apply(char id[24], double timeout_s) {
  double end = harness_now() + timeout_s;
  for (int tries = 0; tries < 20; tries++) {
    ck_assert_msg(ENV_WAIT(e2e_new_proposal(id), end - harness_now()),
                  "no plan proposed in %.0f s (version %" PRIu64 ")", timeout_s, e2e_version());
    int rc = e2e_ringctl(NULL, 0, "apply %s", id);
    if (rc == 0)
      return;
    ck_assert_msg(rc == 3 || rc == 1, "ringctl apply %s exited %d", id, rc);
    harness_sleep_ms(200);
  }
  ck_abort_msg("no proposed plan could be approved");
}

/* The mod revisions of sizes/n0..n<slots-1> now (0 when absent). */
static void sizes_revs(int slots, int64_t *rev) {
  char what[32];
  for (int i = 0; i < slots; i++) {
    rev[i] = 0;
    snprintf(what, sizeof what, "sizes/n%d", i);
    env_key_meta(what, NULL, &rev[i]);
  }
}

/* How many of the nodes n0..n<slots-1> wrote sizes/ since rev[i]. */
static int sizes_written(int slots, const int64_t *rev) {
  int64_t now[ENV_AGENTS];
  sizes_revs(slots, now);
  int n = 0;
  for (int i = 0; i < slots; i++)
    n += now[i] != rev[i];
  return n;
}

/* An agent writes sizes/ only when a size changed, so "measured after the
 * load" is: every agent wrote once, and then nothing changed for three of
 * its --sizes-every 1 s measures (each measure writes what differs). */
void e2e_sizes_fresh(int slots) {
  int64_t rev[ENV_AGENTS] = {0};
  ck_assert_msg(ENV_WAIT(sizes_written(slots, rev) == slots, 20), "the agents wrote no sizes/");
  double end = harness_now() + 30;
  for (;;) {
    sizes_revs(slots, rev);
    if (HARNESS_HOLDS(sizes_written(slots, rev) == 0, 3))
      return; /* three measures changed nothing: the records are the arcs' sizes now */
    ck_assert_msg(harness_now() < end, "the agents' sizes/ kept changing for 30 s after the load");
  }
}

void e2e_apply_timed(const char *id, e2e_eta *e) {
  char out[1 << 16];
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "plan --json"), 0);
  cJSON *p = cJSON_Parse(out);
  const cJSON *eta = cJSON_GetObjectItemCaseSensitive(p, "eta_s");
  ck_assert_msg(cJSON_IsNumber(eta), "ringctl plan --json gives no eta_s: %.300s", out);
  e->eta = eta->valuedouble;
  e->ideal = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(p, "eta_ideal_s"));
  const char *b = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "eta_bound"));
  snprintf(e->bound, sizeof e->bound, "%s", b ? b : "");
  cJSON_Delete(p);
  double t0 = harness_now();
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "apply --wait %s", id), 0);
  e2e_wait_done(id, 300);
  e->took = harness_now() - t0;
}

void e2e_eta_case(bool repair, uint32_t value_size, e2e_eta *e) {
  static const char *const fast[] = {"--sizes-every 1s", "--sizes-every 1s", "--sizes-every 1s",
                                     "--sizes-every 1s"};
  const e2e_opts o = {.tokens = 1024,
                      .replicas = 3,
                      .per_node = 4,
                      .per_wave = 256,
                      .bytes_per_sec = 40u * value_size,
                      .value_size = value_size};
  e2e_bootstrap_with(&o, 4, 1, fast, NULL);
  e2e_sizes_fresh(4);
  if (repair) {
    e2e_node_kill(0);
    ck_assert_msg(ENV_WAIT(e2e_record_is("n0", "down"), 30), "n0 is not down 30 s after its death");
  } else {
    ck_assert_int_eq(e2e_ringctl(NULL, 0, "drain n0"), 0);
  }
  char id[24];
  ck_assert_msg(ENV_WAIT(e2e_new_proposal(id), 30), "no plan for n0's replicas");
  e2e_apply_timed(id, e);
}

bool e2e_acked_all(uint64_t v) {
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.a[i].used && proc_running(&env.a[i].p) && env_ack(env.a[i].id) < v)
      return false;
  return true;
}

void e2e_wait_done(const char *id, double timeout_s) {
  char state[16], reason[256];
  double start = harness_now(), end = start + timeout_s;
  for (;;) {
    e2e_history_state(id, state, reason);
    if (state[0])
      break;
    ck_assert_msg(harness_now() < end, "plan %s not done in %.0f s (version %" PRIu64 ")", id,
                  timeout_s, e2e_version());
    harness_sleep_ms(100);
  }
  ck_assert_msg(strcmp(state, "done") == 0, "plan %s ended %s: %s", id, state, reason);
  uint64_t v = e2e_version();
  fprintf(stderr, "plan %s done at version %" PRIu64 ", %.1f s after the wait began\n", id, v,
          harness_now() - start);
  ck_assert_msg(ENV_WAIT(e2e_acked_all(v), 20), "not every agent acked version %" PRIu64, v);
}

void e2e_settle(int plans, double timeout_s) {
  for (int k = 0; k < plans; k++) {
    char id[24];
    /* the coordinator (tick 200 ms) proposes within a few ticks of a change */
    if (!ENV_WAIT(e2e_new_proposal(id) || e2e_active(), 1.5))
      return;
    if (e2e_active())
      ck_assert_msg(ENV_WAIT(!e2e_active(), timeout_s), "a run stays active");
    else {
      e2e_apply(id, 10);
      e2e_wait_done(id, timeout_s);
    }
  }
  ck_assert_msg(ENV_WAIT(!e2e_new_proposal((char[24]){0}) && !e2e_active(), 5),
                "still plans after %d", plans);
}

int e2e_node_state(const char *id) {
  ring_table *t = e2e_table();
  int n = t ? ring_table_find_node(t, id) : -1;
  int st = n >= 0 ? (int)ring_table_node_state(t, (uint16_t)n) : -1;
  ring_table_free(t);
  return st;
}

uint32_t e2e_replicas_of(const char *id) {
  ring_table *t = e2e_table();
  int n = t ? ring_table_find_node(t, id) : -1;
  uint32_t r = n >= 0 ? ring_table_node_replicas(t, (uint16_t)n) : 0;
  ring_table_free(t);
  return r;
}

void e2e_record_state(const char *id, char st[16]) {
  char what[96];
  snprintf(what, sizeof what, "nodes/%s", id);
  e2e_field(what, "state", st, 16);
}

bool e2e_record_is(const char *id, const char *state) {
  char st[16];
  e2e_record_state(id, st);
  return strcmp(st, state) == 0;
}

void e2e_kv_alive(void) {
  for (int i = 0; i < ENV_AGENTS; i++) {
    if (!w.kv_up[i] || proc_running(&w.kv[i]))
      continue;
    w.kv_up[i] = false;
    int st = w.kv[i].status;
    file_tail(w.kv_log[i], 20);
    ck_abort_msg("ring-kv %s died: %s %d", env.a[i].id, WIFSIGNALED(st) ? "signal" : "exit status",
                 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  }
}

void e2e_kv_alive_or_kill(proc *p) {
  for (int i = 0; i < ENV_AGENTS; i++)
    if (w.kv_up[i] && !proc_running(&w.kv[i])) {
      proc_kill(p);
      e2e_kv_alive();
    }
}

int e2e_kv_load(char *out, size_t cap, double timeout_s, const char *args) {
  char log[220], line[1400], *argv[PROC_ARGS_MAX], etcd[600];
  snprintf(log, sizeof log, "%s/kv-load.out", env.dir);
  unlink(log);
  snprintf(line, sizeof line, "%s %s --keys %u --value-size %u %s", RING_KV_LOAD_BIN,
           e2e_etcd("reader", "load", NULL, etcd, sizeof etcd), w.o.keys, w.o.value_size, args);
  env_argv(line, argv);
  proc p;
  ck_assert_int_eq(proc_spawn(&p, log, argv), 0);
  double end = harness_now() + timeout_s;
  int rc;
  while ((rc = proc_wait(&p, 0.1)) < 0 && harness_now() < end)
    e2e_kv_alive_or_kill(&p);
  if (rc < 0)
    proc_kill(&p);
  char *text = file_slurp(log);
  snprintf(out, cap, "%s", text);
  free(text);
  fprintf(stderr, "ring-kv-load %s -> %d\n%.*s", args, rc, 1500, out);
  return rc;
}

void e2e_load(void) {
  char out[8192];
  int rc = e2e_kv_load(out, sizeof out, 300, "--load --threads 8");
  ck_assert_msg(rc == 0 && strstr(out, "load ops=") && strstr(out, " errors=0 "),
                "loading the data set failed (exit %d)", rc);
}

void e2e_verify_keys(void) {
  char out[16384];
  int rc = e2e_kv_load(out, sizeof out, 300, "--verify --threads 8");
  ck_assert_msg(rc == 0 && strstr(out, "verify mismatches=0 not_found=0"),
                "the data set does not read back (exit %d)", rc);
}

void e2e_reader_start(void) {
  char line[1400], *argv[PROC_ARGS_MAX], etcd[600];
  snprintf(line, sizeof line,
           "%s %s --keys %u --value-size %u"
           " --ops 1000000000 --duration 3600s --read-ratio 1 --threads 2 --interval 1s"
           /* --ops too: with --duration alone no interval line is printed. --timeout
            * outlasts fault_etcd's 10 s outage: a server whose watcher missed the
            * client's newest version cannot learn it before etcd is back
            * (examples/kv/PROTOCOL.md, "Known limits"). */
           " --timeout 30s",
           RING_KV_LOAD_BIN, e2e_etcd("reader", "load", NULL, etcd, sizeof etcd), w.o.keys,
           w.o.value_size);
  env_argv(line, argv);
  ck_assert_int_eq(proc_spawn(&w.reader, w.reader_log, argv), 0);
}

void e2e_reader_check(void) {
  e2e_kv_alive();
  ck_assert_msg(proc_running(&w.reader), "the reader exited early; see %s", w.reader_log);
  int printed = file_count(w.reader_log, "interval t=");
  ck_assert_msg(ENV_WAIT(file_count(w.reader_log, "interval t=") > printed, 10),
                "the reader printed no interval line in 10 s; see %s", w.reader_log);
  proc_kill(&w.reader);
  char *out = file_slurp(w.reader_log);
  unsigned long long ops = 0, errors = 0, lines = 0;
  for (const char *p = out; (p = strstr(p, "interval t=")) != NULL; p++) {
    unsigned long long o1 = 0, e1 = 0;
    const char *q = strstr(p, " ops=");
    if (q && sscanf(q, " ops=%llu errors=%llu", &o1, &e1) == 2)
      ops += o1, errors += e1, lines++;
  }
  free(out);
  fprintf(stderr, "reader: %llu reads in %llu s, %llu failed\n", ops, lines, errors);
  if (errors || !ops)
    file_tail(w.reader_log, 40);
  ck_assert_msg(ops > 0 && errors == 0,
                "the service did not serve every read (%llu reads, %llu failed)", ops, errors);
}

void e2e_recs_free(e2e_recs *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->r[i].key);
  free(s->r);
  memset(s, 0, sizeof *s);
}

uint64_t e2e_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

void e2e_segment_read(const char *path, e2e_recs *s) {
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)len + 1);
  ck_assert_uint_eq(fread(b, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  ck_assert_msg(len >= 8 && memcmp(b, "RKVSEG1\n", 8) == 0, "%s: no segment magic", path);
  bool ended = false;
  for (long off = 8; off + 24 <= len && !ended;) {
    const uint8_t *h = b + off;
    uint32_t vlen = (uint32_t)e2e_le(h + 16, 4);
    uint16_t klen = (uint16_t)e2e_le(h + 20, 2);
    uint8_t kind = h[22];
    long end = off + 24 + klen + vlen;
    ck_assert_msg(end <= len, "%s: record at %ld runs past the end", path, off);
    uint64_t sum = e2e_le(h, 8);
    ck_assert_msg(XXH3_64bits(h + 8, (size_t)(end - off - 8)) == sum, "%s: bad checksum at %ld",
                  path, off);
    if (kind == 2) {
      ended = true;
    } else {
      if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->r = realloc(s->r, s->cap * sizeof *s->r);
      }
      e2e_rec *r = &s->r[s->n++];
      r->key = strndup((const char *)h + 24, klen);
      r->ts = e2e_le(h + 8, 8);
      r->checksum = sum;
      r->kind = kind;
    }
    off = end;
  }
  ck_assert_msg(ended, "%s: no end marker", path);
  free(b);
}

static int e2e_rec_cmp(const void *a, const void *b) {
  const e2e_rec *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  if (c)
    return c;
  if (x->ts != y->ts) /* newest first */
    return x->ts < y->ts ? 1 : -1;
  return x->checksum < y->checksum ? 1 : x->checksum > y->checksum ? -1 : 0;
}

void e2e_token_records(int i, uint32_t token, e2e_recs *out) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s/arcs/%u", env.a[i].data, token);
  memset(out, 0, sizeof *out);
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "seg-", 4) != 0)
      continue;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    e2e_segment_read(path, out);
  }
  if (d)
    closedir(d);
  if (out->n > 1)
    qsort(out->r, out->n, sizeof *out->r, e2e_rec_cmp);
  size_t k = 0;
  for (size_t j = 0; j < out->n; j++) {
    if (k > 0 && strcmp(out->r[k - 1].key, out->r[j].key) == 0) {
      free(out->r[j].key);
      continue;
    }
    out->r[k++] = out->r[j];
  }
  out->n = k;
}

bool e2e_replicas_same(uint64_t *keys) {
  ring_table *t = e2e_table();
  ck_assert_ptr_nonnull(t);
  const uint32_t T = ring_table_tokens(t), R = ring_table_replicas(t);
  uint64_t total = 0;
  int bad = 0;
  for (uint32_t tok = 0; tok < T; tok++) {
    e2e_recs first = {0};
    int s0 = -1;
    for (uint32_t r = 0; r < R; r++) {
      uint16_t o = ring_table_owner(t, tok, r);
      ck_assert_uint_ne(o, RING_NODE_NONE);
      int s = e2e_slot(ring_table_node_id(t, o));
      ck_assert_int_ge(s, 0);
      e2e_recs cur;
      e2e_token_records(s, tok, &cur);
      if (s0 < 0) {
        first = cur, s0 = s;
        total += cur.n;
        continue;
      }
      bool same = cur.n == first.n;
      for (size_t j = 0; same && j < cur.n; j++)
        same = strcmp(cur.r[j].key, first.r[j].key) == 0 && cur.r[j].ts == first.r[j].ts &&
               cur.r[j].checksum == first.r[j].checksum && cur.r[j].kind == first.r[j].kind;
      if (!same && bad++ < 5)
        fprintf(stderr, "token %u: %s holds %zu keys, %s holds %zu, or they differ\n", tok,
                env.a[s0].id, first.n, env.a[s].id, cur.n);
      e2e_recs_free(&cur);
    }
    e2e_recs_free(&first);
  }
  ring_table_free(t);
  if (keys)
    *keys = total;
  return bad == 0;
}

void e2e_check(bool lossy) {
  e2e_kv_alive();
  ring_table *t = e2e_table();
  ck_assert_ptr_nonnull(t);
  ck_assert_uint_eq(ring_table_pending_count(t), 0);
  uint64_t v = ring_table_version(t);
  ring_table_free(t);
  ck_assert_msg(ENV_WAIT(e2e_acked_all(v), 20), "not every agent acked version %" PRIu64, v);
  char out[4096];
  int rc = e2e_ringctl(out, sizeof out, "verify");
  ck_assert_msg(rc == 0, "ringctl verify exited %d: %s", rc, out);
  if (!lossy) {
    uint64_t keys = 0;
    /* staged writes move into arcs/ and dropped arcs leave within a rescan */
    uint32_t want = w.o.no_data ? 0 : w.o.keys;
    ck_assert_msg(ENV_WAIT(e2e_replicas_same(&keys) && keys == want, 10),
                  "replicas differ or keys are missing (%" PRIu64 " of %u held)", keys, want);
  }
  if (!w.o.no_data)
    e2e_verify_keys();
}

bool e2e_mount_tmpfs(int i, const char *id, uint64_t bytes) {
  env_agent_init(i, id);
  char opts[64];
  snprintf(opts, sizeof opts, "size=%" PRIu64 ",mode=0755", bytes);
  if (mount("tmpfs", env.a[i].data, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) {
    fprintf(stderr, "mount tmpfs on %s: %s\n", env.a[i].data, strerror(errno));
    return false;
  }
  w.mounted[i] = true;
  return true;
}

void e2e_unmount(int i) {
  if (!w.mounted[i])
    return;
  if (umount2(env.a[i].data, 0) != 0 && umount2(env.a[i].data, MNT_DETACH) != 0)
    fprintf(stderr, "umount %s: %s\n", env.a[i].data, strerror(errno));
  w.mounted[i] = false;
}

void e2e_join(int i, const char *nid, char id[24]) {
  e2e_node_start(i, nid, NULL);
  e2e_apply(id, 30);
}

void e2e_finish(const char *id, bool lossy) {
  e2e_wait_done(id, 180);
  e2e_settle(2, 120);
  e2e_check(lossy);
}

TCase *e2e_tcase(const char *name, int members, int timeout_s) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, timeout_s);
  tcase_add_checked_fixture(tc, members == 3 ? e2e_setup3 : e2e_setup1, env_teardown);
  tcase_add_checked_fixture(tc, NULL, e2e_teardown); /* runs before env_teardown */
  return tc;
}

void e2e_add(Suite *s, const char *name, int members, int timeout_s, const TTest *test) {
  TCase *tc = e2e_tcase(name, members, timeout_s);
  tcase_add_test(tc, test);
  suite_add_tcase(s, tc);
}

void e2e_bootstrap(const e2e_opts *o, int n, int coords) {
  e2e_bootstrap_with(o, n, coords, NULL, NULL);
}

void e2e_coord_start_with(int k, const char *extra) {
  if (!w.coord_used[k]) {
    w.coord_used[k] = true;
    snprintf(w.coord_id[k], sizeof w.coord_id[k], "coord-%c", 'a' + k);
    snprintf(w.coord_listen[k], sizeof w.coord_listen[k], "127.0.0.1:%d", harness_free_port());
  }
  char log[220], line[1800], *argv[PROC_ARGS_MAX], etcd[600];
  snprintf(log, sizeof log, "%s/%s.log", env.dir, w.coord_id[k]);
  snprintf(line, sizeof line,
           "%s %s --id %s --listen %s --lease-ttl 2s --tick 200ms --log-level debug %s",
           RING_COORDINATOR_BIN, e2e_etcd("coordinator", w.coord_id[k], NULL, etcd, sizeof etcd),
           w.coord_id[k], w.coord_listen[k], extra ? extra : "");
  env_argv(line, argv);
  ck_assert_int_eq(proc_spawn(&w.coord[k], log, argv), 0);
  e2e_wait_listening(&w.coord[k], w.coord_listen[k], w.coord_id[k]);
}

void e2e_bootstrap_with(const e2e_opts *o, int n, int coords, const char *const *agent_extra,
                        const char *coord_extra) {
  w.o = *o;
  e2e_defaults(&w.o);
  e2e_config_put();
  for (int i = 0; i < n; i++) {
    char id[16];
    snprintf(id, sizeof id, "n%d", i);
    e2e_node_start(i, id, agent_extra ? agent_extra[i] : NULL);
  }
  for (int k = 0; k < coords; k++)
    e2e_coord_start_with(k, coord_extra);
  char plan[24];
  e2e_apply(plan, 30);
  e2e_wait_done(plan, 60);
  e2e_settle(3, 60);
  ring_table *t = e2e_table();
  ck_assert_msg(t != NULL && ring_table_node_count(t) == (uint32_t)n,
                "no first placement of %d nodes", n);
  ring_table_free(t);
  if (!w.o.no_data)
    e2e_load();
}

uint32_t e2e_tokens_of(const char *id, uint32_t *tokens, uint32_t cap) {
  ring_table *t = e2e_table();
  int node = t ? ring_table_find_node(t, id) : -1;
  uint32_t n = 0;
  for (uint32_t tok = 0; node >= 0 && tok < ring_table_tokens(t) && n < cap; tok++)
    for (uint32_t r = 0; r < ring_table_replicas(t); r++)
      if (ring_table_owner(t, tok, r) == (uint16_t)node) {
        tokens[n++] = tok;
        break;
      }
  ring_table_free(t);
  return n;
}

cJSON *e2e_status_json(void) {
  size_t cap = 1 << 20;
  char *out = malloc(cap);
  ck_assert_ptr_nonnull(out);
  char etcd[600];
  int rc = proc_runf(60, out, cap, "%s %s status --json", RINGCTL_BIN,
                     e2e_etcd("reader", "status", NULL, etcd, sizeof etcd));
  cJSON *j = rc == 0 ? cJSON_Parse(out) : NULL;
  if (j == NULL)
    fprintf(stderr, "ringctl status --json -> %d: %.300s\n", rc, out);
  free(out);
  return j;
}
