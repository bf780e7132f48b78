/* proc_harness.c: the definitions of proc_harness.h (see there). */
#include "proc_harness.h"

void proc_child(const char *log, char *const argv[]) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) /* the parent died before prctl */
    _exit(127);
  int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  int null = open("/dev/null", O_RDONLY);
  if (null >= 0) {
    dup2(null, 0);
    close(null);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execv(argv[0], argv);
  fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
  _exit(127);
}

int proc_spawn(proc *p, const char *log, char *const argv[]) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0)
    proc_child(log, argv);
  char path[sizeof p->log]; /* log may point into *p, which is cleared next */
  snprintf(path, sizeof path, "%s", log ? log : "/dev/null");
  memset(p, 0, sizeof *p);
  p->pid = pid;
  memcpy(p->log, path, sizeof path);
  return 0;
}

bool proc_poll(proc *p) {
  if (p->reaped)
    return true;
  if (p->pid <= 0)
    return false;
  int st;
  if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
    p->status = st;
    p->reaped = true;
    p->pid = 0;
  }
  return p->reaped;
}

bool proc_running(proc *p) { return p->pid > 0 && !proc_poll(p); }

bool proc_frozen(const proc *p) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)p->pid);
  FILE *f = p->pid > 0 ? fopen(path, "r") : NULL;
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f)
    fclose(f);
  buf[n] = '\0';
  const char *end = strrchr(buf, ')'); /* the name may hold spaces and parens */
  return end && end[1] == ' ' && (end[2] == 'T' || end[2] == 't');
}

int proc_wait(proc *p, double timeout_s) {
  double end = harness_now() + timeout_s;
  while (!proc_poll(p)) {
    if (p->pid <= 0 || harness_now() > end)
      return -1;
    harness_sleep_ms(10);
  }
  if (WIFEXITED(p->status))
    return WEXITSTATUS(p->status);
  return WIFSIGNALED(p->status) ? 128 + WTERMSIG(p->status) : -1;
}

void proc_signal(proc *p, int sig) {
  if (p->pid > 0 && !p->reaped)
    kill(p->pid, sig);
}

void proc_kill(proc *p) {
  if (p->pid > 0 && !p->reaped) {
    kill(p->pid, SIGCONT); /* a stopped process dies as well, but be plain about it */
    kill(p->pid, SIGKILL);
    proc_wait(p, 10);
  }
}

int proc_term(proc *p, double timeout_s) {
  proc_signal(p, SIGTERM);
  return proc_wait(p, timeout_s);
}

int proc_run(char *const argv[], double timeout_s, char *out, size_t cap) {
  char path[] = "/tmp/ringkeeper-cmd-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return -1;
  close(fd);
  proc p;
  if (proc_spawn(&p, path, argv) != 0) {
    unlink(path);
    return -1;
  }
  int rc = proc_wait(&p, timeout_s);
  if (rc < 0)
    proc_kill(&p);
  if (out && cap) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, cap - 1, f) : 0;
    out[n] = '\0';
    if (f)
      fclose(f);
  }
  unlink(path);
  return rc;
}

int proc_runf(double timeout_s, char *out, size_t cap, const char *fmt, ...) {
  char line[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  char *argv[PROC_ARGS_MAX];
  int a = 0;
  for (char *save = NULL, *tok = strtok_r(line, " ", &save); tok && a < PROC_ARGS_MAX - 1;
       tok = strtok_r(NULL, " ", &save))
    argv[a++] = tok;
  argv[a] = NULL;
  return proc_run(argv, timeout_s, out, cap);
}

void proc_dir_done(const char *dir, bool passed, const char *keep) {
  if (passed && getenv(keep) == NULL) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
      fprintf(stderr, "could not remove %s\n", dir);
  } else {
    fprintf(stderr, "logs kept in %s\n", dir);
  }
}

