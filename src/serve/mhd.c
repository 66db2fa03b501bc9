/* libmicrohttpd, opened when the first server starts (it and GnuTLS under
 * it cost every process that links them a millisecond or more of start:
 * core/internal.h). Every call into it goes through kt__mhd. */
#include <pthread.h>

#include "core/internal.h"
#include "serve/serve_internal.h"

#ifndef KT_MHD_SONAME
#define KT_MHD_SONAME "libmicrohttpd.so.12"
#endif

kt__mhd_api kt__mhd;
static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;
static kt_error mhd_failure; /* why it could not be loaded */

static void load(void) {
  static const char *const names[] = {"MHD_start_daemon",
                                      "MHD_stop_daemon",
                                      "MHD_create_response_from_buffer",
                                      "MHD_create_response_from_callback",
                                      "MHD_destroy_response",
                                      "MHD_add_response_header",
                                      "MHD_queue_response",
                                      "MHD_get_connection_info",
                                      "MHD_lookup_connection_value",
                                      "MHD_create_response_from_fd64"};
  void *fn[sizeof names / sizeof *names];
  size_t n = sizeof names / sizeof *names;
  if (kt__dl_open(KT_MHD_SONAME, names, n, n, fn, &mhd_failure)) return;
  kt__mhd.stop_daemon = (__typeof__(kt__mhd.stop_daemon))fn[1];
  kt__mhd.create_response_from_buffer = (__typeof__(kt__mhd.create_response_from_buffer))fn[2];
  kt__mhd.create_response_from_callback = (__typeof__(kt__mhd.create_response_from_callback))fn[3];
  kt__mhd.destroy_response = (__typeof__(kt__mhd.destroy_response))fn[4];
  kt__mhd.add_response_header = (__typeof__(kt__mhd.add_response_header))fn[5];
  kt__mhd.queue_response = (__typeof__(kt__mhd.queue_response))fn[6];
  kt__mhd.get_connection_info = (__typeof__(kt__mhd.get_connection_info))fn[7];
  kt__mhd.lookup_connection_value = (__typeof__(kt__mhd.lookup_connection_value))fn[8];
  kt__mhd.create_response_from_fd64 = (__typeof__(kt__mhd.create_response_from_fd64))fn[9];
  kt__mhd.start_daemon = (__typeof__(kt__mhd.start_daemon))fn[0]; /* the sign that it loaded */
}

kt_status kt__mhd_load(kt_error *err) {
  pthread_once(&mhd_once, load);
  if (!kt__mhd.start_daemon) return kt_fail(err, KT_ERUNTIME, "%s", mhd_failure.msg);
  return KT_OK;
}
