/* Text and CSV forms of a schedule: parse, print, exact round-trip.
 *
 * CSV (PyTorch-compatible, compute only): one row per rank, one cell per time
 * slot, an empty cell is an idle slot. Text: one line per rank, actions
 * separated by blanks, "-" an idle slot, '#' starts a comment line; the line
 * "# kaiten p=P v=V m=M placement=loop|v|explicit [name=NAME]" pins the
 * layout (explicit: the table is inferred from where the actions sit).
 * Idle slots are kept in the IR (idle_before / idle_after) only so that a
 * file prints back exactly as it was read; executors ignore them.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/schedule.h"
#include "schedule/rows.h"

#define OVERLAP_SUFFIX "OVERLAP_F_B"

int kt_action_format(const kt_action *a, char *buf, size_t n) {
  if (!kt_op_has_mb(a->op)) return snprintf(buf, n, "%d%s", a->stage, kt_op_name(a->op));
  return snprintf(buf, n, "%d%s%d", a->stage, kt_op_name(a->op), a->mb);
}

const char *kt_action_text(const kt_action *a, char buf[KT_ACTION_TEXT]) {
  kt_action_format(a, buf, KT_ACTION_TEXT);
  return buf;
}

/* Op spellings a file may use. BW (legacy full backward) only exists while
 * reading: it becomes KT_OP_B once the notation is known. */

static int op_from_name(const char *name, size_t len) {
  if (len == 2 && !memcmp(name, "BW", 2)) return KT__RAW_BW;
  for (int op = 0; op < KT_OP_ANY_COUNT; op++)
    if (strlen(kt_op_name(op)) == len && !memcmp(kt_op_name(op), name, len)) return op;
  return -1;
}

/* One token <stage><op>[<mb>] with any op spelling; the per-stage ops
 * (REDUCE_GRAD, UNSHARD, ...) have no micro-batch (stored as -1). */
static kt_status parse_token(const char *s, size_t len, kt_action *out, kt_error *err) {
  char tok[64];
  if (len == 0) return kt_fail(err, KT_EPARSE, "empty action");
  if (len >= sizeof tok) return kt_fail(err, KT_EPARSE, "action '%.40s...' is too long", s);
  memcpy(tok, s, len);
  tok[len] = 0;
  size_t i = 0;
  while (i < len && isdigit((unsigned char)tok[i])) i++;
  if (i == 0) return kt_fail(err, KT_EPARSE, "action '%s' does not start with a stage number", tok);
  size_t op_at = i;
  while (i < len && (isalpha((unsigned char)tok[i]) || tok[i] == '_')) i++;
  size_t op_len = i - op_at;
  size_t mb_at = i;
  while (i < len && isdigit((unsigned char)tok[i])) i++;
  if (op_len == 0 || i != len)
    return kt_fail(err, KT_EPARSE, "action '%s' is not of the form <stage><op><mb> (e.g. 0F0)",
                   tok);
  int op = op_from_name(tok + op_at, op_len);
  if (op < 0)
    return kt_fail(err, KT_EPARSE,
                   "unknown op '%.*s' in action '%s' (expected F, B, I, W, BW, SEND_F, RECV_F, "
                   "SEND_B, RECV_B, WAIT_SEND_F, WAIT_SEND_B, REDUCE_GRAD, WAIT_REDUCE_GRAD, "
                   "UNSHARD or RESHARD)",
                   (int)op_len, tok + op_at, tok);
  int has_mb = op == KT__RAW_BW || kt_op_has_mb(op);
  if (has_mb && mb_at == len)
    return kt_fail(err, KT_EPARSE, "action '%s' has no micro-batch number (e.g. 0%s0)", tok,
                   op == KT__RAW_BW ? "BW" : kt_op_name(op));
  if (!has_mb && mb_at != len)
    return kt_fail(err, KT_EPARSE,
                   "action '%s': %s is per stage and takes no micro-batch (e.g. 0%s)", tok,
                   kt_op_name(op), kt_op_name(op));
  char num[64];
  long stage, mb = -1;
  snprintf(num, sizeof num, "%.*s", (int)op_at, tok);
  if (kt_parse_int(num, 0, (long)KT_MAX_RANKS * KT_MAX_CHUNKS - 1, &stage) != 0)
    return kt_fail(err, KT_EPARSE, "stage number in action '%s' is out of range", tok);
  if (has_mb && kt_parse_int(tok + mb_at, 0, KT_MAX_MICROBATCHES - 1, &mb) != 0)
    return kt_fail(err, KT_EPARSE, "micro-batch number in action '%s' is out of range", tok);
  out->stage = (int32_t)stage;
  out->mb = (int32_t)mb;
  out->op = (uint8_t)op;
  out->flags = 0;
  out->idle_before = 0;
  return KT_OK;
}

