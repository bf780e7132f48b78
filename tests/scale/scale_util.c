/* scale_util.c: see scale_util.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "scale_util.h"
#include "proc_harness.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *scale_get(ring_etcd *c, const char *prefix, const char *what) {
  char key[256];
  snprintf(key, sizeof key, "%s%s", prefix, what);
  ring_kvs r = {0};
  if (ring_etcd_range(c, key, strlen(key), NULL, &r, NULL) != RING_OK)
    return NULL;
  char *v = r.n ? strdup((const char *)r.kvs[0].value) : NULL;
  ring_kvs_clear(&r);
  return v;
}

uint64_t scale_get_u64(ring_etcd *c, const char *prefix, const char *what) {
  char *v = scale_get(c, prefix, what);
  uint64_t n = v ? strtoull(v, NULL, 10) : 0;
  free(v);
  return n;
}

uint32_t scale_count(ring_etcd *c, const char *prefix, const char *what) {
  char key[256];
  snprintf(key, sizeof key, "%s%s", prefix, what);
  ring_range_opts ro = {.prefix = true, .count_only = true};
  ring_kvs r = {0};
  if (ring_etcd_range(c, key, strlen(key), &ro, &r, NULL) != RING_OK)
    return 0;
  uint32_t n = (uint32_t)r.count;
  ring_kvs_clear(&r);
  return n;
}

bool scale_proposed(ring_etcd *c, const char *prefix, int nodes, char id[24], uint32_t *moves) {
  char *v = scale_get(c, prefix, "plan/proposed");
  cJSON *j = v ? cJSON_Parse(v) : NULL;
  free(v);
  const cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "id");
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(j, "input");
  const cJSON *mv = cJSON_GetObjectItemCaseSensitive(j, "moves_total");
  int have = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(in, "nodes"));
  bool ok = cJSON_IsString(pid) && pid->valuestring[0] && have == nodes;
  if (ok) {
    snprintf(id, 24, "%s", pid->valuestring);
    *moves = cJSON_IsNumber(mv) ? (uint32_t)mv->valuedouble : 0;
  }
  cJSON_Delete(j);
  return ok;
}

/* Sum of the samples of `name` whose line holds every one of labels[0..n)
 * (exact text such as `grpc_method="Put"`). */
static double metric_sum_where(const char *text, const char *name, const char *const *labels,
                               int n) {
  double s = 0;
  size_t nl = strlen(name);
  for (const char *l = text; l && *l;) {
    const char *eol = strchr(l, '\n');
    size_t len = eol ? (size_t)(eol - l) : strlen(l);
    bool match = strncmp(l, name, nl) == 0 && (l[nl] == '{' || l[nl] == ' ');
    for (int i = 0; match && i < n; i++)
      match = memmem(l, len, labels[i], strlen(labels[i])) != NULL;
    if (match) {
      const char *sp = memrchr(l, ' ', eol ? (size_t)(eol - l) : strlen(l));
      if (sp)
        s += strtod(sp + 1, NULL);
    }
    l = eol ? eol + 1 : NULL;
  }
  return s;
}

double scale_metric_sum(const char *text, const char *name) {
  return metric_sum_where(text, name, NULL, 0);
}

char *scale_etcd_metrics(const etcd_member *m) {
  char hp[32];
  snprintf(hp, sizeof hp, "127.0.0.1:%d", m->client_port);
  return metrics_scrape(hp);
}

double scale_etcd_kv_ops(const char *text) {
  const char *ops[] = {"etcd_mvcc_range_total", "etcd_mvcc_put_total", "etcd_mvcc_txn_total",
                       "etcd_mvcc_delete_total"};
  double s = 0;
  for (int i = 0; i < 4; i++)
    s += scale_metric_sum(text, ops[i]);
  return s;
}

void scale_etcd_kv_requests(const char *text, double *reads, double *writes) {
  static const char *const methods[] = {"grpc_method=\"Range\"", "grpc_method=\"Put\"",
                                        "grpc_method=\"Txn\"", "grpc_method=\"DeleteRange\""};
  double n[4];
  for (int i = 0; i < 4; i++) {
    const char *labels[] = {"grpc_service=\"etcdserverpb.KV\"", methods[i]};
    n[i] = metric_sum_where(text, "grpc_server_handled_total", labels, 2);
  }
  *reads = n[0];
  *writes = n[1] + n[2] + n[3];
}
