/* The watch thread: every WATCH_S it closes connections past their time
 * (guard.c) and reads what the trainers of followed runs added: a run
 * directory whose lock a trainer held when the server started is read as
 * it grows (new lines of metrics.jsonl become step messages, a new
 * timeline.json the rendered step) until the lock is released; then the
 * last lines are read and the run gets its end marker.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/serve_internal.h"

#define WATCH_S 0.25

/* Reports r's warnings from index `from` on. */
static void warn_from(kt_server *s, const kt_run *r, size_t from) {
  for (size_t k = from; k < r->n_warnings; k++) kt__serve_warn(s, r->warnings[k]);
}

/* Reads what run i's trainer added; ends the run when its lock is free. */
static void follow_run(kt_server *s, int i) {
  serve_run *sr = &s->runs[i];
  kt_run *r = sr->follow;
  long pid = 0;
  /* whether the writer is gone is asked first: what it wrote before is then all there */
  int gone = !kt_rundir_writer(sr->dir, &pid);
  size_t warned = r->n_warnings, before = r->n_steps;
  kt_run_news news;
  kt_error err = {{0}};
  kt_status st = kt_run_follow(r, &news, &err);
  warn_from(s, r, warned);
  if (r->n_steps > before) kt__serve_add_steps(s, i, r, before);
  if (news.timeline) kt__serve_add_timeline(s, i, r);
  if (st) {
    char msg[sizeof err.msg + 64];
    snprintf(msg, sizeof msg, "%s (no longer followed)", err.msg);
    kt__serve_warn(s, msg);
  }
  if (!gone && !st) return;
  kt__serve_add_end(
      s, i, r,
      st ? "unreadable"
      : r->steps_planned > 0 && r->n_steps > 0 && r->steps[r->n_steps - 1].step >= r->steps_planned
          ? "finished"
          : "ended");
  pthread_mutex_lock(&s->lock);
  sr->follow = NULL; /* the streams never read it: only this thread does */
  pthread_mutex_unlock(&s->lock);
  kt_run_free(r);
  free(r);
}

static void *watch_main(void *arg) {
  kt_server *s = arg;
  pthread_mutex_lock(&s->lock);
  while (!s->watch_stop) {
    pthread_mutex_unlock(&s->lock);
    kt__guard_tick(s);
    for (int i = 0; i < s->n_runs; i++)
      if (s->runs[i].follow) follow_run(s, i);
    pthread_mutex_lock(&s->lock);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(WATCH_S * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    if (!s->watch_stop) pthread_cond_timedwait(&s->watch_wake, &s->lock, &ts);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

kt_status kt__follow_start(kt_server *s, kt_error *err) {
  if (pthread_create(&s->watch, NULL, watch_main, s))
    return kt_fail(err, KT_ERUNTIME, "cannot start the server's watch thread");
  s->watch_started = 1;
  return KT_OK;
}

void kt__follow_stop(kt_server *s) {
  if (!s->watch_started) return;
  pthread_mutex_lock(&s->lock);
  s->watch_stop = 1;
  pthread_cond_broadcast(&s->watch_wake);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->watch, NULL);
  s->watch_started = 0;
}
