/* The WebAssembly module's exports, built only for wasm32-wasi (the
 * kaiten_wasm target; the native build leaves this file out). The page
 * copies its request into memory from kt_web_alloc, calls kt_web_call and
 * reads kt_web_length bytes of JSON at the pointer it returns. */
#include <stdlib.h>

#include "kaiten/web.h"

#define KT_WASM_EXPORT(name) __attribute__((export_name(#name)))

KT_WASM_EXPORT(kt_web_alloc) void *kt_web_alloc(size_t n);
KT_WASM_EXPORT(kt_web_free) void kt_web_free(void *p);
KT_WASM_EXPORT(kt_web_call) const char *kt_web_call(const char *args, const char *order);
KT_WASM_EXPORT(kt_web_length) size_t kt_web_length(void);

static kt_buf answer;
static const char oom[] = "{\"ok\":false,\"status\":\"ENOMEM\",\"error\":\"out of memory\"}";

void *kt_web_alloc(size_t n) { return malloc(n ? n : 1); }

void kt_web_free(void *p) { free(p); }

/* kt_web_run(args, order): the answer stays until the next call. */
const char *kt_web_call(const char *args, const char *order) {
  kt_buf_free(&answer);
  kt_buf_init(&answer);
  kt_web_run(args, order, &answer);
  return answer.failed || !answer.data ? oom : answer.data;
}

size_t kt_web_length(void) { return answer.failed || !answer.data ? sizeof oom - 1 : answer.len; }
