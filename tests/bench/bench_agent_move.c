/*
 * bench_agent_move.c: the agent benchmark as the issue states it: arcs
 * moved, unthrottled, between two ring-agent processes on loopback, next
 * to `cp -r` of the same files on the same disk in the same run, with each
 * agent's peak RSS. bench_arc measures the same transfer inside one
 * process (library calls, no etcd); this one runs the daemons.
 *
 *   bench_agent_move [--quick] [--rounds N] [--parallel N] [--agent PATH]
 *
 * Its own etcd and two agents, a and b (test_agent_env.h: real ring-agent
 * processes; 4 parallel fetches, as when the throttle sets no limit, or
 * --parallel N as throttle.moves_per_node; the ceiling uses as many), on a
 * table of T 256, R 1. Agent a starts holding every arc: 256 arcs of 4
 * files, 1 GiB (--quick: 64 MiB, 1 round; default 3 rounds). In a round,
 * the holder's arcs are copied with `cp -r` (then `sync`) and moved: the
 * version that makes the other agent pending owner of every token is
 * published, and the move is timed from that publish until the receiver
 * has installed all 256 arcs in its arcs/ (polled every 2 ms); the time
 * until progress/<receiver> reports them follows. The disk's ceiling for
 * a durable copy of these files is measured too (bench_disk.h). cp goes
 * first in odd rounds, the move in even ones; each reads a warm source
 * (the holder's files are read just before, since a receiver writes with
 * O_DIRECT and leaves them uncached). The receiver's arcs are
 * then compared byte for byte with cp's copy, the cutover version makes
 * the receiver the owner, and the next round moves the arcs back once the
 * old holder has dropped its copies (1 s grace).
 *
 * The move's CPU is both agents' (user + system, /proc/<pid>/stat), and
 * their user CPU apart: the system part is mostly the disk's and the
 * network's and swings with what the machine did before, while the
 * agents' own work (checksums, signatures, JSON) is user time. The peak
 * RSS is each agent's VmHWM. --agent runs another build's ring-agent
 * (e.g. an older commit's) in this same harness, so two builds compare
 * on their agents alone. Figures only: it fails when the move
 * does (an arc not installed within 5 minutes, or not identical).
 */
#define ENV_TOKENS 256
#include "test_agent_env.h"

#include "bench_disk.h"

#define ARCS ENV_TOKENS
#define FILES 4u

static bool quick;
static unsigned n_rounds = 3;
static unsigned parallel;     /* throttle.moves_per_node; 0: the agents' default */
static const char *agent_bin; /* --agent; NULL: this build's */
static uint64_t version;

/* ----------------------------------------------------------- the agents */

/* CPU seconds of agent i so far (utime + stime); its user part in *user. */
static double agent_cpu_s(int i, double *user) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)env.a[i].p.pid);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* after the command name, which may hold spaces */
  unsigned long long utime = 0, stime = 0;
  ck_assert_int_eq(
      sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime), 2);
  double tick = (double)sysconf(_SC_CLK_TCK);
  *user = (double)utime / tick;
  return (double)(utime + stime) / tick;
}

/* CPU seconds of both agents so far; their user part in *user. */
static double agents_cpu_s(double *user) {
  double ua, ub, c = agent_cpu_s(0, &ua) + agent_cpu_s(1, &ub);
  *user = ua + ub;
  return c;
}

/* Agent i's peak resident set, MiB (VmHWM). */
static double agent_peak_mib(int i) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)env.a[i].p.pid);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  double kib = -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmHWM: %lf kB", &kib) == 1)
      break;
  fclose(f);
  return kib / 1024.0;
}

static void arcs_dir(int i, char out[BENCH_PATH]) { bench_pathf(out, "%s/arcs", env.a[i].data); }

/* How many arcs agent i has installed. */
static uint32_t installed(int i) {
  char dir[BENCH_PATH];
  arcs_dir(i, dir);
  DIR *d = opendir(dir);
  uint32_t n = 0;
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  if (d != NULL)
    closedir(d);
  return n;
}

/* --------------------------------------------------------------- versions */

/* The next version: R 1 over a and b, every token owned by `owner`, and
 * with `pending` (>= 0) as pending owner of every token. */
static void publish(int owner, int pending) {
  ring_table *t = env_table(++version, 2, 1);
  for (uint32_t tok = 0; tok < ENV_TOKENS; tok++) {
    ck_assert_int_eq(ring_table_set_owner(t, tok, 0, (uint16_t)owner), RING_OK);
    if (pending >= 0)
      ck_assert_int_eq(ring_table_add_pending(t, tok, 0, (uint16_t)pending), RING_OK);
  }
  env_publish_free(t);
}

static uint32_t all_tokens[ARCS]; /* 0 .. ARCS-1, filled in main */

static bool reported_all(const char *id) { return env_progress_is(id, version, all_tokens, ARCS); }

/* Wall and CPU seconds of moving every arc from agent `from` to `to`, from
 * the publish until the last one is installed; *reported_s: until
 * progress/<to> says so. */
