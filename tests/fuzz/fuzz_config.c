/*
 * fuzz_config.c: libFuzzer target for the config file reader the daemons
 * and ringctl share (rd_conf_parse, daemon/opts_file.c). Every setting it
 * hands on has a name of name characters and a value inside the input's
 * buffer; a refusal names where ("fuzz.conf" or "fuzz.conf:LINE"); input
 * over RD_CONF_MAX is refused whole.
 */
#include "../../daemon/daemon.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct bounds {
  const char *lo, *hi;
  unsigned settings;
} bounds;

/* Takes a few names (as ringctl does), refuses the rest. */
static int check(void *ud, const char *name, char *value, const char *where, char *err,
                 size_t errcap) {
  bounds *b = ud;
  if (name[0] == '\0' || value < b->lo || value + strlen(value) > b->hi ||
      strncmp(where, "fuzz.conf:", 10) != 0)
    abort();
  for (const char *p = name; *p != '\0'; p++)
    if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
      abort();
  b->settings++;
  if (strcmp(name, "endpoints") != 0 && strcmp(name, "cluster") != 0 && strcmp(name, "as") != 0)
    return snprintf(err, errcap, "%s: unknown setting '%s'", where, name), -1;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL)
    return 0;
  memcpy(text, data, size);
  bounds b = {text, text + size, 0};
  char err[512] = "";
  int rc = rd_conf_parse("fuzz.conf", text, size, check, &b, err, sizeof err);
  if (rc != 0 && strncmp(err, "fuzz.conf", 9) != 0)
    abort(); /* a refusal says where */
  if (size > RD_CONF_MAX && (rc == 0 || b.settings != 0))
    abort(); /* too large: refused before any line */
  free(text);
  return 0;
}