size_t proc_buf_write(char *p, size_t s, size_t n, void *ud) {
  proc_buf *b = ud;
  size_t add = s * n;
  if (b->len + add + 1 > b->cap) {
    size_t cap = (b->len + add + 1) * 2;
    char *d = realloc(b->data, cap);
    if (d == NULL)
      return 0;
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, add);
  b->len += add;
  b->data[b->len] = '\0';
  return add;
}

long http_get(const char *url, char **body) {
  CURL *h = curl_easy_init();
  proc_buf b = {0};
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 3000L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, proc_buf_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
  long status = 0;
  if (curl_easy_perform(h) == CURLE_OK)
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(h);
  if (status == 0) {
    free(b.data);
    b.data = NULL;
  } else if (b.data == NULL) {
    b.data = calloc(1, 1);
  }
  if (body)
    *body = b.data;
  else
    free(b.data);
  return status;
}

char *metrics_scrape(const char *hostport) {
  char url[128], *body = NULL;
  snprintf(url, sizeof url, "http://%s/metrics", hostport);
  long st = http_get(url, &body);
  if (st != 200) {
    free(body);
    return NULL;
  }
  return body;
}

/* The labels of a sample line after `name` ("" when none, else "a=..}"
 * up to the value), past the daemons' leading cluster="..." label (every
 * daemon adds it: rd_metrics_finish), or NULL when the line is not name's. */
static const char *sample_labels(const char *line, const char *name, size_t *len) {
  size_t nl = strlen(name);
  if (strncmp(line, name, nl) != 0 || (line[nl] != '{' && line[nl] != ' '))
    return NULL;
  const char *p = line + nl;
  if (strncmp(p, "{cluster=\"", 10) == 0) {
    const char *q = strchr(p + 10, '"');
    if (q == NULL)
      return NULL;
    p = q[1] == ',' ? q + 1 : q + 2; /* at the next label, or past "}" */
  }
  if (*p == ' ')
    return *len = 0, p;
  const char *end = strchr(p, '}');
  if (end == NULL)
    return NULL;
  *len = (size_t)(end - p - 1); /* without the '{' or ',' before and the '}' */
  return p + 1;
}

double metric_value(const char *text, const char *name, const char *labels) {
  size_t want = labels != NULL ? strlen(labels) : 0;
  for (const char *line = text; line && *line;) {
    const char *eol = strchr(line, '\n');
    size_t len;
    const char *got = line[0] != '#' ? sample_labels(line, name, &len) : NULL;
    if (got != NULL && len == want && strncmp(got, labels ? labels : "", want) == 0) {
      const char *v = strchr(got + len, ' ');
      if (v != NULL && (eol == NULL || v < eol))
        return strtod(v + 1, NULL);
    }
    line = eol ? eol + 1 : NULL;
  }
  return NAN;
}

double metric_get(const char *hostport, const char *name, const char *labels) {
  char *text = metrics_scrape(hostport);
  double v = metric_value(text, name, labels);
  free(text);
  return v;
}

char *file_slurp(const char *path) {
  FILE *f = fopen(path, "r");
  proc_buf b = {0};
  char chunk[8192];
  size_t n;
  while (f && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
    proc_buf_write(chunk, 1, n, &b);
  if (f)
    fclose(f);
  return b.data ? b.data : calloc(1, 1);
}

bool file_contains(const char *path, const char *needle) { return file_count(path, needle) > 0; }

int file_count(const char *path, const char *needle) {
  char *s = file_slurp(path);
  int n = 0;
  for (const char *p = strstr(s, needle); p != NULL; p = strstr(p + 1, needle))
    n++;
  free(s);
  return n;
}

void file_tail(const char *path, int lines) {
  char *s = file_slurp(path);
  size_t len = strlen(s);
  const char *p = s + len;
  int seen = 0;
  while (p > s && seen <= lines)
    if (*--p == '\n')
      seen++;
  if (*p == '\n')
    p++;
  fprintf(stderr, "----- %s (last %d lines) -----\n%s----- end of %s -----\n", path, lines, p,
          path);
  free(s);
}
