/* kaiten in the page: the one call the reports' what-if panel makes into
 * kaiten's own schedule, generator and simulator code, compiled to
 * WebAssembly (the kaiten_wasm target builds src/web with the core layer
 * for wasm32-wasi; src/web/wasm.c exports it) and embedded in every HTML
 * report and the dashboard. Natively it is an ordinary library call, and
 * the tests run it so.
 */
#ifndef KAITEN_WEB_H
#define KAITEN_WEB_H

#include "kaiten/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs one what-if request and appends the answer, one JSON object, to out.
 *
 * args: blank-separated key=value settings named as kaiten sim's flags:
 *   schedule=NAME p=P m=M v=V   generate (ignored but P when order is given)
 *   tf= tb= tw= mem-act= mem-wgrad=   one value, or one per stage (a,b,c)
 *   per-stage=1                 the values are per stage (else one rank's
 *                               share, divided by V as kaiten sim does)
 *   comm= comm-latency= comm-bytes= comm-bandwidth= send-overhead=
 *   op-overhead= overlap=       as kaiten sim's (comm, comm-latency,
 *                               comm-bandwidth: one value, or one per link)
 *   mem-limit=X | mem-limit=Fx  zb-auto/zbv-auto's limit, and the limit a
 *                               reordered schedule is checked against:
 *                               mem-act units, or F times 1F1B's peak
 *   slow-rank=R:F[@S]           rank R's compute costs F times as much
 *   slow-link=A-B:+D[@S]        messages between ranks A and B take D longer
 *                               (kaiten sim's --slow-rank, --slow-link)
 *   replan=1                    with a fault: also the order's period without
 *                               it and the order zb-auto (zbv-auto) makes for
 *                               it under the same limit ("fault" below)
 *   exports=1                   add the schedule as kaiten text and as
 *                               PyTorch CSV, compute-only and lowered
 *   quick=1                     for a slider while it moves: zb-auto and
 *                               zbv-auto search quickly, zbv, v-half and
 *                               v-min are not tuned to the costs (as
 *                               constructed)
 * order: a schedule in kaiten text or CSV form to run instead of
 * generating one (NULL or empty: generate).
 *
 * The answer, on success:
 *   {"ok":true,
 *    "sim": kaiten sim --format json's object, events included,
 *    "slack": [one per event, kt_timeline_critical], "path": [event indices],
 *    "stage_rank": [rank of each stage], "mem_limit": units or null,
 *    "over_limit": [{"rank", "peak"} for ranks above mem_limit],
 *    "closed_memory": form or null, "closed_memory_expr": text or null,
 *    "quick": true when quick=1 changed the order (kaiten sim's is the
 *    full search's),
 *    "command": the kaiten sim flags that reproduce it (per-stage costs),
 *    "text", "csv", "csv_comms": with exports=1,
 *    "fault": with replan=1 and a fault, {"clean", "static", "replanned",
 *    "lower_bound", "schedule"}: the order's period without the fault and
 *    with it, the re-planned order's period, its bound and name}
 * and on failure {"ok":false,"status":"EDEADLOCK","error":"one line"}.
 * Returns the status. */
kt_status kt_web_run(const char *args, const char *order, kt_buf *out);

#ifdef __cplusplus
}
#endif

#endif
