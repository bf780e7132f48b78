/* etcd_harness.c: the definitions of etcd_harness.h (see there). */
#include "etcd_harness.h"

int harness_free_port(void) {
  static unsigned next;
  unsigned lo = 32768;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f != NULL) {
    if (fscanf(f, "%u", &lo) != 1)
      lo = 32768;
    fclose(f);
  }
  if (lo <= 12000)
    lo = 32768;                   /* an unusual range: keep to the usual gap below it */
  unsigned span = lo - 1 - 10000; /* ports 10000 .. lo-1 */
  if (next == 0)
    next = (unsigned)getpid() * 7919u + (unsigned)time(NULL);
  for (unsigned tries = 0; tries < span; tries++) {
    int port = (int)(10000 + (next++ % span));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0) {
      perror("harness_free_port");
      abort();
    }
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    if (ok)
      return port;
  }
  fprintf(stderr, "harness_free_port: no free port below %u\n", lo);
  abort();
}

double harness_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void harness_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

size_t harness_sink(char *p, size_t s, size_t n, void *ud) {
  (void)p;
  (void)ud;
  return s * n;
}

bool harness_serving(const etcd_member *m) {
  CURL *h = curl_easy_init();
  char url[96];
  snprintf(url, sizeof url, "%s/v3/kv/range", m->url);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{\"key\":\"AA==\"}");
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 1000L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, harness_sink);
  long status = 0;
  CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(h);
  return rc == CURLE_OK && (status == 200 || status == 401 || status == 400);
}

void harness_spawn(etcd_cluster *c, int i, const char *state) {
  etcd_member *m = &c->m[i];
  char log[320], client[64], peer[64], extra[256];
  snprintf(log, sizeof log, "%s/etcd.log", m->dir);
  snprintf(client, sizeof client, "http://127.0.0.1:%d", m->client_port);
  snprintf(peer, sizeof peer, "http://127.0.0.1:%d", m->peer_port);
  snprintf(extra, sizeof extra, "%s", c->extra);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    char *argv[40];
    int a = 0;
    char data[320];
    snprintf(data, sizeof data, "%s/data", m->dir);
    argv[a++] = "etcd";
    argv[a++] = "--name", argv[a++] = m->name;
    argv[a++] = "--data-dir", argv[a++] = data;
    argv[a++] = "--listen-client-urls", argv[a++] = client;
    argv[a++] = "--advertise-client-urls", argv[a++] = client;
    argv[a++] = "--listen-peer-urls", argv[a++] = peer;
    argv[a++] = "--initial-advertise-peer-urls", argv[a++] = peer;
    argv[a++] = "--initial-cluster", argv[a++] = c->initial_cluster;
    argv[a++] = "--initial-cluster-state", argv[a++] = (char *)state;
    argv[a++] = "--heartbeat-interval", argv[a++] = "50";
    argv[a++] = "--election-timeout", argv[a++] = "500";
    argv[a++] = "--logger", argv[a++] = "zap";
    argv[a++] = "--log-level", argv[a++] = "warn";
    for (char *save = NULL, *tok = strtok_r(extra, " ", &save); tok && a < 38;
         tok = strtok_r(NULL, " ", &save))
      argv[a++] = tok;
    argv[a] = NULL;
    execvp("etcd", argv);
    perror("exec etcd");
    _exit(127);
  }
  m->pid = pid;
}

bool harness_wait(etcd_cluster *c, int i, double timeout_s) {
  double end = harness_now() + timeout_s;
  while (harness_now() < end) {
    if (harness_serving(&c->m[i]))
      return true;
    int status;
    if (waitpid(c->m[i].pid, &status, WNOHANG) == c->m[i].pid) {
      c->m[i].pid = 0;
      return false;
    }
    harness_sleep_ms(50);
  }
  return false;
}

/* Whether member m's log says a port it was given is taken: ports are
 * picked free (harness_free_port) but bound only when etcd starts, so a
 * process running beside this test can take one in between. */
static bool port_taken(const etcd_member *m) {
  char path[320], buf[8192];
  snprintf(path, sizeof path, "%s/etcd.log", m->dir);
  FILE *f = fopen(path, "r");
  size_t n = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f != NULL)
    fclose(f);
  buf[n] = '\0';
  return strstr(buf, "address already in use") != NULL;
}

/* One try: n members on freshly picked ports. Returns the member that did
 * not start, or -1 when all serve. */
