/* Internal to the library (not public API): what modules above core share. */
#ifndef KAITEN_CORE_INTERNAL_H
#define KAITEN_CORE_INTERNAL_H

#include <stddef.h>

#include "kaiten/core.h"

/* Opens the shared library `soname` (RTLD_NOW | RTLD_LOCAL) and looks up
 * names[0..n) into fn[]: the first n_required must be there, the rest are
 * NULL when absent. All or nothing: on failure the library is closed and
 * fn[] is all NULL. KT_EIO naming the library and the loader's reason.
 * For the libraries only some commands need (OpenBLAS, libmicrohttpd): a
 * program opens them on first use instead of loading them at every start,
 * where their constructors cost milliseconds and OpenBLAS starts threads. */
kt_status kt__dl_open(const char *soname, const char *const *names, size_t n, size_t n_required,
                      void **fn, kt_error *err);

#endif
