/* The MPI transport's shared-memory inbox (src/transport/mpi/inbox.h): a
 * message comes out as it went in, matched by source and tag, a sender's
 * messages with one tag in the order sent; a full inbox and a message
 * larger than a slot are refused (the transport then uses MPI); a lent
 * message keeps its slot until released; a claimed slot is written in
 * place and seen only once published; and two
 * senders and a receiver on threads lose nothing (TSan runs this). */
#include <pthread.h>
#include <stdlib.h>

#include "check.h"
#include "transport/mpi/inbox.h"

static void test_single(void *box) {
  kt_inbox_init(box);
  int a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, out[4] = {0};
  size_t len = 0;
  CHECK_EQ_INT(kt_inbox_take(box, 1, 7, out, sizeof out, &len), 0); /* empty */
  CHECK_EQ_INT(kt_inbox_put(box, 1, 7, 2, b, sizeof b), 1);
  CHECK_EQ_INT(kt_inbox_put(box, 1, 7, 1, a, sizeof a), 1); /* sent first: lower seq */
  CHECK_EQ_INT(kt_inbox_put(box, 2, 7, 3, a, 8), 1);
  CHECK_EQ_INT(kt_inbox_take(box, 1, 9, out, sizeof out, &len), 0); /* no such tag */
  CHECK_EQ_INT(kt_inbox_take(box, 1, 7, out, sizeof out, &len), 1);
  CHECK(len == sizeof a && out[0] == 1 && out[3] == 4);
  CHECK_EQ_INT(kt_inbox_take(box, 1, 7, out, sizeof out, &len), 1);
  CHECK(len == sizeof b && out[0] == 5 && out[3] == 8);
  CHECK_EQ_INT(kt_inbox_take(box, 2, 7, out, sizeof out, &len), 1);
  CHECK(len == 8 && out[1] == 2);
  CHECK_EQ_INT(kt_inbox_take(box, 1, 7, out, sizeof out, &len), 0);
  /* full, then a slot frees */
  for (int i = 0; i < KT_INBOX_SLOTS; i++)
    CHECK_EQ_INT(kt_inbox_put(box, 3, (uint64_t)i, (uint64_t)i, a, 4), 1);
  CHECK_EQ_INT(kt_inbox_put(box, 3, 99, 99, a, 4), 0);
  CHECK_EQ_INT(kt_inbox_take(box, 3, 5, out, sizeof out, &len), 1);
  CHECK_EQ_INT(kt_inbox_put(box, 3, 99, 99, a, 4), 1);
  /* larger than a slot: refused */
  kt_inbox_init(box);
  unsigned char *big = calloc(KT_INBOX_SLOT_BYTES + 1, 1);
  CHECK(big != NULL);
  if (!big) return;
  CHECK_EQ_INT(kt_inbox_put(box, 1, 1, 1, big, KT_INBOX_SLOT_BYTES + 1), 0);
  CHECK_EQ_INT(kt_inbox_put(box, 1, 1, 1, big, KT_INBOX_SLOT_BYTES), 1);
  CHECK_EQ_INT(kt_inbox_take(box, 1, 1, big, KT_INBOX_SLOT_BYTES, &len), 1);
  CHECK(len == KT_INBOX_SLOT_BYTES);
  free(big);
}

/* A lent message is read where it lies; its slot is neither found again
 * nor given to a sender until it is released. */
