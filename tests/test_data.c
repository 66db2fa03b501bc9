/* Byte-level data: the built-in corpus, the split, shuffled batches as a pure
 * function of (seed, step, replica, micro-batch), validation batches. */
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "kaiten/data.h"

/* CHECK that stops the test function (cond evaluated once) */
#define REQUIRE_V(cond) \
  do { \
    int _ok = (cond); \
    CHECK_MSG(_ok, "%s", #cond); \
    if (!_ok) return; \
  } while (0)

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static void test_builtin(void) {
  char *a, *b;
  size_t la, lb;
  kt_error err;
  REQUIRE_V(!kt_data_builtin_text(&a, &la, &err));
  REQUIRE_V(!kt_data_builtin_text(&b, &lb, &err));
  CHECK(la == lb && !memcmp(a, b, la)); /* deterministic */
  CHECK(la > KT_DATA_BUILTIN_BYTES - 2048 && la <= KT_DATA_BUILTIN_BYTES);
  int printable = 1;
  for (size_t i = 0; i < la; i++) printable &= (a[i] >= 32 && a[i] < 127) || a[i] == '\n';
  CHECK(printable);
  size_t scenes = count(a, "\n\n"), bills = count(a, "The bill is "),
         none = count(a, "takes nothing");
  CHECK_EQ_INT(scenes, bills + none);
  CHECK(scenes > 1000);
  CHECK(count(a, "Aki") > 100 && count(a, "salmon") > 100);
  printf("built-in corpus: %zu bytes, %zu scenes; it begins:\n%.400s...\n", la, scenes, a);
  free(a);
  free(b);
}

static void test_split_and_batches(void) {
  kt_dataset *d;
  kt_error err;
  REQUIRE_V(!kt_dataset_create(NULL, 0.1, &d, &err));
  CHECK_STR_CONTAINS(kt_dataset_name(d), "builtin");
  size_t tr = kt_dataset_bytes(d, KT_SPLIT_TRAIN), va = kt_dataset_bytes(d, KT_SPLIT_VAL);
  CHECK(va > 0 && tr > 8 * va &&
        kt_dataset_text(d, KT_SPLIT_VAL) == kt_dataset_text(d, KT_SPLIT_TRAIN) + tr);
  kt_batch_spec s = {.seq_len = 64, .micro_batch = 4, .micro_batches = 3, .replicas = 2, .seed = 9};
  int tok[4 * 64], tgt[4 * 64], tok2[4 * 64], tgt2[4 * 64];
  REQUIRE_V(!kt_data_train_batch(d, &s, 17, 1, 2, tok, tgt, &err));
  for (int i = 0; i < 4; i++)
    for (int t = 0; t + 1 < 64; t++) CHECK(tgt[i * 64 + t] == tok[i * 64 + t + 1]);
  /* pure: the same arguments give the same batch, whatever ran before */
  REQUIRE_V(!kt_data_train_batch(d, &s, 3, 0, 0, tok2, tgt2, &err));
  REQUIRE_V(!kt_data_train_batch(d, &s, 17, 1, 2, tok2, tgt2, &err));
  CHECK(!memcmp(tok, tok2, sizeof tok) && !memcmp(tgt, tgt2, sizeof tgt));
  /* another seed, step, replica or micro-batch gives other windows */
  kt_batch_spec s2 = s;
  s2.seed = 10;
  REQUIRE_V(!kt_data_train_batch(d, &s2, 17, 1, 2, tok2, tgt2, &err));
  CHECK(memcmp(tok, tok2, sizeof tok));
  REQUIRE_V(!kt_data_train_batch(d, &s, 17, 0, 2, tok2, tgt2, &err));
  CHECK(memcmp(tok, tok2, sizeof tok));
  /* validation */
  int nv = kt_data_val_batches(d, 64, 4);
  CHECK(nv >= 1);
  REQUIRE_V(!kt_data_val_batch(d, 64, 4, nv - 1, tok, tgt, &err));
  const unsigned char *val = kt_dataset_text(d, KT_SPLIT_VAL);
  CHECK(tok[0] == val[(size_t)(nv - 1) * 4 * 64] && tgt[0] == val[(size_t)(nv - 1) * 4 * 64 + 1]);
  CHECK_EQ_INT(kt_data_val_batch(d, 64, 4, nv, tok, tgt, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_data_train_batch(d, &s, 0, 2, 0, tok, tgt, &err), KT_EINVAL);
  CHECK(kt_dataset_fingerprint(d) != 0);
  kt_dataset_destroy(d);
}

/* On a small text every window is drawn exactly once per epoch, the shards
 * of the replicas and micro-batches tile the step's global batch, and the
 * boundaries shift between epochs. */
static void test_epochs(void) {
  kt_error err;
  enum { T = 10 };
  int seen[32], tok[2 * T], tgt[2 * T];
  /* 250 distinct bytes: a token tells where its window starts */
  unsigned char uniq[250];
  for (int i = 0; i < 250; i++) uniq[i] = (unsigned char)i;
  kt_dataset *u;
  REQUIRE_V(!kt_dataset_from_bytes(uniq, sizeof uniq, "uniq", 0.0, &u, &err));
  uint64_t W = kt_data_train_windows(u, T); /* 24 */
  CHECK_EQ_INT(W, 24);
  kt_batch_spec su = {.seq_len = T, .micro_batch = 2, .micro_batches = 2, .replicas = 3, .seed = 4};
  /* a step is 12 samples: two steps per epoch */
  int prev_offset = -1, shifted = 0;
  for (int epoch = 0; epoch < 4; epoch++) {
    memset(seen, 0, sizeof seen);
    int offset = -1, ok = 1;
    for (int step = 2 * epoch; step < 2 * epoch + 2; step++)
      for (int r = 0; r < 3; r++)
        for (int mb = 0; mb < 2; mb++) {
          REQUIRE_V(!kt_data_train_batch(u, &su, step, r, mb, tok, tgt, &err));
          for (int i = 0; i < 2; i++) {
            int start = tok[i * T];
            if (offset < 0) offset = start % T;
            ok &= start % T == offset && tgt[i * T] == start + 1;
            seen[start / T]++;
          }
        }
    for (int w = 0; w < 24; w++) ok &= seen[w] == 1;
    CHECK_MSG(ok, "epoch %d: every window once with one offset", epoch);
    shifted |= prev_offset >= 0 && offset != prev_offset;
    prev_offset = offset;
  }
  CHECK(shifted);
  /* too short for the sequence length */
  CHECK_EQ_INT(
      kt_data_train_batch(
          u, &(kt_batch_spec){.seq_len = 200, .micro_batch = 1, .micro_batches = 1, .replicas = 1},
          0, 0, 0, tok, tgt, &err),
      KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "too few");
  CHECK_EQ_INT(kt_data_val_batches(u, T, 2), 0);
  kt_dataset_destroy(u);
}

static void test_files(void) {
  kt_dataset *d;
  kt_error err;
  char path[] = "/tmp/kt_test_data_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE_V(fd >= 0);
  const char *text = "hello, kaiten! a tiny text file for the loader.\n";
  CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  close(fd);
  REQUIRE_V(!kt_dataset_create(path, 0.25, &d, &err));
  CHECK_EQ_INT(kt_dataset_bytes(d, KT_SPLIT_TRAIN) + kt_dataset_bytes(d, KT_SPLIT_VAL),
               strlen(text));
  CHECK(!memcmp(kt_dataset_text(d, KT_SPLIT_TRAIN), text, kt_dataset_bytes(d, KT_SPLIT_TRAIN)));
  kt_dataset_destroy(d);
  unlink(path);
  CHECK_EQ_INT(kt_dataset_create("/nonexistent/kaiten.txt", 0.1, &d, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_dataset_create(NULL, 0.7, &d, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_dataset_from_bytes("", 0, "empty", 0.1, &d, &err), KT_EINVAL);
  int tok[5];
  char back[6];
  kt_data_encode("k\xe2\x86\x92!", 5, tok);
  CHECK(tok[1] == 0xe2);
  kt_data_decode(tok, 5, back);
  CHECK(!strcmp(back, "k\xe2\x86\x92!"));
}

int main(void) {
  test_builtin();
  test_split_and_batches();
  test_epochs();
  test_files();
  return kt_test_done(__FILE__);
}
