/* The connection guard: no client can lock others out by holding
 * connections open (slowloris).
 *
 * Every connection the daemon accepts is registered here. A connection is
 * idle until its request's headers are complete and again after each
 * response; busy in between. The limits count live connections: at most
 * KT__GUARD_PER_ADDR per client address and KT__GUARD_TOTAL in all. A new
 * connection over a limit takes the place of the oldest idle one (of its
 * address, or of any), which is closed; only when every connection there is
 * busy is the new one refused. So slow or idle connections never keep a
 * fresh client out: it replaces them. An idle connection is also closed
 * once it has waited KT__GUARD_IDLE_S without a complete request, and the
 * daemon closes a connection that makes no progress for its timeout.
 *
 * Closing is shutdown() on the socket: the connection's thread sees the
 * end and the daemon frees it. The daemon reports a connection's end
 * before it closes the socket, under the guard's lock here, so a socket is
 * never shut down after its number was reused.
 */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "serve/serve_internal.h"

static uint32_t client_addr(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci =
      kt__mhd.get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  const struct sockaddr *sa = ci ? ci->client_addr : NULL;
  if (!sa || sa->sa_family != AF_INET) return 0;
  return ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
}

static void evict(kt_server *s, guard_conn *g) {
  g->evicted = 1;
  shutdown(g->fd, SHUT_RDWR);
  s->guard.evicted++;
}

/* The oldest idle live connection (of addr when by_addr); NULL when none. */
static guard_conn *oldest_idle(kt_server *s, int by_addr, uint32_t addr) {
  guard_conn *best = NULL;
  for (int i = 0; i < KT__GUARD_SLOTS; i++) {
    guard_conn *g = &s->guard.slots[i];
    if (!g->used || g->evicted || g->busy || (by_addr && g->addr != addr)) continue;
    if (!best || g->since < best->since) best = g;
  }
  return best;
}

/* Idle connections past their time. Under the lock. */
static void sweep(kt_server *s, double now) {
  for (int i = 0; i < KT__GUARD_SLOTS; i++) {
    guard_conn *g = &s->guard.slots[i];
    if (g->used && !g->evicted && !g->busy && now - g->since > KT__GUARD_IDLE_S) evict(s, g);
  }
}

/* Makes room for a connection from addr: 1 when there is (an idle one
 * closed if needed), 0 when every connection in its way is busy. */
static int make_room(kt_server *s, uint32_t addr) {
  int total = 0, same = 0;
  for (int i = 0; i < KT__GUARD_SLOTS; i++) {
    const guard_conn *g = &s->guard.slots[i];
    if (!g->used || g->evicted) continue;
    total++;
    same += g->addr == addr;
  }
  guard_conn *g;
  if (same >= KT__GUARD_PER_ADDR) {
    if (!(g = oldest_idle(s, 1, addr))) return 0;
    evict(s, g);
    total--;
  }
  if (total >= KT__GUARD_TOTAL) {
    if (!(g = oldest_idle(s, 0, 0))) return 0;
    evict(s, g);
  }
  return 1;
}

void kt__guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode toe) {
  kt_server *s = cls;
  pthread_mutex_lock(&s->guard.lock);
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci =
        kt__mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    uint32_t addr = client_addr(c);
    double now = kt_now();
    sweep(s, now);
    guard_conn *slot = NULL;
    for (int i = 0; i < KT__GUARD_SLOTS && !slot; i++)
      if (!s->guard.slots[i].used) slot = &s->guard.slots[i];
    int room = make_room(s, addr);
    if (ci && slot && room) {
      *slot = (guard_conn){.used = 1, .fd = ci->connect_fd, .addr = addr, .since = now};
      *socket_context = slot;
    } else { /* refused: closed at once */
      *socket_context = NULL;
      if (ci) shutdown(ci->connect_fd, SHUT_RDWR);
      s->guard.refused++;
    }
  } else if (*socket_context) {
    guard_conn *g = *socket_context;
    memset(g, 0, sizeof *g);
    *socket_context = NULL;
  }
  pthread_mutex_unlock(&s->guard.lock);
}

static guard_conn *slot_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci =
      kt__mhd.get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

void kt__guard_busy(kt_server *s, struct MHD_Connection *c, int busy) {
  pthread_mutex_lock(&s->guard.lock);
  guard_conn *g = slot_of(c);
  if (g && g->used) {
    g->busy = busy;
    g->since = kt_now();
  }
  pthread_mutex_unlock(&s->guard.lock);
}

void kt__guard_tick(kt_server *s) {
  pthread_mutex_lock(&s->guard.lock);
  sweep(s, kt_now());
  pthread_mutex_unlock(&s->guard.lock);
}
