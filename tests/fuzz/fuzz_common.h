/* Helpers shared by the fuzz targets (libFuzzer entry points, also replayed
 * by replay_main.c in the normal build). */
#ifndef KAITEN_FUZZ_COMMON_H
#define KAITEN_FUZZ_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a NUL-terminated string (the parsers take C strings). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) abort();
  if (size) memcpy(s, data, size);
  s[size] = 0;
  return s;
}

static char fuzz_temp_path[128];

static inline void fuzz_temp_remove(void) { unlink(fuzz_temp_path); }

/* Writes the bytes to a file private to this process and returns its path;
 * every call reuses the same file, removed at exit. */
static inline const char *fuzz_temp_file(const void *data, size_t size) {
  if (!fuzz_temp_path[0]) {
    /* memory-backed when possible: the file is rewritten for every input */
    const char *dir = getenv("TMPDIR");
    if (!dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_temp_path, sizeof fuzz_temp_path, "%s/kaiten-fuzz-%ld", dir, (long)getpid());
    atexit(fuzz_temp_remove);
  }
  FILE *f = fopen(fuzz_temp_path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  if (fclose(f)) abort();
  return fuzz_temp_path;
}

/* Points stdout and stderr at /dev/null around code that prints. Only the
 * FILE streams move: sanitizer reports go to file descriptor 2 and stay
 * visible. */
typedef struct {
  FILE *out, *err;
} fuzz_quiet;

static inline fuzz_quiet fuzz_quiet_begin(void) {
  static FILE *null_stream;
  if (!null_stream && !(null_stream = fopen("/dev/null", "w"))) abort();
  fuzz_quiet saved = {stdout, stderr};
  stdout = null_stream;
  stderr = null_stream;
  return saved;
}

static inline void fuzz_quiet_end(fuzz_quiet saved) {
  fflush(stdout);
  stdout = saved.out;
  stderr = saved.err;
}

#endif