kt_status kt_action_parse(const char *s, size_t len, kt_action *out, kt_error *err) {
  kt_status st = parse_token(s, len, out, err);
  if (st) return st;
  if (out->op >= KT_OP_COUNT)
    return kt_fail(err, KT_EPARSE, "'%.*s' is not a compute action (F, B, I or W)", (int)len, s);
  return KT_OK;
}

/* ---- parsing ------------------------------------------------------------- */

void kt__rows_free(kt__row_list *rl) {
  for (size_t i = 0; i < rl->n; i++) free(rl->rows[i].actions);
  free(rl->rows);
}

static kt_status row_push(kt_rank_actions *row, kt_action a, kt_error *err) {
  if (kt_grow((void **)&row->actions, &row->cap, row->n + 1, sizeof a) != 0)
    return kt_fail(err, KT_ENOMEM, "out of memory");
  row->actions[row->n++] = a;
  return KT_OK;
}

/* One cell/token: an action, an overlapped group, or an idle slot (empty or "-"). */
static kt_status parse_cell(const char *c, size_t len, kt_rank_actions *row, uint32_t *pending_idle,
                            int lineno, kt_error *err) {
  while (len && isspace((unsigned char)*c)) c++, len--;
  while (len && isspace((unsigned char)c[len - 1])) len--;
  if (len == 0 || (len == 1 && *c == '-')) {
    if (*pending_idle >= UINT16_MAX)
      return kt_fail(err, KT_EPARSE, "line %d: too many consecutive idle slots", lineno);
    (*pending_idle)++;
    return KT_OK;
  }
  kt_error sub;
  if (*c == '(') {
    const char *close = memchr(c, ')', len);
    size_t suffix_len = close ? len - (size_t)(close + 1 - c) : 0;
    if (!close || suffix_len != strlen(OVERLAP_SUFFIX) ||
        memcmp(close + 1, OVERLAP_SUFFIX, suffix_len) != 0)
      return kt_fail(err, KT_EPARSE, "line %d: bad overlapped cell '%.*s' (expected (a;b)%s)",
                     lineno, (int)(len > 60 ? 60 : len), c, OVERLAP_SUFFIX);
    const char *p = c + 1;
    int parts = 0;
    for (;;) { /* every ';' is followed by an action: "(0F0;)" is an error */
      const char *semi = memchr(p, ';', (size_t)(close - p));
      const char *end = semi ? semi : close;
      kt_action a;
      if (end == p)
        return kt_fail(err, KT_EPARSE, "line %d: empty action in overlapped cell '%.*s'", lineno,
                       (int)(len > 60 ? 60 : len), c);
      if (parse_token(p, (size_t)(end - p), &a, &sub) != KT_OK)
        return kt_fail(err, KT_EPARSE, "line %d: %s", lineno, sub.msg);
      if (a.op >= KT_OP_COUNT && a.op != KT__RAW_BW)
        return kt_fail(err, KT_EPARSE, "line %d: %s cannot be part of an overlapped cell", lineno,
                       kt_op_name(a.op));
      if (parts == 0) a.idle_before = (uint16_t)*pending_idle;
      kt_status st = row_push(row, a, err);
      if (st) return st;
      if (semi) row->actions[row->n - 1].flags |= KT_ACTION_OVERLAP_NEXT;
      parts++;
      if (!semi) break;
      p = semi + 1;
    }
    if (parts < 2)
      return kt_fail(err, KT_EPARSE, "line %d: overlapped cell '%.*s' needs two actions", lineno,
                     (int)len, c);
    *pending_idle = 0;
    return KT_OK;
  }
  kt_action a;
  if (parse_token(c, len, &a, &sub) != KT_OK)
    return kt_fail(err, KT_EPARSE, "line %d: %s", lineno, sub.msg);
  a.idle_before = (uint16_t)*pending_idle;
  *pending_idle = 0;
  return row_push(row, a, err);
}

/* Every blank that isspace() knows ends a header field, so a name never
 * holds one ("\r" in a name would be lost at the end of a written line). */
#define HEADER_BLANKS " \t\r\v\f"

