/*
 * coord_restore.c: the coordinator and a restored etcd (proto/etcd.md, "A
 * restored etcd"). While the history went back the leader computes,
 * proposes and publishes nothing, marks no node down, takes no run step
 * and compacts nothing: every one of those would act on a state that
 * forgot what hosts already did. It keeps reading (so the operator's
 * recover is seen) and says why on /healthz, the gauge and the log.
 */
#include "coord.h"

#define COORD_RESTORE_ACTION "no plan, publish, down marking or run step until `ringctl recover`"

bool coord_restore_step(coord *c, const rk_state *s) {
  rk_state_history(c->etcd, s);
  return rd_restore_observe(&c->restore, c->etcd, COORD_RESTORE_ACTION);
}

void coord_restore_follow(coord *c) {
  rd_restore_observe(&c->restore, c->etcd, COORD_RESTORE_ACTION);
}
