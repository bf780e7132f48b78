/*
 * test_daemon_log.c: logfmt lines as written: the exact text after the
 * timestamp, quoting and escaping, level filtering, lines cut at the bound
 * that still parse, errno kept, and threads writing through one pipe at
 * once producing only whole lines.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp, pread */
#include "daemon.h"
#include "check_main.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ capture */

static int log_fd = -1;

/* ms as this test expects the log to write it: RFC 3339, UTC, milliseconds. */
static void rfc3339(uint64_t ms, char out[32]) {
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + 19, 13, ".%03dZ", (int)(ms % 1000));
}

static char started[32]; /* when the test began, as a timestamp */

/* Every test logs into a fresh unlinked temporary file. */
static void setup(void) {
  char path[] = "/tmp/ring-log-XXXXXX";
  log_fd = mkstemp(path);
  ck_assert_int_ge(log_fd, 0);
  unlink(path);
  rd_log_init("ringtest", RD_DEBUG, log_fd);
  rfc3339(rd_wall_ms(), started);
}

static void teardown(void) {
  rd_log_init(NULL, RD_INFO, STDERR_FILENO);
  close(log_fd);
}

/* What was logged so far; the caller frees it. */
static char *captured(void) {
  off_t size = lseek(log_fd, 0, SEEK_END);
  char *text = calloc(1, (size_t)size + 1);
  ck_assert_ptr_nonnull(text);
  ck_assert_int_eq(pread(log_fd, text, (size_t)size, 0), size);
  return text;
}

/* Checks that line starts with "ts=YYYY-MM-DDTHH:MM:SS.mmmZ " between the
 * test's start and now (the same shape sorts as text in time order) and
 * returns what follows. */
static const char *after_ts(const char *line) {
  char now[32];
  rfc3339(rd_wall_ms(), now);
  ck_assert_msg(strncmp(line, "ts=", 3) == 0 && line[3 + 24] == ' ', "%s", line);
  char ts[32];
  memcpy(ts, line + 3, 24);
  ts[24] = '\0';
  ck_assert_msg(strcmp(ts, started) >= 0 && strcmp(ts, now) <= 0, "%s not in [%s, %s]", ts, started,
                now);
  return line + 3 + 25;
}

/* The only line logged so far, without its timestamp, is want. */
static void assert_logged(const char *want) {
  char *text = captured();
  ck_assert_str_eq(after_ts(text), want);
  free(text);
}

/* ----------------------------------------------------------------- formats */

START_TEST(plain_line) {
  rd_log(RD_INFO, "became leader", "lease", "7587", "term", "3", NULL);
  assert_logged("level=info comp=ringtest msg=\"became leader\" lease=7587 term=3\n");
}
END_TEST

START_TEST(bare_message_and_no_pairs) {
  rd_log(RD_WARN, "started", NULL);
  assert_logged("level=warn comp=ringtest msg=started\n");
}
END_TEST

START_TEST(quoting_and_escapes) {
  rd_log(RD_ERROR, "m", "space", "a b", "quote", "say \"hi\"", "eq", "a=b", "nl", "one\ntwo", "tab",
         "a\tb", "ctl", "\x01\x7f", "cr", "\r", "empty", "", "null", NULL, NULL);
  assert_logged("level=error comp=ringtest msg=m space=\"a b\" quote=\"say \\\"hi\\\"\" "
                "eq=\"a=b\" nl=\"one\\ntwo\" tab=\"a\\tb\" ctl=\"\\u0001\\u007f\" cr=\"\\r\" "
                "empty=\"\" null=\"\"\n");
}
END_TEST

START_TEST(backslash_and_utf8) {
  /* A backslash alone needs no quotes; inside quotes it is escaped.
   * UTF-8 passes through untouched. */
  rd_log(RD_INFO, "m", "path", "C:\\dir", "both", "a \\b", "utf8", "z\xc3\xbcrich", NULL);
  assert_logged("level=info comp=ringtest msg=m path=C:\\dir both=\"a \\\\b\" "
                "utf8=z\xc3\xbcrich\n");
}
END_TEST

