/* Runs a fuzz target over saved inputs without libFuzzer: every file given,
 * and every file in every directory given (sorted by name). The normal build
 * links it with each fuzz_*.c so that CTest replays the committed corpora.
 * With --max-seconds S first, an input that takes longer than S fails the
 * replay (as libFuzzer's -timeout would stop `make fuzz`); the slowest input
 * is always named. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static double max_seconds, slowest;
static char slowest_path[1024];

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      uint8_t *bigger = realloc(buf, cap *= 2);
      if (!bigger) free(buf);
      buf = bigger;
    }
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "replay: out of memory reading %s\n", path);
    return -1;
  }
  /* a copy of exactly len bytes, so that ASan catches reads past the input */
  uint8_t *input = malloc(len ? len : 1);
  if (!input) abort();
  memcpy(input, buf, len);
  free(buf);
  double t0 = now();
  LLVMFuzzerTestOneInput(input, len);
  double dt = now() - t0;
  free(input);
  if (dt > slowest) slowest = dt, snprintf(slowest_path, sizeof slowest_path, "%s", path);
  if (max_seconds > 0 && dt > max_seconds) {
    fprintf(stderr, "replay: %s took %.2f s, over the %.0f s an input may take\n", path, dt,
            max_seconds);
    return -1;
  }
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Returns the number of inputs replayed, or -1 on an unreadable path. */
static long replay_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "replay: no such file or directory: %s\n", path);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) return replay_file(path) ? -1 : 1;
  DIR *d = opendir(path);
  if (!d) return -1;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (n == cap && !(names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names))) abort();
    if (!(names[n++] = strdup(e->d_name))) abort();
  }
  closedir(d);
  qsort(names, n, sizeof *names, by_name);
  long count = 0;
  for (size_t i = 0; i < n; i++) {
    char *full = malloc(strlen(path) + strlen(names[i]) + 2);
    if (!full) abort();
    sprintf(full, "%s/%s", path, names[i]);
    long k = count >= 0 ? replay_path(full) : 0;
    count = k < 0 ? -1 : count + k;
    free(full);
    free(names[i]);
  }
  free(names);
  return count;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s [--max-seconds S] DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  long total = 0;
  int first = 1;
  if (argc > 3 && !strcmp(argv[1], "--max-seconds")) max_seconds = atof(argv[2]), first = 3;
  for (int i = first; i < argc; i++) {
    long k = replay_path(argv[i]);
    if (k < 0) return 1;
    total += k;
  }
  printf("replayed %ld inputs; slowest %.3f s (%s)\n", total, slowest, slowest_path);
  return total > 0 ? 0 : 1;
}