static void test_lend(void *box) {
  kt_inbox_init(box);
  int a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  const void *data = NULL;
  void *slot = NULL;
  size_t len = 0;
  CHECK_EQ_INT(kt_inbox_lend(box, 1, 7, &data, &len, &slot), 0); /* empty */
  CHECK_EQ_INT(kt_inbox_put(box, 1, 7, 2, b, sizeof b), 1);
  CHECK_EQ_INT(kt_inbox_put(box, 1, 7, 1, a, sizeof a), 1);
  CHECK_EQ_INT(kt_inbox_lend(box, 1, 7, &data, &len, &slot), 1); /* the older one */
  CHECK(len == sizeof a && ((const int *)data)[0] == 1 && ((const int *)data)[3] == 4);
  CHECK(kt_inbox_holds(box, slot) && !kt_inbox_holds(box, a) && !kt_inbox_holds(NULL, slot));
  CHECK_EQ_INT((int)((uintptr_t)data % 16), 0); /* read as floats, maybe vectors */
  for (int i = 0; i < KT_INBOX_SLOTS - 2; i++)
    CHECK_EQ_INT(kt_inbox_put(box, 3, 1, (uint64_t)i, a, 4), 1);
  CHECK_EQ_INT(kt_inbox_put(box, 3, 1, 99, a, 4), 0); /* the lent slot is not free */
  CHECK(((const int *)data)[0] == 1);                 /* nor overwritten */
  const void *data2 = NULL;
  void *slot2 = NULL;
  CHECK_EQ_INT(kt_inbox_lend(box, 1, 7, &data2, &len, &slot2), 1); /* the next one, not the lent */
  CHECK(slot2 != slot && ((const int *)data2)[0] == 5);
  kt_inbox_release(slot);
  CHECK_EQ_INT(kt_inbox_put(box, 3, 1, 99, a, 4), 1); /* released: free again */
  kt_inbox_release(slot2);
  CHECK_EQ_INT(kt_inbox_lend(box, 1, 7, &data, &len, &slot), 0);
}

/* A claimed slot is written in place: invisible to the receiver until
 * published, free again when unclaimed; a full inbox has none to claim. */
static void test_claim(void *box) {
  kt_inbox_init(box);
  int out[4] = {0};
  size_t len = 0;
  int *slot = kt_inbox_claim(box, sizeof out);
  REQUIRE_VOID(slot);
  CHECK_EQ_INT((int)((uintptr_t)slot % 64), 0);
  CHECK(kt_inbox_claim(box, KT_INBOX_SLOT_BYTES + 1) == NULL);
  slot[0] = 7, slot[1] = 8, slot[2] = 9, slot[3] = 10;
  CHECK_EQ_INT(kt_inbox_take(box, 2, 5, out, sizeof out, &len), 0); /* not published yet */
  kt_inbox_publish(slot, 2, 5, 1, sizeof out);
  CHECK_EQ_INT(kt_inbox_take(box, 2, 5, out, sizeof out, &len), 1);
  CHECK(len == sizeof out && out[0] == 7 && out[3] == 10);
  void *claimed[KT_INBOX_SLOTS];
  for (int i = 0; i < KT_INBOX_SLOTS; i++) CHECK((claimed[i] = kt_inbox_claim(box, 4)) != NULL);
  CHECK(kt_inbox_claim(box, 4) == NULL); /* all claimed */
  kt_inbox_unclaim(claimed[3]);
  CHECK(kt_inbox_claim(box, 4) == claimed[3]);
}

#define PER_SENDER 2000

typedef struct {
  void *box;
  int src;
} sender_arg;

static void *sender(void *p) {
  sender_arg *a = p;
  for (int i = 0; i < PER_SENDER; i++) {
    int msg[64];
    for (int k = 0; k < 64; k++) msg[k] = a->src * 1000000 + i;
    while (!kt_inbox_put(a->box, a->src, (uint64_t)i, (uint64_t)i, msg, sizeof msg)) {
    }
  }
  return NULL;
}

static void test_threads(void *box) {
  kt_inbox_init(box);
  pthread_t th[2];
  sender_arg args[2] = {{box, 1}, {box, 2}};
  for (int s = 0; s < 2; s++)
    if (pthread_create(&th[s], NULL, sender, &args[s])) {
      CHECK(0); /* cannot start a sender */
      exit(kt_test_done(__FILE__));
    }
  int next[3] = {0, 0, 0}, bad = 0;
  while (next[1] < PER_SENDER || next[2] < PER_SENDER)
    for (int s = 1; s <= 2; s++) {
      int msg[64];
      size_t len = 0;
      if (next[s] >= PER_SENDER || !kt_inbox_take(box, s, (uint64_t)next[s], msg, sizeof msg, &len))
        continue;
      for (int k = 0; k < 64; k++) bad += msg[k] != s * 1000000 + next[s];
      bad += len != sizeof msg;
      next[s]++;
    }
  for (int s = 0; s < 2; s++) pthread_join(th[s], NULL);
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(next[1] + next[2], 2 * PER_SENDER);
}

int main(void) {
  void *box = aligned_alloc(64, kt_inbox_bytes());
  REQUIRE(box);
  test_single(box);
  test_lend(box);
  test_claim(box);
  test_threads(box);
  free(box);
  return kt_test_done(__FILE__);
}
