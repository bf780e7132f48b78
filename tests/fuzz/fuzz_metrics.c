/*
 * fuzz_metrics.c: libFuzzer target for the /metrics rewrite every daemon
 * serves through (rd_metrics_finish, daemon/text.c): whatever text a
 * daemon's metrics function wrote, the answer starts with the build_info
 * gauge, keeps comments, blank lines and lines with no name and value as
 * they were, puts cluster="..." first in every sample's labels, and never
 * reads past the input.
 */
#include "daemon.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CLUSTER "{cluster=\"fz\""

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536 || memchr(data, '\0', size) != NULL)
    return 0; /* a metrics text is a C string, bounded */
  rd_text in = {0}, out = {0};
  ring__sb_printf(&in, "%.*s", (int)size, (const char *)data);
  rd_metrics_identify("fuzz", "fz");
  rd_metrics_finish(&in, &out);
  if (out.oom || strncmp(out.p, "# HELP ring_fuzz_build_info ", 28) != 0)
    abort();
  for (const char *line = out.p; *line != '\0';) {
    const char *eol = strchr(line, '\n');
    if (eol == NULL)
      abort();                           /* every line ends */
    size_t name = strcspn(line, "{ \n"); /* a line without either is no sample: as it was */
    if (line[0] != '#' && line[name] != '\n' && strncmp(line + name, CLUSTER, strlen(CLUSTER)) != 0)
      abort();
    line = eol + 1;
  }
  free(in.p);
  free(out.p);
  return 0;
}
