/* Shared libraries opened on first use (internal.h says which and why). */
#include <dlfcn.h>

#include "core/internal.h"

kt_status kt__dl_open(const char *soname, const char *const *names, size_t n, size_t n_required,
                      void **fn, kt_error *err) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    return kt_fail(err, KT_EIO, "cannot load %s", why ? why : soname);
  }
  for (size_t i = 0; i < n; i++) {
    fn[i] = dlsym(h, names[i]);
    if (!fn[i] && i < n_required) {
      for (size_t j = 0; j < n; j++) fn[j] = NULL;
      dlclose(h);
      return kt_fail(err, KT_EIO, "cannot load %s: it has no %s", soname, names[i]);
    }
  }
  return KT_OK;
}
