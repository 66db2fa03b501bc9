/* kaiten transport: how ranks exchange tensors. A small vtable (send, recv,
 * allreduce, barrier, abort) with a per-rank handle; implementations:
 * threads (one process, one thread per rank, bounded mailboxes) and MPI.
 *
 * Rank layout (pipeline x data parallel): world rank = stage_rank * D + replica,
 * so data-parallel peers are the innermost axis.
 */
#ifndef KAITEN_TRANSPORT_H
#define KAITEN_TRANSPORT_H

#include "kaiten/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  KT_GROUP_WORLD,    /* every rank */
  KT_GROUP_DATA,     /* the D replicas of this pipeline rank */
  KT_GROUP_PIPELINE, /* the P pipeline ranks of this replica */
  KT_GROUP_COUNT
} kt_group;

typedef struct kt_transport kt_transport;

/* The handle is opaque: a transport keeps its counters and its rank
 * layout consistent only through these functions. Implementations (the
 * threads and MPI transports, wrappers) see its fields in
 * kaiten/transport_impl.h. */

/* Sends bytes to world rank dst under tag. Never waits for the receiver
 * beyond the mailbox bound (data is copied out before returning). */
kt_status kt_transport_send(kt_transport *t, int dst, uint64_t tag, const void *buf, size_t bytes,
                            kt_error *err);
/* Receives the message (src, tag) into buf (exactly bytes). Waits at most
 * the handle's timeout: ETIMEOUT; EPEER when the run was aborted. */
kt_status kt_transport_recv(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                            kt_error *err);
/* Receives the message (src, tag) like kt_transport_recv, but the transport
 * may lend its own copy instead of copying into buf (one copy less per
 * message): *data is the message (buf itself when it was copied there) and
 * stays valid until kt_transport_release(t, *loan). On an error nothing is
 * lent (*loan NULL). */
kt_status kt_transport_recv_lend(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                                 const void **data, void **loan, kt_error *err);
/* Gives back what kt_transport_recv_lend lent (NULL: nothing). */
void kt_transport_release(kt_transport *t, void *loan);
/* Storage for a message of bytes to dst, from the transport itself (the
 * receiver's inbox, a pooled message): fill it, then send it with
 * kt_transport_send_buffer, which takes it without a copy, or give it back
 * with kt_transport_drop_buffer. NULL when the transport has none to give
 * (send from your own memory with kt_transport_send). */
void *kt_transport_buffer(kt_transport *t, int dst, size_t bytes);
kt_status kt_transport_send_buffer(kt_transport *t, int dst, uint64_t tag, void *buf, size_t bytes,
                                   kt_error *err);
void kt_transport_drop_buffer(kt_transport *t, void *buf);
/* Announces a receive ahead of time so the transfer can progress before the
 * receiver asks for it; KT_OK and nothing done on a transport that does not
 * need it (kt_transport_has_post says which). */
kt_status kt_transport_post(kt_transport *t, int src, uint64_t tag, size_t bytes, kt_error *err);
int kt_transport_has_post(const kt_transport *t);
kt_status kt_transport_barrier(kt_transport *t, kt_error *err);
/* Makes every pending and future operation of every rank fail fast with
 * EPEER and the reason. Safe to call from any rank, more than once. */
void kt_transport_abort(kt_transport *t, const char *reason);
/* Non-zero once the run was aborted (by any rank). */
int kt_transport_aborted(kt_transport *t);
/* This handle's world rank, the world size, pipeline ranks and replicas
 * (world = p * d), and the seconds a receive may wait (the watchdog). */
int kt_transport_rank(const kt_transport *t);
int kt_transport_world(const kt_transport *t);
int kt_transport_p(const kt_transport *t);
int kt_transport_d(const kt_transport *t);
double kt_transport_timeout(const kt_transport *t);
/* What this handle sent and how long it spent sending and waiting to
 * receive, since it was made (any pointer may be NULL). */
void kt_transport_stats(const kt_transport *t, int64_t *bytes_sent, double *send_seconds,
                        double *recv_wait_seconds);