static kt_status parse_header(const char *line, size_t len, kt__header *h, int lineno,
                              kt_error *err) {
  char buf[256];
  if (len >= sizeof buf) len = sizeof buf - 1;
  memcpy(buf, line, len);
  buf[len] = 0;
  char *save = NULL;
  strtok_r(buf, HEADER_BLANKS, &save);              /* "#" */
  char *tok = strtok_r(NULL, HEADER_BLANKS, &save); /* "kaiten" */
  (void)tok;
  while ((tok = strtok_r(NULL, HEADER_BLANKS, &save))) {
    char *eq = strchr(tok, '=');
    if (!eq) continue;
    *eq = 0;
    const char *key = tok, *val = eq + 1;
    long x;
    if (!strcmp(key, "p") || !strcmp(key, "v") || !strcmp(key, "m")) {
      if (kt_parse_int(val, 1, KT_MAX_MICROBATCHES, &x) != 0)
        return kt_fail(err, KT_EPARSE, "line %d: bad header value %s=%s", lineno, key, val);
      if (*key == 'p') h->p = (int)x;
      else if (*key == 'v') h->v = (int)x;
      else h->m = (int)x;
    } else if (!strcmp(key, "stages")) {
      if (kt_parse_int(val, 1, (long)KT_MAX_RANKS * KT_MAX_CHUNKS, &x) != 0)
        return kt_fail(err, KT_EPARSE, "line %d: bad header value stages=%s", lineno, val);
      h->s = (int)x;
    } else if (!strcmp(key, "placement")) {
      int pl = kt_placement_from_name(val);
      if (pl < 0)
        return kt_fail(err, KT_EPARSE, "line %d: unknown placement '%s' (loop, v or explicit)",
                       lineno, val);
      h->placement = pl == KT_PLACEMENT_EXPLICIT ? -1 : pl; /* explicit: inferred from the rows */
    } else if (!strcmp(key, "name")) {
      snprintf(h->name, sizeof h->name, "%s", val);
    }
  }
  return KT_OK;
}

/* CSV when a row holds a comma; '#' lines (a header name, comments) do not count. */
static int has_csv_rows(const char *text) {
  for (const char *line = text; *line;) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    size_t lead = 0;
    while (lead < len && isspace((unsigned char)line[lead])) lead++;
    if (lead < len && line[lead] != '#' && memchr(line, ',', len)) return 1;
    line += eol ? len + 1 : len;
  }
  return 0;
}

kt_status kt__read_rows(const char *text, kt__row_list *rl, kt__header *h, kt_error *err) {
  memset(rl, 0, sizeof *rl);
  *h = (kt__header){.p = -1, .v = -1, .m = -1, .placement = -1, .s = -1};
  int is_csv = has_csv_rows(text);
  kt_status st = KT_OK;
  int lineno = 0;
  for (const char *line = text; *line;) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    const char *next = eol ? eol + 1 : line + len;
    lineno++;
    if (len && line[len - 1] == '\r') len--;
    size_t lead = 0;
    while (lead < len && isspace((unsigned char)line[lead])) lead++;
    if (lead == len) {
      line = next;
      continue;
    } /* blank line */
    if (line[lead] == '#') {
      if (len - lead >= 8 && !strncmp(line + lead, "# kaiten", 8)) {
        h->seen = 1;
        if ((st = parse_header(line + lead, len - lead, h, lineno, err))) goto fail;
      }
      line = next;
      continue;
    }
    if (rl->n >= KT_MAX_RANKS) {
      st = kt_fail(err, KT_EPARSE, "more than %d ranks (rows)", KT_MAX_RANKS);
      goto fail;
    }
    if (kt_grow((void **)&rl->rows, &rl->cap, rl->n + 1, sizeof *rl->rows) != 0) {
      st = kt_fail(err, KT_ENOMEM, "out of memory");
      goto fail;
    }
    kt_rank_actions *row = &rl->rows[rl->n++];
    memset(row, 0, sizeof *row);
    uint32_t idle = 0;
    const char *c = line, *end = line + len;
    if (is_csv) {
      for (;;) {
        const char *comma = memchr(c, ',', (size_t)(end - c));
        const char *ce = comma ? comma : end;
        if ((st = parse_cell(c, (size_t)(ce - c), row, &idle, lineno, err))) goto fail;
        if (!comma) break;
        c = comma + 1;
      }
    } else {
      while (c < end) {
        while (c < end && isspace((unsigned char)*c)) c++;
        const char *te = c;
        while (te < end && !isspace((unsigned char)*te)) te++;
        if (te > c && (st = parse_cell(c, (size_t)(te - c), row, &idle, lineno, err))) goto fail;
        c = te;
      }
    }
    row->idle_after = idle;
    line = next;
  }
  if (rl->n == 0) {
    st = kt_fail(err, KT_EPARSE, "no schedule rows found (empty input)");
    goto fail;
  }
  return KT_OK;
