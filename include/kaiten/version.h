/* kaiten's version: compile-time macros and the library's own at run time. */
#ifndef KAITEN_VERSION_H
#define KAITEN_VERSION_H

#define KT_VERSION_MAJOR 0
#define KT_VERSION_MINOR 2
#define KT_VERSION_PATCH 0
#define KT_VERSION_STRING "0.2.0"
/* One number that grows with every release: 10000 * major + 100 * minor + patch. */
#define KT_VERSION (KT_VERSION_MAJOR * 10000 + KT_VERSION_MINOR * 100 + KT_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library linked in ("0.2.0"), which may differ from the
 * header a program was compiled with. */
const char *kt_version(void);

#ifdef __cplusplus
}
#endif

#endif