START_TEST(keys_that_would_break_the_format) {
  rd_log(RD_INFO, "m", "a b=c\"d", "v", NULL);
  assert_logged("level=info comp=ringtest msg=m a_b_c_d=v\n");
}
END_TEST

START_TEST(printf_message) {
  rd_logf(RD_DEBUG, "moved %d of %s", 5, "9");
  assert_logged("level=debug comp=ringtest msg=\"moved 5 of 9\"\n");
}
END_TEST

START_TEST(no_component) {
  rd_log_init(NULL, RD_DEBUG, log_fd);
  rd_log(RD_INFO, "x", NULL);
  assert_logged("level=info msg=x\n");
}
END_TEST

START_TEST(levels_filter) {
  rd_log_init("ringtest", RD_WARN, log_fd);
  ck_assert(!rd_log_enabled(RD_DEBUG));
  ck_assert(!rd_log_enabled(RD_INFO));
  ck_assert(rd_log_enabled(RD_WARN));
  ck_assert(rd_log_enabled(RD_ERROR));
  rd_log(RD_INFO, "dropped", NULL);
  rd_logf(RD_DEBUG, "dropped %d", 1);
  rd_log(RD_ERROR, "kept", NULL);
  assert_logged("level=error comp=ringtest msg=kept\n");
}
END_TEST

START_TEST(level_names) {
  ck_assert_int_eq(rd_log_level_parse("debug"), RD_DEBUG);
  ck_assert_int_eq(rd_log_level_parse("info"), RD_INFO);
  ck_assert_int_eq(rd_log_level_parse("WARN"), RD_WARN);
  ck_assert_int_eq(rd_log_level_parse("error"), RD_ERROR);
  ck_assert_int_eq(rd_log_level_parse("verbose"), -1);
  ck_assert_int_eq(rd_log_level_parse(""), -1);
  ck_assert_int_eq(rd_log_level_parse(NULL), -1);
}
END_TEST

START_TEST(errno_kept) {
  errno = EDOM;
  rd_log(RD_INFO, "x", NULL);
  ck_assert_int_eq(errno, EDOM);
}
END_TEST

/* -------------------------------------------------------------- long lines */

/* A logged line: ends with newline, at most 4 KiB, and valid UTF-8. */
static char *one_long_line(void) {
  char *text = captured();
  size_t len = strlen(text);
  ck_assert_uint_le(len, 4096);
  ck_assert_ptr_eq(strchr(text, '\n'), text + len - 1);
  for (const unsigned char *p = (const unsigned char *)text; *p != '\0';) {
    int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : 0;
    ck_assert_int_ne(n, 0);
    for (int i = 1; i < n; i++)
      ck_assert_int_eq(p[i] & 0xC0, 0x80);
    p += n;
  }
  return text;
}

static void assert_ends(const char *text, const char *tail) {
  size_t len = strlen(text), n = strlen(tail);
  ck_assert_uint_ge(len, n);
  ck_assert_str_eq(text + len - n, tail);
}

