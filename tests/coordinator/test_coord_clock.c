/*
 * test_coord_clock.c: no decision rests on a wall-clock difference. The
 * coordinator runs under libfaketime (Debian `faketime`):
 *   - wall_behind: its wall clock 10 minutes behind the kernel's, the
 *     monotonic clock real (FAKETIME_DONT_FAKE_MONOTONIC=1, the case of the
 *     incident);
 *   - stepped_back: every clock of the process started an hour in the past
 *     (FAKETIME="@..."), so the lost_ms it writes are behind the agents';
 *   - future_lost_ms: a plain coordinator takes over records whose lost_ms
 *     is far in the future or would wrap (written by hand).
 * In each, with live agents and one gone: no live node is marked down, the
 * gone one no earlier than down_after after the coordinator could see it
 * gone; with etcd stopped the coordinator idles (stepped_back: CPU time over
 * 5 s under 0.5 s, /proc/<pid>/stat) and stops on SIGTERM within 5 s.
 */
#include "coord_env.h"

#include <unistd.h>

#define DOWN_AFTER_MS 3000

static const char *libfaketime(void) {
  static const char *paths[] = {"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                                "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
                                "/usr/lib/faketime/libfaketime.so.1"};
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
    if (access(paths[i], R_OK) == 0)
      return paths[i];
  ck_abort_msg("libfaketime not found: install Debian's faketime (deploy/install-deps.sh)");
  return NULL;
}

/* Starts coordinator 0 as env_coord_start does, under /usr/bin/env with
 * LD_PRELOAD=libfaketime FAKETIME=spec (and wall only when asked), so the
 * pid is the coordinator's own. */
static void coord_start_faked(const char *spec, bool wall_only) {
  snprintf(env.coord_id[0], sizeof env.coord_id[0], "coord-a");
  snprintf(env.listen[0], sizeof env.listen[0], "127.0.0.1:%d", harness_free_port());
  char log[200], preload[200], faketime[96], port[40];
  snprintf(log, sizeof log, "%s/coord-a.log", env.dir);
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s", libfaketime());
  snprintf(faketime, sizeof faketime, "FAKETIME=%s", spec);
  snprintf(port, sizeof port, "%.31s", env.listen[0]);
  char *argv[] = {"/usr/bin/env",
                  preload,
                  faketime,
                  wall_only ? "FAKETIME_DONT_FAKE_MONOTONIC=1" : "FAKETIME_NO_CACHE=0",
                  RING_COORDINATOR_BIN,
                  "--endpoints",
                  env.etcd.endpoints,
                  "--cluster",
                  ENV_CLUSTER,
                  "--id",
                  "coord-a",
                  "--listen",
                  port,
                  "--lease-ttl",
                  "2s",
                  "--log-level",
                  "debug",
                  "--tick",
                  "200ms",
                  "--auto-apply",
                  NULL};
  ck_assert_int_eq(proc_spawn(&env.coord[0], log, argv), 0);
  char body[256];
  double end = harness_now() + 10;
  while (env_healthz(0, body, sizeof body) == 0) {
    ck_assert_msg(proc_running(&env.coord[0]), "faked ring-coordinator exited at start; see %s",
                  log);
    ck_assert_msg(harness_now() < end, "faked ring-coordinator does not listen");
    harness_sleep_ms(50);
  }
}

static void agents(int n) {
  env_config k = {.tokens = 256, .replicas = 2, .down_after_ms = DOWN_AFTER_MS, .auto_apply = true};
  env_config_put(&k);
  for (int i = 1; i <= n; i++) {
    char id[16], zone[16];
    snprintf(id, sizeof id, "a%d", i);
    snprintf(zone, sizeof zone, "z%d", (i - 1) % 2);
    env_agent(id, zone);
  }
}

static void placed(void) {
  env_wait_done(1, 60);
  uint64_t v = env_version();
  WAIT_UNTIL(env_all_acked(v), 10, "not every agent acked version %llu", (unsigned long long)v);
}

/* Whether no live node (a1 .. a<live>) is down. */
static bool none_down(int live) {
  for (int i = 1; i <= live; i++) {
    char id[16];
    snprintf(id, sizeof id, "a%d", i);
    if (env_node_is(id, "down")) {
      fprintf(stderr, "live node %s was marked down\n", id);
      return false;
    }
  }
  return true;
}

static void live_not_down(int live) { ck_assert(none_down(live)); }

/* Waits until `id` is down, checking every 50 ms that no live node is;
 * fails if it goes down before t0 + down_after. */
static void down_not_early(int live, const char *id, double t0) {
  double end = t0 + 30;
  while (!env_node_is(id, "down")) {
    live_not_down(live);
    ck_assert_msg(harness_now() < end, "%s is not down 30 s after it went", id);
    harness_sleep_ms(50);
  }
  double took = harness_now() - t0;
  ck_assert_msg(took >= DOWN_AFTER_MS / 1000.0,
                "%s went down %.2f s after the coordinator could see it gone; down_after is %.1f s",
                id, took, DOWN_AFTER_MS / 1000.0);
  live_not_down(live);
}

