/* The commands' JSON cost file reader (--costs FILE), apart from the rest
 * of args.c: the lean `kaiten` binary (src/cli/front.c) links no JSON
 * reader and has a definition of its own. */
#include "cli/cli.h"

kt_status cli_costs_file(kt_costs *c, const char *path, kt_error *err) {
  return kt_costs_load_json(c, path, err);
}
