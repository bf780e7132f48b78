/*
 * proc_harness.h: daemons and commands as child processes in integration
 * tests. A daemon is spawned with its argv and a log file that takes its
 * stdout and stderr; it dies with the test process (PR_SET_PDEATHSIG), so a
 * crashed test leaves nothing behind. The test can kill it (-9), freeze and
 * thaw it (SIGSTOP / SIGCONT), stop it (SIGTERM) and wait for its exit with
 * a timeout, run a command to completion capturing what it prints, and
 * scrape a daemon's /metrics and /healthz over HTTP (libcurl). Clocks and
 * free ports come from etcd_harness.h: a daemon test has an etcd anyway.
 *
 * Sections: processes; commands; HTTP and metrics; log files.
 */
#ifndef RING_PROC_HARNESS_H
#define RING_PROC_HARNESS_H

#include "etcd_harness.h" /* first: _GNU_SOURCE; harness_now, harness_sleep_ms */

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROC_ARGS_MAX 48

/* ------------------------------------------------------------ processes */

typedef struct proc {
  pid_t pid;     /* 0 when not running (never started, or reaped) */
  int status;    /* wait status once reaped */
  bool reaped;   /* status is valid */
  char log[320]; /* stdout and stderr of the process */
} proc;

/* The child's half of a spawn: dies with the parent, output to `log`
 * (appended; /dev/null when NULL), then exec. Never returns. */
void proc_child(const char *log, char *const argv[]);

/* Starts argv (argv[0] a path, NULL-terminated) with its output going to
 * log. Returns 0, or -1 when fork fails (p untouched). */
int proc_spawn(proc *p, const char *log, char *const argv[]);

/* Reaps p if it has exited; true when it is (now) reaped. */
bool proc_poll(proc *p);

/* True while p runs (started and not exited). */
bool proc_running(proc *p);

/* True while p is stopped by a signal (SIGSTOP: state T in /proc). */
bool proc_frozen(const proc *p);

/* Waits up to timeout_s for p to exit. Returns its exit code, 128 + signal
 * when a signal ended it, or -1 on timeout (p still running). */
int proc_wait(proc *p, double timeout_s);

void proc_signal(proc *p, int sig);

/* kill -9 and reap. */
void proc_kill(proc *p);

/* SIGTERM, then waits up to timeout_s; returns as proc_wait. A process that
 * does not exit in time is left running (the caller decides; proc_kill). */
int proc_term(proc *p, double timeout_s);

/* ------------------------------------------------------------- commands */

/* Runs argv to completion with output (stdout and stderr together) into
 * out[0..cap) (NUL-terminated; truncated if need be). Returns the exit code,
 * 128 + signal, or -1 when it did not finish in timeout_s (it is killed). */
int proc_run(char *const argv[], double timeout_s, char *out, size_t cap);

/* Splits a printf-formatted command line on spaces into argv (no quoting:
 * test arguments have no spaces) and runs it as proc_run. */
int proc_runf(double timeout_s, char *out, size_t cap, const char *fmt, ...);

/* ---------------------------------------------------- HTTP and metrics */

typedef struct proc_buf {
  char *data;
  size_t len, cap;
} proc_buf;

/* libcurl's write callback appending to the proc_buf ud (NUL-terminated). */
size_t proc_buf_write(char *p, size_t s, size_t n, void *ud);

/* GETs url. Returns the HTTP status (0 when nothing answered) and, when
 * body is not NULL, a malloc()'ed NUL-terminated body the caller frees
 * (NULL when nothing answered). */
long http_get(const char *url, char **body);

/* The /metrics text of the daemon listening on host:port (malloc()'ed, the
 * caller frees), or NULL when it does not answer 200. */
char *metrics_scrape(const char *hostport);

/* The value of sample `name` with exactly the label text `labels` (e.g.
 * `state="active"`, or "" for none) in a Prometheus text exposition; NaN
 * when absent (or text is NULL). */
double metric_value(const char *text, const char *name, const char *labels);

/* Scrapes and reads one sample; NaN when the daemon or the sample is not
 * there. */
double metric_get(const char *hostport, const char *name, const char *labels);

/* ------------------------------------------------------------ log files */

/* The whole file, malloc()'ed and NUL-terminated ("" when unreadable). */
char *file_slurp(const char *path);

/* True when the file contains needle. */
bool file_contains(const char *path, const char *needle);

/* How many times the file contains needle. */
int file_count(const char *path, const char *needle);

/* Copies the last `lines` lines of a file to stderr, framed with its name:
 * what a failed test shows of a daemon's log. */
void file_tail(const char *path, int lines);

/* A test's directory (logs, data) at its end: removed when the test passed
 * and the environment variable `keep` is unset, else kept and named on
 * stderr. */
void proc_dir_done(const char *dir, bool passed, const char *keep);

#endif /* RING_PROC_HARNESS_H */
