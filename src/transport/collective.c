/* Collectives built on point-to-point messages: deterministic group sums. */
#include <stdlib.h>
#include <string.h>

#include "kaiten/transport.h"

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