static int start_once(etcd_cluster *c, int n, const char *extra) {
  memset(c, 0, sizeof *c);
  c->n = n;
  snprintf(c->extra, sizeof c->extra, "%s", extra ? extra : "");
  snprintf(c->base, sizeof c->base, "/tmp/ringkeeper-etcd-XXXXXX");
  if (mkdtemp(c->base) == NULL) {
    perror("mkdtemp");
    abort();
  }
  size_t off = 0, eoff = 0;
  for (int i = 0; i < n; i++) {
    etcd_member *m = &c->m[i];
    m->client_port = harness_free_port();
    m->peer_port = harness_free_port();
    snprintf(m->name, sizeof m->name, "m%d", i);
    snprintf(m->dir, sizeof m->dir, "%s/%s", c->base, m->name);
    snprintf(m->url, sizeof m->url, "http://127.0.0.1:%d", m->client_port);
    mkdir(m->dir, 0700);
    off += (size_t)snprintf(c->initial_cluster + off, sizeof c->initial_cluster - off,
                            "%s%s=http://127.0.0.1:%d", i ? "," : "", m->name, m->peer_port);
    eoff += (size_t)snprintf(c->endpoints + eoff, sizeof c->endpoints - eoff, "%s%s", i ? "," : "",
                             m->url);
  }
  for (int i = 0; i < n; i++)
    harness_spawn(c, i, "new");
  for (int i = 0; i < n; i++)
    if (!harness_wait(c, i, 30))
      return i;
  return -1;
}

void etcd_cluster_start(etcd_cluster *c, int n, const char *extra) {
  for (int attempt = 1;; attempt++) { /* bounded: a taken port is the only retry */
    int failed = start_once(c, n, extra);
    if (failed < 0)
      return;
    bool raced = port_taken(&c->m[failed]);
    if (!raced || attempt == 5) {
      fprintf(stderr, "etcd member %d did not start; see %s/etcd.log\n", failed, c->m[failed].dir);
      abort();
    }
    fprintf(stderr, "etcd member %d: a port picked free was taken meanwhile; on others again\n",
            failed);
    etcd_cluster_stop(c);
  }
}

void etcd_member_signal(etcd_cluster *c, int i, int sig) {
  if (c->m[i].pid <= 0)
    return;
  kill(c->m[i].pid, sig);
  if (sig == SIGKILL || sig == SIGTERM) {
    waitpid(c->m[i].pid, NULL, 0);
    c->m[i].pid = 0;
  }
}

bool etcd_member_restart(etcd_cluster *c, int i) {
  harness_spawn(c, i, "existing");
  return harness_wait(c, i, 30);
}

void etcd_cluster_stop(etcd_cluster *c) {
  for (int i = 0; i < c->n; i++)
    etcd_member_signal(c, i, SIGKILL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->base);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", c->base);
}

int etcdctl(const etcd_cluster *c, const char *fmt, ...) {
  char args[1024], cmd[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "ETCDCTL_API=3 etcdctl --endpoints=%s%s%s %s >/dev/null 2>&1",
           c->endpoints, c->root_password[0] ? " --user root:" : "", c->root_password, args);
  return system(cmd);
}

void etcd_cluster_auth_on(etcd_cluster *c, const char *root_password) {
  if (etcdctl(c, "user add root:%s", root_password) != 0 || etcdctl(c, "auth enable") != 0) {
    fprintf(stderr, "etcd_cluster_auth_on: etcdctl failed\n");
    abort();
  }
  snprintf(c->root_password, sizeof c->root_password, "%s", root_password);
}

int etcd_snapshot_save(const etcd_cluster *c, int i, const char *path) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "ETCDCTL_API=3 etcdctl --endpoints=%s%s%s snapshot save '%s' >/dev/null 2>&1",
           c->m[i].url, c->root_password[0] ? " --user root:" : "", c->root_password, path);
  return system(cmd);
}

bool etcd_member_restore(etcd_cluster *c, int i, const char *path) {
  etcd_member *m = &c->m[i];
  char cmd[4096];
  etcd_member_signal(c, i, SIGKILL);
  snprintf(cmd, sizeof cmd,
           "mv '%s/data' '%s/data.before-restore' && ETCDCTL_API=3 etcdctl snapshot restore '%s'"
           " --data-dir '%s/data' --name %s --initial-cluster '%s'"
           " --initial-advertise-peer-urls http://127.0.0.1:%d >>'%s/etcd.log' 2>&1",
           m->dir, m->dir, path, m->dir, m->name, c->initial_cluster, m->peer_port, m->dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "snapshot restore failed; see %s/etcd.log\n", m->dir);
    return false;
  }
  return etcd_member_restart(c, i);
}
