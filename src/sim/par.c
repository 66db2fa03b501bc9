/* A large compute-only simulation on two threads (sim/state.h).
 *
 * The ranks are split in two contiguous halves of about as many actions
 * each; a thread advances its half as the one-thread run advances all
 * ranks, with its own table of the results made and read within the half.
 * A result read on the other side goes through a channel slot: its time,
 * published once (release), read by the consumer (acquire). A rank whose
 * action finds its slot empty is parked on it; its thread looks at the
 * parked ranks' slots every few visits and whenever it has nothing else
 * to run. An action's start only depends on the times of finished
 * results, so the answer is the one-thread run's, bit for bit.
 *
 * A thread with nothing to run and ranks parked waits for the other to
 * publish. Both waiting, each having seen all the other published, is a
 * deadlock: the run stops and the one-thread run reports it, as it does
 * out of memory. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#ifndef __wasi__
#include <pthread.h>
#endif

#include "sim/state.h"

size_t kt__sim_par_min_actions = (size_t)1 << 22;
int kt__sim_par_min_ranks = 512;
_Atomic size_t kt__sim_par_runs;

#ifdef __wasi__
int kt__sim_par_run(sim_state *st) { /* wasm32-wasi has no threads */
  (void)st;
  return 0;
}

int kt__sim_par_wanted(const kt_schedule *s) {
  (void)s;
  return 0;
}

void kt__sim_par_notify(kt__sim_half *h) { (void)h; }
#else

/* Slots in all channels at most (8 bytes each), and visits between looks
 * at the parked ranks' slots. */
#define MAX_SLOTS ((size_t)1 << 22)
#define POLL_EVERY 16
/* Looks at the other half before sleeping until it notifies, a pause
 * between looks: about 10 us on x86, where the other half, when it runs,
 * publishes within a few (a sleep and its wake-up cost tens). */
#define SPINS 256
#if defined(__x86_64__) || defined(__i386__)
#define PAUSE() __builtin_ia32_pause()
#else
#define PAUSE() ((void)0)
#endif

typedef struct par_run par_run;

typedef struct {
  sim_state st; /* the shared tables, its own pairs, queue and half */
  kt__sim_half h;
  par_run *run;
  int id, failed;
} half_run;

struct par_run {
  half_run half[2];
  int *chan_of;
  _Atomic uint64_t *chan;
  _Atomic int stop;   /* a deadlock or out of memory: both threads end */
  pthread_mutex_t mu; /* a sleeping half waits on cv under mu */
  pthread_cond_t cv;
  int synced; /* mu and cv made */
};

void kt__sim_par_notify(kt__sim_half *h) {
  half_run *hr = (half_run *)(void *)((char *)h - offsetof(half_run, h));
  par_run *run = hr->run;
  if (!atomic_load(&run->half[1 - hr->id].h.sleeping)) return;
  pthread_mutex_lock(&run->mu);
  pthread_cond_broadcast(&run->cv);
  pthread_mutex_unlock(&run->mu);
}

/* Stops the run (a deadlock, out of memory): both halves end. */
static void stop_run(half_run *hr) {
  atomic_store(&hr->run->stop, 1);
  kt__sim_par_notify(&hr->h);
}

/* Wakes the parked ranks whose slots were published: 1 when one was. */
static int poll_parked(half_run *hr) {
  kt__sim_half *h = &hr->h;
  int woke = 0;
  for (int i = 0; i < h->n_wait;) {
    if (isnan(kt__sim_slot_time(h->wait_slot[i]))) {
      i++;
      continue;
    }
    kt_rank_queue_wake(&hr->st.work, h->wait_rank[i]);
    h->n_wait--;
    h->wait_rank[i] = h->wait_rank[h->n_wait], h->wait_slot[i] = h->wait_slot[h->n_wait];
    woke = 1;
  }
  return woke;
}

/* Sleeps until the other half publishes past seen, stores another seen
 * or finishes, or the run stops (flag set, then looked at: whichever of
 * it and the notifier comes second sees the other). */
static void sleep_on(half_run *hr, uint64_t seen, uint64_t o_seen) {
  par_run *run = hr->run;
  kt__sim_half *h = &hr->h, *o = &run->half[1 - hr->id].h;
  pthread_mutex_lock(&run->mu);
  atomic_store(&h->sleeping, 1);
  if (!atomic_load(&run->stop) && atomic_load(&o->out) == seen && !atomic_load(&o->finished) &&
      atomic_load(&o->seen) == o_seen)
    pthread_cond_wait(&run->cv, &run->mu);
  atomic_store(&h->sleeping, 0);
  pthread_mutex_unlock(&run->mu);
}

/* Nothing to run: waits for the other half. 1 when ranks are to run
 * again, 0 when this half is done (every rank ended, or some wait for
 * what nobody will make, or the run stopped). A half that stored seen = S
 * has looked at its slots after the other had published S results and
 * found nothing; it looks again only when the other publishes more. */