/* CPU seconds (user + system) of pid. */
static double cpu_s(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = '\0';
  char *p = strrchr(buf, ')'); /* comm may hold spaces */
  ck_assert_ptr_nonnull(p);
  unsigned long ut = 0, st = 0;
  /* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
   * stime */
  ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st),
                   2);
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* etcd goes away: the coordinator idles and stops on SIGTERM within 5 s. */
static void etcd_gone_idle_and_stop(void) {
  etcd_member_signal(&env.etcd, 0, SIGKILL);
  /* lease lost, watch and campaign failing */
  WAIT_UNTIL(env_metric(0, "ring_coordinator_leader", "") == 0, 15,
             "the coordinator still leads with etcd gone");
  ck_assert(proc_running(&env.coord[0]));
  pid_t pid = env.coord[0].pid;
  double c0 = cpu_s(pid);
  ck_assert(HARNESS_HOLDS(cpu_s(pid) - c0 < 0.5 && proc_running(&env.coord[0]), 5.0));
  double used = cpu_s(pid) - c0;
  fprintf(stderr, "coordinator CPU over 5 s with etcd stopped: %.2f s\n", used);
  ck_assert_msg(used < 0.5, "the coordinator used %.2f s of CPU in 5 s with etcd stopped", used);
  double t = harness_now();
  int rc = proc_term(&env.coord[0], 5);
  ck_assert_msg(rc == 0, "SIGTERM: exit %d after %.1f s (-1: still running after 5 s)", rc,
                harness_now() - t);
}

START_TEST(wall_behind) {
  agents(5);
  coord_start_faked("-10m", true);
  placed();
  /* a lost_ms written "in the past" changes nothing */
  ck_assert(HARNESS_HOLDS(none_down(4), DOWN_AFTER_MS / 1000.0 + 1.0));
  double t0 = harness_now();
  ck_assert_int_eq(fake_agent_kill(env_agent_find("a5")), RING_OK);
  down_not_early(4, "a5", t0);
  env_node n;
  ck_assert(env_node_read("a5", &n));
  ck_assert_double_gt(n.lost_ms, 0);
  /* Every wait with etcd gone is a relative timeout (the watch's backoff
   * sleeps in curl_multi_poll), so a faked wall clock cannot make it spin. */
  etcd_gone_idle_and_stop();
  env_pass();
}
END_TEST

START_TEST(stepped_back) {
  agents(5);
  char spec[64];
  time_t past = time(NULL) - 3600;
  struct tm tm;
  gmtime_r(&past, &tm);
  strftime(spec, sizeof spec, "@%Y-%m-%d %H:%M:%S", &tm);
  setenv("TZ", "UTC", 1); /* the spec is UTC; the coordinator inherits TZ */
  coord_start_faked(spec, false);
  placed();
  live_not_down(4);
  double t0 = harness_now();
  ck_assert_int_eq(fake_agent_kill(env_agent_find("a5")), RING_OK);
  down_not_early(4, "a5", t0);
  etcd_gone_idle_and_stop();
  env_pass();
}
END_TEST

/* Rewrites nodes/<id>'s lost_ms by hand. */
static void set_lost_ms(const char *id, double lost_ms) {
  char what[64];
  snprintf(what, sizeof what, "nodes/%s", id);
  cJSON *o = env_json(what);
  ck_assert_ptr_nonnull(o);
  cJSON_ReplaceItemInObjectCaseSensitive(o, "lost_ms", cJSON_CreateNumber(lost_ms));
  char *v = cJSON_PrintUnformatted(o);
  env_put(what, v);
  free(v);
  cJSON_Delete(o);
}

START_TEST(future_lost_ms) {
  agents(6);
  env_coord_start(0, "coord-a", "--auto-apply");
  placed();
  proc_kill(&env.coord[0]); /* nobody leads while the records are edited */
  ck_assert_int_eq(fake_agent_kill(env_agent_find("a5")), RING_OK);
  ck_assert_int_eq(fake_agent_kill(env_agent_find("a6")), RING_OK);
  WAIT_UNTIL(!env_exists("alive/a5") && !env_exists("alive/a6"), 10, "alive/ keys still there");
  double now_ms = (double)time(NULL) * 1000;
  set_lost_ms("a5", now_ms + 10.0 * 365 * 86400 * 1000); /* ten years ahead */
  set_lost_ms("a6", 9007199254740991.0);                 /* 2^53-1: now - lost_ms wraps */
  char old[64];                                          /* the old leader key expires */
  WAIT_UNTIL((env_leader(old), old[0] == '\0'), 15, "the old leader key stays");
  double t0 = harness_now();
  env_coord_start(0, "coord-b", "--auto-apply");
  WAIT_UNTIL(env_leader_index() == 0, 10, "the new coordinator does not lead");
  down_not_early(4, "a5", t0);
  down_not_early(4, "a6", t0);
  env_pass();
}
END_TEST

/* libfaketime cannot be preloaded into a sanitizer build (its clock_gettime
 * recurses into the sanitizer runtime's interceptors before either is set
 * up, and the coordinator never starts), so the cases that fake the clock
 * run in the plain build only; future_lost_ms runs in every build. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FAKETIME_USABLE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FAKETIME_USABLE 0
#endif
#endif
#ifndef FAKETIME_USABLE
#define FAKETIME_USABLE 1
#endif

int main(void) {
  const env_test faked[] = {{wall_behind, 180}, {stepped_back, 180}, {future_lost_ms, 180}};
  const env_test plain[] = {{future_lost_ms, 180}};
  if (!FAKETIME_USABLE)
    fprintf(stderr, "test_coord_clock: sanitizer build: wall_behind and stepped_back run in "
                    "the plain build (libfaketime cannot be preloaded here)\n");
  return FAKETIME_USABLE ? env_main("coord_clock", faked, 3) : env_main("coord_clock", plain, 1);
}