static void time_move(int from, int to, bench_round *r, double *reported_s) {
  char src[BENCH_PATH];
  arcs_dir(from, src);
  bench_warm(src);
  double u0, c0 = agents_cpu_s(&u0), u1;
  double t0 = bench_now_s(), end = t0 + 300; /* before the publish: agents may start within it */
  publish(from, to);
  while (installed(to) < ARCS) {
    ck_assert_msg(bench_now_s() < end, "%s installed %u of %u arcs in 5 minutes", env.a[to].id,
                  installed(to), ARCS);
    ck_assert_msg(proc_running(&env.a[to].p), "ring-agent %s died", env.a[to].id);
    harness_sleep_ms(2);
  }
  r->move = bench_now_s() - t0;
  r->cpu_move = agents_cpu_s(&u1) - c0;
  r->cpu_user = u1 - u0;
  while (!reported_all(env.a[to].id)) {
    ck_assert_msg(bench_now_s() < end, "progress/%s never listed every arc", env.a[to].id);
    harness_sleep_ms(2);
  }
  *reported_s = bench_now_s() - t0;
}

/* Every arc on agent i is byte-identical to cp's copy under dir. */
static void check_same(int i, const char *dir) {
  char a[BENCH_PATH], c[BENCH_PATH];
  for (uint32_t t = 0; t < ARCS; t++)
    for (uint32_t f = 0; f < FILES; f++) {
      bench_pathf(a, "%s/arcs/%u/part-%u", env.a[i].data, t, f);
      bench_pathf(c, "%s/arcs/%u/part-%u", dir, t, f);
      ck_assert_msg(env_same_file(a, c), "%s differs from %s", a, c);
    }
}

/* ---------------------------------------------------------------- a round */

static void one_round(unsigned k, int from, uint64_t per_file, bench_round *r) {
  int to = 1 - from;
  char src[BENCH_PATH], cpdir[BENCH_PATH], ceildir[BENCH_PATH], cmd[BENCH_PATH];
  arcs_dir(from, src);
  bench_pathf(cpdir, "%s/cp%u", env.dir, k);
  bench_pathf(ceildir, "%s/ceiling%u", env.dir, k);
  double reported;
  if (k % 2 == 0) { /* rounds 1, 3, ...: cp first */
    r->cp = bench_time_cp(src, cpdir);
    time_move(from, to, r, &reported);
  } else {
    time_move(from, to, r, &reported);
    r->cp = bench_time_cp(src, cpdir);
  }
  r->disk =
      bench_time_ceiling(ceildir, ARCS, FILES, per_file, parallel ? parallel : BENCH_AGENT_WORKERS);
  printf("  round %u: %s -> %s, progress/%s complete %.0f ms after the last install\n", k + 1,
         env.a[from].id, env.a[to].id, env.a[to].id, (reported - r->move) * 1e3);
  check_same(to, cpdir);
  bench_pathf(cmd, "rm -rf '%s' '%s'", cpdir, ceildir);
  bench_run_s(cmd);
  publish(to, -1); /* the cutover: the old holder drops its copies after the grace */
  ck_assert_msg(ENV_WAIT(installed(from) == 0, 60), "%s kept arcs it no longer owns",
                env.a[from].id);
}

START_TEST(move_between_agents) {
  uint64_t total = quick ? 64ull << 20 : 1ull << 30, per_file = total / (ARCS * FILES);
  env.agent_bin = agent_bin;
  env_config(1, parallel, 0); /* moves_per_node: 0 is the agents' default, BENCH_AGENT_WORKERS */
  env_agent_init(0, "a");
  env_agent_init(1, "b");
  char src[BENCH_PATH];
  arcs_dir(0, src);
  ck_assert_int_eq(mkdir(src, 0755), 0);
  bench_make_arcs(src, ARCS, FILES, per_file);
  env_agent_start(0, "a", "--log-level info");
  env_agent_start(1, "b", "--log-level info");
  publish(0, -1);
  ck_assert(ENV_WAIT(env_ack("a") == version && env_ack("b") == version, 10));

  double mb = (double)(per_file * ARCS * FILES) / 1e6;
  printf("bench_agent_move: %.0f MB in %u arcs of %u files between two ring-agents on loopback, "
         "unthrottled, %u parallel fetches, %u rounds\n",
         mb, ARCS, FILES, parallel ? parallel : BENCH_AGENT_WORKERS, n_rounds);
  bench_round rs[BENCH_ROUNDS_MAX] = {0};
  for (unsigned k = 0; k < n_rounds; k++)
    one_round(k, (int)(k % 2), per_file, &rs[k]);
  bench_report_rounds(rs, n_rounds, mb, "agents", "both agents, from publish to last install");
  printf("  peak RSS a %7.1f MiB, b %.1f MiB (target <= 32 MiB; each sent and received)\n",
         agent_peak_mib(0), agent_peak_mib(1));
  fflush(stdout);
  env_pass();
}
END_TEST

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0)
      quick = true, n_rounds = 1;
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      n_rounds = (unsigned)atoi(argv[++i]);
    else if (strcmp(argv[i], "--parallel") == 0 && i + 1 < argc)
      parallel = (unsigned)atoi(argv[++i]);
    else if (strcmp(argv[i], "--agent") == 0 && i + 1 < argc)
      agent_bin = argv[++i];
    else
      bench_die("usage", "bench_agent_move [--quick] [--rounds N] [--parallel N] [--agent PATH]");
  }
  if (n_rounds < 1 || n_rounds > BENCH_ROUNDS_MAX)
    bench_die("--rounds", "1 to 16");
  if (parallel > BENCH_DISK_THREADS_MAX)
    bench_die("--parallel", "0 to 16");
  for (uint32_t t = 0; t < ARCS; t++)
    all_tokens[t] = t;
  Suite *s = suite_create("bench_agent_move");
  env_add(s, "move_between_agents", 1800, move_between_agents);
  return run_suite_as(s, 1);
}
