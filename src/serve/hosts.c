/* The Host check: a request must name this server, so that a web page
 * elsewhere cannot reach it through a name of its own that resolves here
 * (DNS rebinding). The names accepted: the loopback's (localhost,
 * 127.0.0.1, [::1]), the bound address, every address of the machine's
 * interfaces when bound to all of them (0.0.0.0), the machine's host name,
 * and the names the caller allows (--allow-host). No name is looked up in
 * the DNS: the check reads nothing but the machine's own configuration.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve/serve_internal.h"

int kt_serve_host_exposed(const char *host) {
  if (!host || !strcmp(host, "localhost")) return 0;
  struct in_addr a;
  if (inet_pton(AF_INET, host, &a) != 1) return 1;
  return (ntohl(a.s_addr) >> 24) != 127;
}

/* Adds name (lower case, no trailing dot) unless it is empty or there. */
static int add(kt_server *s, const char *name, size_t n) {
  while (n && name[n - 1] == '.') n--;
  if (!n || n > 253) return 0;
  for (int i = 0; i < s->n_hosts; i++)
    if (strlen(s->hosts[i]) == n && !strncasecmp(s->hosts[i], name, n)) return 0;
  char **grown = realloc(s->hosts, sizeof *grown * (size_t)(s->n_hosts + 1));
  if (!grown) return -1;
  s->hosts = grown;
  char *copy = malloc(n + 1);
  if (!copy) return -1;
  for (size_t i = 0; i < n; i++) copy[i] = (char)tolower((unsigned char)name[i]);
  copy[n] = 0;
  s->hosts[s->n_hosts++] = copy;
  return 0;
}

static int add_str(kt_server *s, const char *name) { return add(s, name, strlen(name)); }

/* Every IPv4 address of the machine's interfaces. */
static int add_interfaces(kt_server *s) {
  struct ifaddrs *list;
  if (getifaddrs(&list)) return 0; /* none known: the names remain */
  int rc = 0;
  for (struct ifaddrs *i = list; i && !rc; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    const struct sockaddr_in *sa = (const struct sockaddr_in *)i->ifa_addr;
    if (inet_ntop(AF_INET, &sa->sin_addr, text, sizeof text)) rc = add_str(s, text);
  }
  freeifaddrs(list);
  return rc;
}

kt_status kt__hosts_init(kt_server *s, const char *bound, const kt_serve_config *cfg,
                         kt_error *err) {
  int rc = add_str(s, "localhost") || add_str(s, "127.0.0.1") || add_str(s, "[::1]");
  if (!rc && strcmp(bound, "0.0.0.0")) rc = add_str(s, bound);
  if (!rc && !strcmp(bound, "0.0.0.0")) rc = add_interfaces(s);
  char name[256];
  if (!rc && gethostname(name, sizeof name) == 0) {
    name[sizeof name - 1] = 0;
    rc = add_str(s, name) || add(s, name, strcspn(name, ".")); /* and its short form */
  }
  for (int i = 0; i < cfg->n_allow_hosts && !rc; i++)
    if (cfg->allow_hosts && cfg->allow_hosts[i]) rc = add_str(s, cfg->allow_hosts[i]);
  return rc ? kt_fail(err, KT_ENOMEM, "out of memory") : KT_OK;
}

void kt__hosts_free(kt_server *s) {
  for (int i = 0; i < s->n_hosts; i++) free(s->hosts[i]);
  free(s->hosts);
  s->hosts = NULL;
  s->n_hosts = 0;
}

int kt__host_ok(const kt_server *s, const char *h) {
  if (!h) return 1; /* HTTP/1.0 without Host: not a browser, which always sends it */
  /* the name without its port: "name:8080", "[::1]:8080" */
  size_t n = h[0] == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":");
  if (n > strlen(h)) return 0;
  const char *port = h + n;
  if (*port && (*port != ':' || strspn(port + 1, "0123456789") != strlen(port + 1))) return 0;
  while (n > 1 && h[n - 1] == '.') n--; /* "localhost." names the same host */
  for (int i = 0; i < s->n_hosts; i++)
    if (strlen(s->hosts[i]) == n && !strncasecmp(s->hosts[i], h, n)) return 1;
  return 0;
}
