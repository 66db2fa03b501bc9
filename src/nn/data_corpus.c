/* The built-in corpus: scenes at a kaiten-zushi bar, generated from a small
 * grammar and lexicon written for kaiten (no external text). Each scene has
 * a guest, a few things that happen on the belt, and a bill whose amount
 * follows from the plates the guest took, so a model can learn spelling,
 * grammar, agreement with the guest's name and pronoun, and a little
 * counting. Generated with a fixed seed: the same bytes everywhere. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/data.h"
#include "nn/nn.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

static const char *const names[] = {"Aki", "Ren", "Yuki", "Sora", "Hana",
                                    "Kai", "Mio", "Taro", "Emi",  "Jun"};
static const char *const pronouns[] = {"she", "he",  "she", "he",  "she",
                                       "he",  "she", "he",  "she", "he"};
static const char *const dishes[] = {
    "tuna",       "salmon",    "eel",        "squid", "shrimp",        "octopus", "mackerel",
    "yellowtail", "sea bream", "salmon roe", "egg",   "cucumber roll", "scallop", "crab"};
static const char *const looks[] = {"fresh", "fatty", "grilled", "small",
                                    "large", "cold",  "seared",  "sweet"};
static const char *const colors[] = {"red", "blue", "green", "gold", "white"};
static const int prices[] = {100, 150, 200, 300, 500}; /* per color */
static const char *const manners[] = {"slowly", "quickly", "happily", "quietly", "carefully"};
static const char *const tastes[] = {"good", "fresh", "tender", "rich", "salty", "delicious"};
static const char *const chef_verbs[] = {"slices", "rolls", "grills", "prepares", "sears"};
static const char *const places[] = {"at the counter", "near the door", "by the window",
                                     "next to the belt"};
static const char *const arrivals[] = {"sits down", "walks in and sits down", "arrives"};
static const char *const drinks[] = {"a cup of green tea", "some miso soup", "a glass of water"};
static const char *const numbers[] = {"zero", "one",   "two",   "three", "four", "five",
                                      "six",  "seven", "eight", "nine",  "ten"};

typedef struct {
  char *buf;
  size_t len, cap;
  kt__rng rng;
} writer;

static int pick(writer *w, int n) { return (int)(kt__rng_next(&w->rng) % (uint64_t)n); }

static void put(writer *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(w->buf + w->len, w->cap - w->len, fmt, ap);
  va_end(ap);
  if (n > 0 && w->len + (size_t)n < w->cap) w->len += (size_t)n;
}

/* "word" with its first letter in upper case, into a small buffer */
static const char *capital(char *dst, size_t n, const char *word) {
  snprintf(dst, n, "%s", word);
  if (dst[0] >= 'a' && dst[0] <= 'z') dst[0] = (char)(dst[0] - 'a' + 'A');
  return dst;
}

/* One scene (under 1 KiB). */
static void scene(writer *w) {
  int g = pick(w, COUNT(names));
  const char *name = names[g], *he = pronouns[g];
  int taken[COUNT(colors)] = {0}, plates = 0;
  char word[32];
  put(w, "%s %s %s.", name, arrivals[pick(w, COUNT(arrivals))], places[pick(w, COUNT(places))]);
  int events = 3 + pick(w, 4);
  for (int e = 0; e < events; e++) {
    const char *dish = dishes[pick(w, COUNT(dishes))];
    int c = pick(w, COUNT(colors));
    switch (pick(w, 7)) {
      case 0:
      case 1: /* a plate comes by and is taken */
        put(w, " A %s plate of %s %s comes by, and %s takes it.", colors[c],
            looks[pick(w, COUNT(looks))], dish, name);
        put(w, " %s eats the %s %s.", capital(word, sizeof word, he), dish,
            manners[pick(w, COUNT(manners))]);
        taken[c]++, plates++;
        break;
      case 2: /* a plate is let pass */
        put(w, " A %s plate of %s goes by, but %s lets it pass.", colors[c], dish, name);
        break;
      case 3:
        put(w, " The chef %s %s %s for %s.", chef_verbs[pick(w, COUNT(chef_verbs))],
            looks[pick(w, COUNT(looks))], dish, name);
        break;
      case 4: put(w, " \"One more %s, please,\" says %s.", dish, name); break;
      case 5: put(w, " %s drinks %s.", name, drinks[pick(w, COUNT(drinks))]); break;
      default: put(w, " The %s is %s.", dish, tastes[pick(w, COUNT(tastes))]); break;
    }
  }
  int total = 0;
  for (int c = 0; c < COUNT(colors); c++) total += taken[c] * prices[c];
  if (plates == 0) {
    put(w, " %s takes nothing and leaves.\n\n", name);
    return;
  }
  put(w, " %s ate %s plate%s.", name, numbers[plates], plates == 1 ? "" : "s");
  for (int c = 0; c < COUNT(colors); c++)
    if (taken[c])
      put(w, " %s %s plate%s %d yen.", capital(word, sizeof word, numbers[taken[c]]), colors[c],
          taken[c] == 1 ? " costs" : "s cost", taken[c] * prices[c]);
  put(w, " The bill is %d yen.\n\n", total);
}

kt_status kt_data_builtin_text(char **out, size_t *len, kt_error *err) {
  writer w = {malloc(KT_DATA_BUILTIN_BYTES + 1), 0, KT_DATA_BUILTIN_BYTES + 1, {0}};
  if (!w.buf) return kt_fail(err, KT_ENOMEM, "out of memory generating the built-in corpus");
  kt__rng_seed(&w.rng, 0x6b616974656e); /* fixed: the corpus never changes */
  size_t last = 0;
  for (;;) {
    scene(&w);
    if (w.len + 1024 >= w.cap) break; /* stop before a scene could be cut */
    last = w.len;
  }
  w.len = last;
  w.buf[w.len] = '\0';
  *out = w.buf;
  *len = w.len;
  return KT_OK;
}
