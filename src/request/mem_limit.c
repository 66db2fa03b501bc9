/* Memory limits as users write them: mem-act units ("12"), a fraction of
 * 1F1B's peak on the same model ("0.5x"), or bytes ("2GiB"). The one reader
 * of these forms (scripts/check-layers.sh holds every other file to it). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kaiten/request.h"

kt_status kt_mem_limit_parse(const char *name, const char *text, int allow_bytes, kt_mem_limit *out,
                             kt_error *err) {
  static const struct {
    const char *suffix;
    double scale;
  } bytes[] = {{"TiB", 1099511627776.0},
               {"GiB", 1073741824.0},
               {"MiB", 1048576.0},
               {"KiB", 1024.0},
               {"B", 1.0}};
  size_t n = strlen(text);
  char num[64];
  double x, scale = 1;
  kt_mem_kind kind = KT_MEM_UNITS;
  if (n > 1 && (text[n - 1] == 'x' || text[n - 1] == 'X')) {
    kind = KT_MEM_FRACTION, n--;
  } else {
    for (size_t i = 0; i < sizeof bytes / sizeof *bytes; i++) {
      size_t k = strlen(bytes[i].suffix);
      if (n > k && !strcmp(text + n - k, bytes[i].suffix)) {
        kind = KT_MEM_BYTES, scale = bytes[i].scale, n -= k;
        break;
      }
    }
  }
  int shown = (int)(strlen(text) > 40 ? 40 : strlen(text));
  const char *more = strlen(text) > 40 ? "..." : "";
  if (n == 0 || n >= sizeof num) goto bad;
  memcpy(num, text, n);
  num[n] = 0;
  /* above 0: a limit of 0 would fit nothing (leave the setting out for
   * the schedule's own); units and fractions in the costs' range
   * (kt_cost_value_check), so that no sum formed with it overflows; a
   * number too small for a double (5e-324) is as out of range as 0 */
  if (kt_parse_double(num, &x) || !(x > 0) ||
      !(x * scale <= KT_COST_MAX * (kind == KT_MEM_BYTES ? 1e6 : 1)) ||
      (kind != KT_MEM_BYTES && x < KT_COST_MIN))
    goto bad;
  if (kind == KT_MEM_BYTES && !allow_bytes)
    return kt_fail(err, KT_EINVAL,
                   "%s '%.*s%s': bytes need a model (kaiten train); give mem-act "
                   "units (12) or a fraction of 1F1B's peak (0.5x)",
                   name, shown, text, more);
  *out = (kt_mem_limit){kind, x * scale, ""};
  /* as written when it fits, else "" (printed back from the value) */
  if (strlen(text) < sizeof out->text) snprintf(out->text, sizeof out->text, "%s", text);
  return KT_OK;
bad:
  return kt_fail(err, KT_EINVAL,
                 "%s '%.*s%s': expected a number above 0 (in %g..%g): mem-act "
                 "units per rank (12), a fraction of 1F1B's peak (0.5x)%s",
                 name, shown, text, more, KT_COST_MIN, KT_COST_MAX,
                 allow_bytes ? " or bytes (2GiB, 512MiB)" : "");
}

/* 1F1B's whole peak for the layout, the scratch of the op that runs at it
 * included (as kaiten train measures it), and that scratch. */
static double peak_with_scratch(kt_gen_kind kind, int p, int m, int v, const kt_costs *c,
                                double *scratch) {
  kt_gen_params params = {.p = p, .m = m, .v = v, .costs = c};
  *scratch = 0;
  int stages = p * (v > 0 ? v : kt_gen_default_chunks(kind));
  for (int s = 0; s < stages; s++) *scratch = fmax(*scratch, kt_cost_mem_transient(c, s));
  return kt_gen_1f1b_peak(kind, &params) + *scratch;
}

double kt_mem_limit_units(const kt_mem_limit *ml, kt_gen_kind kind, int p, int m, int v,
                          const kt_costs *c) {
  if (!kt_mem_limit_given(ml)) return -1;
  if (ml->kind != KT_MEM_FRACTION) return ml->value;
  double scratch, peak = peak_with_scratch(kind, p, m, v, c, &scratch);
  double limit = ml->value * peak - scratch;
  return limit > 0 ? limit : 1e-9 * peak; /* below any order: the generator says what it needs */
}

double kt_mem_limit_fraction(double units, kt_gen_kind kind, int p, int m, int v,
                             const kt_costs *c) {
  double scratch, peak = peak_with_scratch(kind, p, m, v, c, &scratch);
  return peak > 0 ? (units + scratch) / peak : -1;
}

void kt_mem_limit_format(const kt_mem_limit *ml, char *buf, size_t n) {
  if (ml->text[0]) snprintf(buf, n, "%s", ml->text);
  else
    snprintf(buf, n, "%.17g%s", ml->value,
             ml->kind == KT_MEM_FRACTION ? "x"
             : ml->kind == KT_MEM_BYTES  ? "B"
                                         : "");
}