static int wait_other(half_run *hr) {
  kt__sim_half *h = &hr->h, *o = &hr->run->half[1 - hr->id].h;
  for (;;) {
    uint64_t seen = atomic_load(&o->out);
    if (poll_parked(hr)) return 1;
    if (h->n_wait == 0) return 0; /* no rank waits for the other half */
    atomic_store(&h->seen, seen);
    kt__sim_par_notify(h);
    for (int spin = 0;; spin++) {
      if (atomic_load(&hr->run->stop)) return 0;
      /* read before its out: what it published before either is counted */
      int finished = atomic_load(&o->finished);
      uint64_t o_seen = atomic_load(&o->seen);
      if (atomic_load(&o->out) != seen) break;
      if (finished || o_seen == atomic_load(&h->out)) { /* both wait: a deadlock */
        stop_run(hr);
        return 0;
      }
      if (spin < SPINS) PAUSE();
      else sleep_on(hr, seen, o_seen);
    }
  }
}

static int half_tables(half_run *hr);

static void *half_main(void *arg) {
  half_run *hr = arg;
  sim_state *st = &hr->st;
  unsigned visits = 0;
  if (half_tables(hr)) {
    hr->failed = 1;
    stop_run(hr);
  }
  while (!hr->failed) {
    int r = kt__sim_latest(&st->work);
    if (r < 0 && !wait_other(hr)) break;
    if (r < 0) continue;
    if (kt__sim_advance(st, NULL, r)) {
      hr->failed = 1;
      stop_run(hr);
      break;
    }
    if (++visits % POLL_EVERY == 0) {
      if (atomic_load_explicit(&hr->run->stop, memory_order_relaxed)) break;
      poll_parked(hr);
    }
  }
  atomic_store(&hr->h.finished, 1);
  kt__sim_par_notify(&hr->h);
  return NULL;
}

/* The first rank of the second half: about half the actions before it. */
static int split_rank(const kt_schedule *s, size_t total) {
  size_t before = 0;
  int r = 0;
  while (r < s->p - 1 && before + s->ranks[r].n / 2 < total / 2) before += s->ranks[r++].n;
  return r < 1 ? 1 : r;
}

/* The channels: one per (result, stage) made in one half and read in the
 * other. Their count, -1 out of memory. */
static int channels(par_run *run, const sim_state *st, int mid) {
  int S = st->S, n = 0;
  if (!(run->chan_of = malloc((size_t)KT_OUT_COUNT * (size_t)S * sizeof *run->chan_of))) return -1;
  for (int r = 0; r < KT_OUT_COUNT; r++)
    for (int stage = 0; stage < S; stage++) {
      int to = kt_output_consumer((kt_output)r, stage, S);
      int cross = to >= 0 && (st->owner[stage] < mid) != (st->owner[to] < mid);
      run->chan_of[(size_t)r * (size_t)S + (size_t)stage] = cross ? n++ : -1;
    }
  return n;
}

/* The stages half hr's ranks run: its table's first and how many (all
 * when they are not one contiguous run). */
static void half_stages(const sim_state *st, const kt__sim_half *h, int *first, int *n) {
  int lo = st->S, hi = -1, count = 0;
  for (int stage = 0; stage < st->S; stage++)
    if (st->owner[stage] >= h->lo && st->owner[stage] < h->hi) {
      lo = stage < lo ? stage : lo, hi = stage, count++;
    }
  *first = 0, *n = st->S;
  if (count > 0 && hi - lo + 1 == count) *first = lo, *n = count;
}

/* Half hr over ranks [lo, hi), before its tables. */
static void half_set(half_run *hr, par_run *run, const sim_state *st, int id, int lo, int hi) {
  hr->run = run, hr->id = id, hr->st = *st;
  kt__sim_half *h = &hr->h;
  h->lo = lo, h->hi = hi, h->m = st->s->m, h->chan_of = run->chan_of, h->chan = run->chan;
  h->cap_wait = hi - lo;
  atomic_init(&h->out, 0), atomic_init(&h->seen, UINT64_MAX), atomic_init(&h->finished, 0);
  atomic_init(&h->sleeping, 0);
  hr->st.half = h;
  memset(&hr->st.done, 0, sizeof hr->st.done);
  memset(&hr->st.work, 0, sizeof hr->st.work);
}

/* Its tables, made by its own thread (a walk over its actions): its
 * table counts the reads made within the half. 0 ok, -1 out of memory. */
