"""The C declarations the binding uses, copied from include/ring.h and
include/ring_etcd.h (cffi's ABI mode reads no header: these lines are its
only knowledge of libring's types and calls).

They must stay identical to the headers: tests/test_cdef.py preprocesses the
real headers and checks every struct, enum value and prototype below against
them, so a header change that this file misses fails the python tests instead
of corrupting memory. ABI: written for libring 0.2 (SONAME libring.so.0.2);
the loader refuses another minor version while libring is 0.x.
"""

ABI_VERSION = (0, 2)

CDEF = """
typedef enum ring_errno {
  RING_OK = 0,
  RING_EINVAL = -1,
  RING_ENOMEM = -2,
  RING_ETOOBIG = -3,
  RING_EJSON = -4,
  RING_EFORMAT = -5,
  RING_EFIELD = -6,
  RING_ETOKENS = -7,
  RING_EREPLICAS = -8,
  RING_EHASH = -9,
  RING_ENODEID = -10,
  RING_EDUPNODE = -11,
  RING_ENODE = -12,
  RING_EOWNERS = -13,
  RING_EINDEX = -14,
  RING_EDUPOWNER = -15,
  RING_ECHECKSUM = -16,
  RING_EPENDING = -17,
  RING_EVERSION = -18,
  RING_ESTALE = -19,
  RING_ERANGE = -20,
  RING_ENOTFOUND = -21,
  RING_EUNAVAIL = -22,
  RING_EBUSY = -23,
  RING_EPLAN = -24,
  RING_EUNKNOWN = -25,
  RING_EAUTH = -26,
  RING_ENOTLEADER = -27,
  RING_ECONFLICT = -28,
  RING_ECONNECT = -29,
  RING_ETIMEDOUT = -30,
  RING_EPROTO = -31,
  RING_ESERVER = -32,
  RING_EIO = -33,
  RING_EEXIST = -34,
  RING_ENOSPC = -35
} ring_errno;

typedef struct ring_error {
  int code;
  char message[256];
} ring_error;

const char *ring_strerror(int code);
const char *ring_version(void);

typedef enum ring_node_state {
  RING_NODE_JOINING = 0,
  RING_NODE_ACTIVE,
  RING_NODE_DRAINING,
  RING_NODE_DOWN,
  RING_NODE_REMOVED
} ring_node_state;

typedef struct ring_table ring_table;

typedef struct ring_view {
  const uint16_t *owners;
  uint64_t seed;
  uint32_t tokens;
  uint32_t shift;
  uint32_t replicas;
} ring_view;

int ring_table_decode(const char *json, size_t len, ring_table **out, ring_error *err);
int ring_table_encode(const ring_table *t, char **json, size_t *len);
void ring_table_free(ring_table *t);
int ring_table_seal(ring_table *t, ring_error *err);
int ring_table_clone(const ring_table *t, uint64_t version, ring_table **out);

uint64_t ring_table_version(const ring_table *t);
const char *ring_table_cluster(const ring_table *t);
const char *ring_table_failure_domain(const ring_table *t);
uint64_t ring_table_seed(const ring_table *t);
uint32_t ring_table_tokens(const ring_table *t);
uint32_t ring_table_replicas(const ring_table *t);
uint32_t ring_table_node_count(const ring_table *t);
const ring_view *ring_table_view(const ring_table *t);
const char *ring_table_node_id(const ring_table *t, uint16_t index);
const char *ring_table_node_addr(const ring_table *t, uint16_t index);
double ring_table_node_weight(const ring_table *t, uint16_t index);
ring_node_state ring_table_node_state(const ring_table *t, uint16_t index);
uint32_t ring_table_node_label_count(const ring_table *t, uint16_t index);
int ring_table_node_label_at(const ring_table *t, uint16_t index, uint32_t k, const char **key, const char **value);
int ring_table_find_node(const ring_table *t, const char *id);
uint32_t ring_table_pending_count(const ring_table *t);
const char *ring_node_state_name(ring_node_state s);

uint32_t ring_table_token(const ring_table *t, const void *key, size_t len);
int ring_lookup(const ring_table *t, const void *key, size_t len, uint16_t *owners, int max);
int ring_write_set(const ring_table *t, uint32_t token, uint16_t *nodes, int max);
int ring_read_replica(const ring_table *t, const void *key, size_t len, uint16_t *node);

typedef struct ring_bounded ring_bounded;

typedef struct ring_bounded_opts {
  double c;
  double margin;
  uint32_t sticky_capacity;
  uint64_t sticky_ttl_ms;
} ring_bounded_opts;

int ring_bounded_new(const ring_bounded_opts *o, ring_bounded **out);
void ring_bounded_free(ring_bounded *b);
int ring_bounded_route(ring_bounded *b, const ring_table *t, const void *key, size_t len, const uint64_t *loads, uint64_t total, uint64_t now_ms, uint16_t *node, int *first_choice);

typedef struct ring_live ring_live;

int ring_live_new(ring_live **out);
void ring_live_free(ring_live *l);
const ring_table *ring_live_enter(ring_live *l);
void ring_live_exit(ring_live *l);
uint64_t ring_live_version(ring_live *l);

typedef struct ring_etcd ring_etcd;

typedef struct ring_etcd_opts {
  const char *endpoints;
  const char *user;
  const char *password;
  const char *ca_file;
  const char *cert_file;
  const char *key_file;
  uint32_t timeout_ms;
  uint32_t connect_timeout_ms;
} ring_etcd_opts;

int ring_etcd_open(const ring_etcd_opts *o, ring_etcd **out, ring_error *err);
void ring_etcd_close(ring_etcd *c);

typedef struct ring_watcher ring_watcher;

typedef void (*ring_table_cb)(void *ud, const ring_table *t);

typedef enum ring_log_level { RING_LOG_INFO = 1, RING_LOG_WARN, RING_LOG_ERROR } ring_log_level;
typedef struct ring_log_event {
  ring_log_level level;
  const char *msg;
  const char *cluster;
  uint64_t version;
  const char *source;
  const char *error;
} ring_log_event;
typedef void (*ring_log_cb)(void *log_ud, const ring_log_event *ev);

typedef struct ring_watcher_opts {
  const char *cluster;
  const char *ack_id;
  ring_table_cb on_table;
  void *ud;
  ring_log_cb log;
  void *log_ud;
  _Bool own_stream;
} ring_watcher_opts;

int ring_watcher_start(ring_etcd *c, const ring_watcher_opts *o, ring_live *live, ring_watcher **out, ring_error *err);
void ring_watcher_stop(ring_watcher *w);

typedef struct ring_watcher_stats {
  uint64_t version;
  uint64_t swaps;
  uint64_t deltas;
  uint64_t rejected;
  uint64_t errors;
} ring_watcher_stats;
void ring_watcher_stats_get(ring_watcher *w, ring_watcher_stats *out);
"""