fail:
  kt__rows_free(rl);
  return st;
}

kt_status kt_schedule_parse_file(const char *path, kt_schedule *out, kt_error *err) {
  return kt_schedule_parse_file_opts(path, NULL, out, err);
}

kt_status kt_schedule_parse_file_opts(const char *path, kt_parse_opts *opts, kt_schedule *out,
                                      kt_error *err) {
  memset(out, 0, sizeof *out); /* callers free out after any failure */
  char *text;
  size_t len;
  kt_status st = kt_read_text(path, KT_SCHEDULE_FILE_MAX, KT_SCHEDULE_LINE_MAX, &text, &len, err);
  if (st) return st;
  if (len == 0) {
    free(text);
    return kt_fail(err, KT_EPARSE, "'%s' is empty", path);
  }
  kt_error sub;
  st = kt_schedule_parse_opts(text, opts, out, &sub);
  free(text);
  if (st) return kt_fail(err, st, "%s: %s", path, sub.msg);
  return KT_OK;
}

/* ---- printing ------------------------------------------------------------ */

static void put_action(const kt_action *a, kt_notation n, kt_buf *b) {
  const char *op = kt_op_name(a->op);
  if (n == KT_NOTATION_LEGACY && a->op == KT_OP_I) op = "B";
  else if (n == KT_NOTATION_LEGACY && a->op == KT_OP_B) op = "BW";
  if (kt_op_has_mb(a->op)) kt_buf_printf(b, "%d%s%d", a->stage, op, a->mb);
  else kt_buf_printf(b, "%d%s", a->stage, op);
}

static void write_rank(const kt_rank_actions *ra, kt_notation n, kt_buf *b, const char *sep,
                       const char *idle) {
  /* an empty CSV line would be skipped as blank: a rank without actions
   * writes its idle slots as "-", and at least one */
  if (ra->n == 0) idle = "-";
  int first = 1;
#define SEP() \
  do { \
    if (!first) kt_buf_puts(b, sep); \
    first = 0; \
  } while (0)
  for (size_t i = 0; i < ra->n; i++) {
    const kt_action *a = &ra->actions[i];
    for (unsigned k = 0; k < a->idle_before; k++) {
      SEP();
      kt_buf_puts(b, idle);
    }
    SEP();
    if (a->flags & KT_ACTION_OVERLAP_NEXT) {
      kt_buf_puts(b, "(");
      while (i < ra->n) {
        put_action(&ra->actions[i], n, b);
        if (!(ra->actions[i].flags & KT_ACTION_OVERLAP_NEXT) || i + 1 == ra->n) break;
        kt_buf_puts(b, ";");
        i++;
      }
      kt_buf_puts(b, ")" OVERLAP_SUFFIX);
    } else {
      put_action(a, n, b);
    }
  }
  for (unsigned k = 0; k < ra->idle_after; k++) {
    SEP();
    kt_buf_puts(b, idle);
  }
  if (first) kt_buf_puts(b, idle);
#undef SEP
  kt_buf_puts(b, "\n");
}

void kt_schedule_write_csv_notation(const kt_schedule *s, kt_notation n, kt_buf *b) {
  for (int r = 0; r < s->p; r++) write_rank(&s->ranks[r], n, b, ",", "");
}

void kt_schedule_write_csv(const kt_schedule *s, kt_buf *b) {
  kt_schedule_write_csv_notation(s, KT_NOTATION_CURRENT, b);
}

void kt_schedule_write_text(const kt_schedule *s, kt_buf *b) {
  kt_buf_printf(b, "# kaiten p=%d v=%d m=%d placement=%s", s->p, s->v, s->m,
                kt_placement_name(s->placement));
  if (!kt_schedule_even(s)) kt_buf_printf(b, " stages=%d", kt_schedule_stages(s));
  if (s->name[0]) kt_buf_printf(b, " name=%s", s->name);
  kt_buf_puts(b, "\n");
  for (int r = 0; r < s->p; r++) write_rank(&s->ranks[r], KT_NOTATION_CURRENT, b, " ", "-");
}
