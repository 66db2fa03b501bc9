/* Collectives built on point-to-point messages: deterministic group sums. */
#include <stdlib.h>
#include <string.h>

#include "kaiten/transport_impl.h"

int kt_group_members(const kt_transport *t, kt_group g, int *out) {
  int stage_rank = t->rank / t->d, replica = t->rank % t->d, n = 0;
  switch (g) {
    case KT_GROUP_DATA:
      for (int i = 0; i < t->d; i++) out[n++] = kt_world_rank(stage_rank, i, t->d);
      break;
    case KT_GROUP_PIPELINE:
      for (int i = 0; i < t->p; i++) out[n++] = kt_world_rank(i, replica, t->d);
      break;
    default:
      for (int i = 0; i < t->world; i++) out[n++] = i;
  }
  return n;
}

kt_status kt_allreduce_generic(kt_transport *t, kt_group g, float *buf, size_t n, kt_error *err) {
  int *members = malloc(sizeof(int) * (size_t)t->world);
  if (!members) return kt_fail(err, KT_ENOMEM, "out of memory");
  int count = kt_group_members(t, g, members);
  kt_status st = KT_OK;
  uint64_t tag = KT_TAG_COLLECTIVE | (uint64_t)g;
  size_t bytes = n * sizeof(float);
  if (count > 1) {
    int leader = members[0];
    if (t->rank == leader) {
      float *tmp = malloc(bytes ? bytes : 1);
      if (!tmp) st = kt_fail(err, KT_ENOMEM, "out of memory in allreduce");
      for (int i = 1; i < count && !st; i++) { /* add in member order: deterministic */
        st = t->ops->recv(t, members[i], tag, tmp, bytes, err);
        for (size_t k = 0; !st && k < n; k++) buf[k] += tmp[k];
      }
      for (int i = 1; i < count && !st; i++) st = t->ops->send(t, members[i], tag, buf, bytes, err);
      free(tmp);
    } else {
      st = t->ops->send(t, leader, tag, buf, bytes, err);
      if (!st) st = t->ops->recv(t, leader, tag, buf, bytes, err);
    }
  }
  free(members);
  return st;
}

kt_status kt_allreduce(kt_transport *t, kt_group g, float *buf, size_t n, kt_error *err) {
  return t->ops->allreduce ? t->ops->allreduce(t, g, buf, n, err)
                           : kt_allreduce_generic(t, g, buf, n, err);
}

kt_status kt_transport_send(kt_transport *t, int dst, uint64_t tag, const void *buf, size_t bytes,
                            kt_error *err) {
  return t->ops->send(t, dst, tag, buf, bytes, err);
}
kt_status kt_transport_recv(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                            kt_error *err) {
  return t->ops->recv(t, src, tag, buf, bytes, err);
}
kt_status kt_transport_recv_lend(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                                 const void **data, void **loan, kt_error *err) {
  *loan = NULL;
  *data = buf;
  if (t->ops->recv_lend) return t->ops->recv_lend(t, src, tag, buf, bytes, data, loan, err);
  return t->ops->recv(t, src, tag, buf, bytes, err);
}
void kt_transport_release(kt_transport *t, void *loan) {
  if (loan && t->ops->release) t->ops->release(t, loan);
}
void *kt_transport_buffer(kt_transport *t, int dst, size_t bytes) {
  return t->ops->buffer ? t->ops->buffer(t, dst, bytes) : NULL;
}
kt_status kt_transport_send_buffer(kt_transport *t, int dst, uint64_t tag, void *buf, size_t bytes,
                                   kt_error *err) {
  return t->ops->send_buffer(t, dst, tag, buf, bytes, err);
}
void kt_transport_drop_buffer(kt_transport *t, void *buf) {
  if (buf) t->ops->drop_buffer(t, buf);
}
kt_status kt_transport_post(kt_transport *t, int src, uint64_t tag, size_t bytes, kt_error *err) {
  return t->ops->post ? t->ops->post(t, src, tag, bytes, err) : KT_OK;
}
int kt_transport_has_post(const kt_transport *t) { return t->ops->post != NULL; }
kt_status kt_transport_barrier(kt_transport *t, kt_error *err) { return t->ops->barrier(t, err); }
void kt_transport_abort(kt_transport *t, const char *reason) { t->ops->abort(t, reason); }
int kt_transport_aborted(kt_transport *t) { return t->ops->aborted(t); }
int kt_transport_rank(const kt_transport *t) { return t->rank; }
int kt_transport_world(const kt_transport *t) { return t->world; }
int kt_transport_p(const kt_transport *t) { return t->p; }
int kt_transport_d(const kt_transport *t) { return t->d; }
double kt_transport_timeout(const kt_transport *t) { return t->timeout; }
void kt_transport_stats(const kt_transport *t, int64_t *bytes_sent, double *send_seconds,
                        double *recv_wait_seconds) {
  if (bytes_sent) *bytes_sent = t->bytes_sent;
  if (send_seconds) *send_seconds = t->send_seconds;
  if (recv_wait_seconds) *recv_wait_seconds = t->recv_wait_seconds;
}
kt_transport *kt_transport_at(kt_transport *handles, int i) { return &handles[i]; }