START_TEST(long_bare_value_cut) {
  char big[10000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  rd_log(RD_INFO, "m", "big", big, "after", "lost", NULL);
  char *text = one_long_line();
  ck_assert_uint_eq(strlen(text), 4096 - (sizeof " truncated=true\n" - 1) + 16);
  assert_ends(text, "aaaa truncated=true\n");
  ck_assert_ptr_null(strstr(text, "after"));
  free(text);
}
END_TEST

START_TEST(long_quoted_value_closes_its_quote) {
  /* three-byte characters and escapes: the cut must split neither */
  char big[9000] = "x ";
  for (size_t i = 2; i + 4 < sizeof big; i += 4)
    memcpy(big + i, "\xe2\x82\xac\n", 4);
  rd_log(RD_INFO, "m", "big", big, NULL);
  char *text = one_long_line();
  assert_ends(text, "\" truncated=true\n");
  const char *last = strstr(text, "\" truncated=true\n") - 1;
  ck_assert_msg(*last == 'n' || (*last & 0xC0) == 0x80, "cut inside a character or escape");
  free(text);
}
END_TEST

START_TEST(long_printf_message_cut) {
  char big[6000];
  memset(big, 'b', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  rd_logf(RD_INFO, "%s", big);
  char *text = one_long_line();
  assert_ends(text, "bbb truncated=true\n");
  free(text);
}
END_TEST

/* ------------------------------------------------------------ many threads */

enum { THREADS = 8, LINES = 400 };

static void *writer(void *arg) {
  int t = (int)(intptr_t)arg;
  char pad[600], tn[8], ln[8];
  for (int i = 0; i < LINES; i++) {
    int n = 100 + (t * 37 + i * 11) % 400; /* lines of different lengths */
    memset(pad, 'a' + t, (size_t)n);
    pad[n] = '\0';
    snprintf(tn, sizeof tn, "%d", t);
    snprintf(ln, sizeof ln, "%d", i);
    rd_log(RD_INFO, "line", "thread", tn, "n", ln, "pad", pad, NULL);
  }
  return NULL;
}

typedef struct sink {
  int fd;      /* the read end of the pipe */
  rd_text all; /* everything read */
} sink;

static void *drain(void *arg) {
  sink *s = arg;
  char buf[4096];
  ssize_t n;
  while ((n = read(s->fd, buf, sizeof buf)) > 0)
    ring__sb_printf(&s->all, "%.*s", (int)n, buf);
  return NULL;
}

/* Checks one line "... msg=line thread=T n=N pad=<length from T, N>"; marks
 * (T, N) seen. */
static void check_line(char *line, bool seen[THREADS][LINES]) {
  int t, i, off = 0;
  const char *rest = after_ts(line);
  ck_assert_msg(
      sscanf(rest, "level=info comp=ringtest msg=line thread=%d n=%d pad=%n", &t, &i, &off) == 2 &&
          off > 0,
      "bad line: %s", line);
  ck_assert(t >= 0 && t < THREADS && i >= 0 && i < LINES && !seen[t][i]);
  seen[t][i] = true;
  size_t want = (size_t)(100 + (t * 37 + i * 11) % 400);
  ck_assert_uint_eq(strspn(rest + off, (char[]){(char)('a' + t), '\0'}), want);
  ck_assert_uint_eq(strlen(rest + off), want);
}

START_TEST(threads_write_whole_lines) {
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  rd_log_init("ringtest", RD_DEBUG, p[1]);
  sink s = {p[0], {0}};
  pthread_t reader, w[THREADS];
  ck_assert_int_eq(pthread_create(&reader, NULL, drain, &s), 0);
  for (int t = 0; t < THREADS; t++)
    ck_assert_int_eq(pthread_create(&w[t], NULL, writer, (void *)(intptr_t)t), 0);
  for (int t = 0; t < THREADS; t++)
    pthread_join(w[t], NULL);
  rd_log_init("ringtest", RD_DEBUG, log_fd);
  close(p[1]);
  pthread_join(reader, NULL);
  close(p[0]);
  ck_assert(!s.all.oom);
  static bool seen[THREADS][LINES];
  memset(seen, 0, sizeof seen);
  int lines = 0;
  for (char *save, *line = strtok_r(s.all.p, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save), lines++)
    check_line(line, seen);
  ck_assert_int_eq(lines, THREADS * LINES);
  free(s.all.p);
}
END_TEST

static Suite *log_suite(void) {
  Suite *s = suite_create("daemon_log");
  TCase *tc = tcase_create("log");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, plain_line);
  tcase_add_test(tc, bare_message_and_no_pairs);
  tcase_add_test(tc, quoting_and_escapes);
  tcase_add_test(tc, backslash_and_utf8);
  tcase_add_test(tc, keys_that_would_break_the_format);
  tcase_add_test(tc, printf_message);
  tcase_add_test(tc, no_component);
  tcase_add_test(tc, levels_filter);
  tcase_add_test(tc, level_names);
  tcase_add_test(tc, errno_kept);
  tcase_add_test(tc, long_bare_value_cut);
  tcase_add_test(tc, long_quoted_value_closes_its_quote);
  tcase_add_test(tc, long_printf_message_cut);
  tcase_add_test(tc, threads_write_whole_lines);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(log_suite()); }