/* Handle i of an array that kt_transport_threads_create made. */
kt_transport *kt_transport_at(kt_transport *handles, int i);

static inline int kt_world_rank(int stage_rank, int replica, int d) {
  return stage_rank * d + replica;
}

/* Sum over a group with point-to-point messages: members send to the group's
 * first rank, which adds in member order and sends the result back. */
kt_status kt_allreduce_generic(kt_transport *t, kt_group g, float *buf, size_t n, kt_error *err);
/* Dispatches to the transport's allreduce or the generic one. */
kt_status kt_allreduce(kt_transport *t, kt_group g, float *buf, size_t n, kt_error *err);
/* Members of a group containing world rank r (out must hold world entries). */
int kt_group_members(const kt_transport *t, kt_group g, int *out);

/* Threads: creates world = p * d handles sharing one in-process fabric.
 * mailbox_cap bounds the messages queued per receiving rank (senders wait
 * beyond it, under the same timeout). Free with kt_transport_threads_destroy. */
kt_status kt_transport_threads_create(int p, int d, double timeout, size_t mailbox_cap,
                                      kt_transport **handles, kt_error *err);
void kt_transport_threads_destroy(kt_transport *handles, int world);

/* MPI (OpenMPI): one handle for this process's world rank. Initialises MPI
 * when needed; the world size must equal p * d. ENOTSUP-like EINVAL when
 * kaiten was built without MPI. */
int kt_transport_mpi_available(void);
kt_status kt_transport_mpi_init(int *world_rank, int *world_size, kt_error *err);
kt_status kt_transport_mpi_create(int p, int d, double timeout, kt_transport **out, kt_error *err);
void kt_transport_mpi_destroy(kt_transport *t);
/* Processes of the job on this machine (MPI_COMM_TYPE_SHARED), for sharing
 * its cores among them; 1 without MPI. */
int kt_transport_mpi_local_size(void);
/* Collective: the node of every world rank (out holds world entries), the
 * machines told apart by name (MPI_Get_processor_name) and numbered in
 * order of their first rank. */
kt_status kt_transport_mpi_nodes(kt_transport *t, int *out, kt_error *err);
/* How long this rank's waits keep testing before they sleep between polls
 * (seconds; negative: the transport's own choice). calibrate's ping-pong
 * spins, so it measures the link's latency rather than a wake-up's. */
void kt_transport_mpi_set_spin(kt_transport *t, double seconds);
/* The world rank this process's receive waits for right now, -1 when none,
 * and since when (kt_now); async-signal-safe, so a handler may name it when
 * the job is ended under it. */
int kt_transport_mpi_waiting_for(double *since);
/* Ends every process of the job with the exit code (MPI_Abort). */
void kt_transport_mpi_abort_job(int code);
void kt_transport_mpi_finalize(void);

/* Ping-pong between world ranks 0 and 1 (both call it with their handle):
 * the median one-way seconds of `bytes`-sized messages over reps round
 * trips; negative on failure. The threads variant builds a 2-rank fabric
 * and plays both sides. */
double kt_transport_pingpong(kt_transport *t, size_t bytes, int reps);
double kt_transport_threads_pingpong(size_t bytes, int reps);

/* Tags: what a point-to-point message carries. */
enum { KT_TAG_ACT = 0, KT_TAG_GRAD = 1 };
static inline uint64_t kt_tag(int kind, int stage, int mb, int round) {
  return ((uint64_t)(unsigned)kind << 60) | ((uint64_t)(unsigned)round << 44) |
         ((uint64_t)(unsigned)stage << 24) | (uint64_t)(unsigned)mb;
}
/* tag (round 0's) in round `round`. */
static inline uint64_t kt_tag_round(uint64_t tag, int round) {
  return tag | ((uint64_t)(unsigned)round << 44);
}
#define KT_TAG_COLLECTIVE (UINT64_C(0xF) << 60)

#ifdef __cplusplus
}
#endif

#endif