static int half_tables(half_run *hr) {
  const sim_state *st = &hr->st;
  const kt_schedule *s = st->s;
  kt__sim_half *h = &hr->h;
  int n_stages, *reads = kt_calloc((size_t)s->m + 1, sizeof *reads);
  half_stages(st, h, &hr->st.stage0, &n_stages);
  h->wait_rank = malloc((size_t)h->cap_wait * sizeof *h->wait_rank);
  h->wait_slot = malloc((size_t)h->cap_wait * sizeof *h->wait_slot);
  if (!reads || !h->wait_rank || !h->wait_slot) return free(reads), -1;
  int i_ops = 0, S = st->S, m = s->m;
  for (int r = h->lo; r < h->hi; r++) {
    const kt_action *a = s->ranks[r].actions, *end = a + s->ranks[r].n;
    /* whether each op of one stage reads from this half's table, worked
     * out again when the stage changes (a rank's actions mostly share
     * one): the walk then reads the actions and nothing else */
    int at_stage = -1, reads_of[KT_OP_COUNT];
    for (; a < end; a++) {
      if (a->op >= KT_OP_COUNT || (unsigned)a->stage >= (unsigned)S ||
          (unsigned)a->mb >= (unsigned)m) {
        /* (a one-thread run reports an action outside the schedule, and runs a lowered program) */
        if (!kt__sim_action_ok(a, S, m) || kt_op_is_p2p(a->op)) return free(reads), -1;
        continue; /* a stage's own communication: it reads no result */
      }
      if (a->stage != at_stage) {
        at_stage = a->stage;
        for (int op = 0; op < KT_OP_COUNT; op++) {
          int from;
          kt_output need = kt_action_needs((kt_op)op, at_stage, S, &from);
          reads_of[op] =
              need != KT_OUT_NONE && h->chan_of[(size_t)need * (size_t)S + (size_t)from] < 0;
        }
      }
      i_ops |= a->op >= KT_OP_I;
      reads[a->mb] += reads_of[a->op];
    }
  }
  if (kt__pairs_init(&hr->st.done, n_stages, s->m, i_ops ? 3 : 2, kt__sim_window_rows(st->S),
                     reads) ||
      kt_rank_queue_init(&hr->st.work, s->p))
    return -1;
  for (int r = h->lo; r < h->hi; r++) kt_rank_queue_wake(&hr->st.work, r);
  return 0;
}

static void run_free(par_run *run) {
  for (int i = 0; i < 2; i++) {
    kt__pairs_free(&run->half[i].st.done);
    kt_rank_queue_free(&run->half[i].st.work);
    free(run->half[i].h.wait_rank);
    free(run->half[i].h.wait_slot);
  }
  if (run->synced) pthread_mutex_destroy(&run->mu), pthread_cond_destroy(&run->cv);
  free(run->chan_of);
  free(run->chan);
  free(run);
}

int kt__sim_par_wanted(const kt_schedule *s) {
  return s->p >= 2 && s->p >= kt__sim_par_min_ranks &&
         kt_schedule_total_actions(s) >= kt__sim_par_min_actions;
}

/* The run's channels and halves; NULL when two threads are not worth it
 * or out of memory. */
static par_run *run_new(const sim_state *st) {
  const kt_schedule *s = st->s;
  size_t total = kt_schedule_total_actions(s);
  if (!kt__sim_par_wanted(s)) return NULL;
  par_run *run = kt_calloc(1, sizeof *run);
  if (!run) return NULL;
  int mid = split_rank(s, total), n = channels(run, st, mid);
  size_t slots = n > 0 ? (size_t)n * (size_t)s->m : 1;
  if (n < 0 || slots > MAX_SLOTS || !(run->chan = malloc(slots * sizeof *run->chan))) {
    run_free(run);
    return NULL;
  }
  double not_yet = NAN;
  uint64_t bits;
  memcpy(&bits, &not_yet, sizeof bits);
  for (size_t i = 0; i < slots; i++) atomic_init(&run->chan[i], bits);
  atomic_init(&run->stop, 0);
  if (pthread_mutex_init(&run->mu, NULL)) {
    run_free(run);
    return NULL;
  }
  if (pthread_cond_init(&run->cv, NULL)) {
    pthread_mutex_destroy(&run->mu);
    run_free(run);
    return NULL;
  }
  run->synced = 1;
  half_set(&run->half[0], run, st, 0, 0, mid);
  half_set(&run->half[1], run, st, 1, mid, s->p);
  return run;
}

int kt__sim_par_run(sim_state *st) {
  par_run *run = run_new(st);
  if (!run) return 0;
  pthread_t second;
  int ok = !pthread_create(&second, NULL, half_main, &run->half[1]);
  if (ok) {
    half_main(&run->half[0]);
    pthread_join(second, NULL);
    ok = !atomic_load(&run->stop) && !run->half[0].failed && !run->half[1].failed;
  }
  for (int r = 0; ok && r < st->s->p; r++) ok = st->rk[r].pos >= st->s->ranks[r].n;
  run_free(run);
  if (ok) atomic_fetch_add(&kt__sim_par_runs, 1);
  return ok;
}
#endif
