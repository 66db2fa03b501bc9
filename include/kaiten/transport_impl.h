/* kaiten transport: the interface for implementations (the threads and
 * MPI transports, wrappers such as the CLI's fault injection). Users of a
 * transport include kaiten/transport.h and call its functions; only an
 * implementation reads or writes these fields. */
#ifndef KAITEN_TRANSPORT_IMPL_H
#define KAITEN_TRANSPORT_IMPL_H

#include "kaiten/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  /* Sends bytes to world rank dst under tag. Never waits for the receiver
   * beyond the mailbox bound (data is copied out before returning). */
  kt_status (*send)(kt_transport *t, int dst, uint64_t tag, const void *buf, size_t bytes,
                    kt_error *err);
  /* Receives the message (src, tag) into buf (exactly bytes). Waits at most
   * t->timeout seconds: ETIMEOUT; EPEER when the run was aborted. */
  kt_status (*recv)(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes, kt_error *err);
  /* Optional (NULL: not needed): announces a receive ahead of time so the
   * transfer can progress before the receiver asks for it. */
  kt_status (*post)(kt_transport *t, int src, uint64_t tag, size_t bytes, kt_error *err);
  /* Element-wise sum over the group, result on every member; deterministic
   * (the same order of additions on every run). NULL: use kt_allreduce_generic. */
  kt_status (*allreduce)(kt_transport *t, kt_group g, float *buf, size_t n, kt_error *err);
  kt_status (*barrier)(kt_transport *t, kt_error *err);
  /* Makes every pending and future operation of every rank fail fast with
   * EPEER and the reason. Safe to call from any rank, more than once. */
  void (*abort)(kt_transport *t, const char *reason);
  /* Non-zero once the run was aborted (by any rank). */
  int (*aborted)(kt_transport *t);
  void (*destroy)(kt_transport *t);
  /* Optional (NULL: recv copies into buf): a receive that may lend the
   * transport's own copy of the message instead of copying it. On KT_OK
   * *data is the message (buf when it was copied there) and *loan what to
   * give back to release (NULL: nothing lent). */
  kt_status (*recv_lend)(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                         const void **data, void **loan, kt_error *err);
  void (*release)(kt_transport *t, void *loan);
  /* Optional (NULL: none): storage for a message of bytes to dst that the
   * caller fills and sends with send_buffer (no copy) or gives back with
   * drop_buffer; buffer returns NULL when it has none free (the caller
   * then sends from its own memory). */
  void *(*buffer)(kt_transport *t, int dst, size_t bytes);
  kt_status (*send_buffer)(kt_transport *t, int dst, uint64_t tag, void *buf, size_t bytes,
                           kt_error *err);
  void (*drop_buffer)(kt_transport *t, void *buf);
} kt_transport_ops;

struct kt_transport {
  const kt_transport_ops *ops;
  void *ctx;
  int rank, world; /* this handle's world rank, world size */
  int p, d;        /* pipeline ranks, data-parallel replicas (world = p * d) */
  double timeout;  /* seconds a receive may wait (the watchdog) */
  int64_t bytes_sent;
  double send_seconds, recv_wait_seconds;
};

#ifdef __cplusplus
}
#endif

#endif
