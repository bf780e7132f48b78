/*
 * signals.c: stop and reload signals handled on a thread of their own.
 *
 * The signals are blocked everywhere and taken with sigwait(), so on_stop
 * and on_reload run as ordinary code on an ordinary thread: they may lock,
 * allocate and log, which a signal handler may not.
 */
#define _POSIX_C_SOURCE 200809L /* sigaction, pthread_sigmask, sigwait */
#include "daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef struct watch {
  void (*on_stop)(void *ud);   /* SIGTERM, SIGINT: called once */
  void (*on_reload)(void *ud); /* SIGHUP; may be NULL */
  void *ud;                    /* both callbacks' argument */
  sigset_t set;                /* the signals waited for */
} watch;

static void *watch_main(void *arg) {
  watch *w = arg;
  bool stopping = false;
  for (;;) {
    int sig;
    if (sigwait(&w->set, &sig) != 0)
      continue;
    if (sig == SIGHUP) {
      rd_log(RD_INFO, "reload requested", "signal", "SIGHUP", NULL);
      if (w->on_reload != NULL)
        w->on_reload(w->ud);
    } else if (!stopping) {
      stopping = true;
      rd_log(RD_INFO, "stop requested", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT", NULL);
      if (w->on_stop != NULL)
        w->on_stop(w->ud);
    }
  }
  return NULL; /* not reached: the thread lives as long as the process */
}

/* Call once, from main, before any thread starts. Returns 0 or an errno
 * value; on failure the signal mask is as before. */
int rd_signals_start(void (*on_stop)(void *ud), void (*on_reload)(void *ud), void *ud) {
  watch *w = calloc(1, sizeof *w);
  if (w == NULL)
    return ENOMEM;
  w->on_stop = on_stop;
  w->on_reload = on_reload;
  w->ud = ud;
  sigemptyset(&w->set);
  sigaddset(&w->set, SIGTERM);
  sigaddset(&w->set, SIGINT);
  sigaddset(&w->set, SIGHUP);
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN; /* a peer that hangs up must not kill the daemon */
  sigaction(SIGPIPE, &ign, NULL);
  sigset_t old;
  int rc = pthread_sigmask(SIG_BLOCK, &w->set, &old);
  pthread_t tid;
  if (rc == 0 && (rc = pthread_create(&tid, NULL, watch_main, w)) == 0)
    return pthread_detach(tid), 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  free(w);
  return rc;
}
