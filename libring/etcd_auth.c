/*
 * etcd_auth.c: etcd's users and roles (/v3/auth/...), what an operator's
 * tool needs to give every actor of a cluster its own user with only the
 * permissions it uses (deploy/PRODUCTION.md, "Authentication and TLS").
 *
 * Each call is one request. An add that meets a name already there is
 * RING_EEXIST and a delete of a name that is not RING_ENOTFOUND, so a
 * setup run twice can tell "done before" from a failure;
 * grants are idempotent in etcd (granting what is granted changes nothing).
 * None is retried on another member once it may have arrived: a repeated
 * add would answer RING_EEXIST for its own first attempt.
 */
#include "etcd_int.h"

#include <string.h>

/* etcd answers an existing name with FailedPrecondition, whose code the
 * other calls share: the message is what tells them apart. */
static int auth_call(ring_etcd *c, const char *path, cJSON *body, int rc, ring_error *err) {
  cJSON *resp = NULL;
  rc = ring__etcd_run(c, path, body, rc, RING__WRITE, &resp, err);
  cJSON_Delete(resp);
  if (rc == RING_ESERVER && err != NULL && strstr(err->message, "already exists") != NULL)
    err->code = rc = RING_EEXIST;
  else if (rc == RING_ESERVER && err != NULL && strstr(err->message, "not found") != NULL)
    err->code = rc = RING_ENOTFOUND;
  return rc;
}

/* {name_field: a, other_field: b} (b may be NULL: left out). */
static int call2(ring_etcd *c, const char *path, const char *fa, const char *a, const char *fb,
                 const char *b, ring_error *err) {
  if (c == NULL || a == NULL || *a == '\0')
    return ring__err(err, RING_EINVAL, "etcd %s: no name", path);
  cJSON *body = cJSON_CreateObject();
  int rc = body && cJSON_AddStringToObject(body, fa, a) ? RING_OK : RING_ENOMEM;
  if (rc == RING_OK && b != NULL && cJSON_AddStringToObject(body, fb, b) == NULL)
    rc = RING_ENOMEM;
  return auth_call(c, path, body, rc, err);
}

int ring_etcd_user_add(ring_etcd *c, const char *user, const char *password, ring_error *err) {
  return call2(c, "auth/user/add", "name", user, "password", password ? password : "", err);
}

int ring_etcd_user_password(ring_etcd *c, const char *user, const char *password, ring_error *err) {
  return call2(c, "auth/user/changepw", "name", user, "password", password ? password : "", err);
}

int ring_etcd_user_grant(ring_etcd *c, const char *user, const char *role, ring_error *err) {
  if (role == NULL || *role == '\0')
    return ring__err(err, RING_EINVAL, "etcd auth/user/grant: no role");
  return call2(c, "auth/user/grant", "user", user, "role", role, err);
}

int ring_etcd_user_delete(ring_etcd *c, const char *user, ring_error *err) {
  return call2(c, "auth/user/delete", "name", user, NULL, NULL, err);
}

int ring_etcd_role_add(ring_etcd *c, const char *role, ring_error *err) {
  return call2(c, "auth/role/add", "name", role, NULL, NULL, err);
}

int ring_etcd_role_delete(ring_etcd *c, const char *role, ring_error *err) {
  return call2(c, "auth/role/delete", "role", role, NULL, NULL, err);
}

/* {"name": role, "perm": {"permType": p, "key": k, "range_end": e}}; a
 * single key has no range_end (etcd's rule: an empty end is one key). */
int ring_etcd_role_grant(ring_etcd *c, const char *role, ring_perm perm, const char *key,
                         bool prefix, ring_error *err) {
  if (c == NULL || role == NULL || *role == '\0' || key == NULL || *key == '\0' ||
      (unsigned)perm > RING_PERM_READWRITE)
    return ring__err(err, RING_EINVAL, "ring_etcd_role_grant: bad argument");
  cJSON *body = cJSON_CreateObject(), *p = cJSON_CreateObject();
  int rc = body && p && cJSON_AddStringToObject(body, "name", role) &&
                   cJSON_AddNumberToObject(p, "permType", (double)perm)
               ? ring__json_add_key(p, key, strlen(key), prefix)
               : RING_ENOMEM;
  if (rc == RING_OK && body && p && !cJSON_AddItemToObject(body, "perm", p))
    rc = RING_ENOMEM;
  if (rc != RING_OK || body == NULL)
    cJSON_Delete(p); /* not attached */
  return auth_call(c, "auth/role/grant", body, rc, err);
}

int ring_etcd_auth_enable(ring_etcd *c, ring_error *err) {
  if (c == NULL)
    return ring__err(err, RING_EINVAL, "ring_etcd_auth_enable: no client");
  return auth_call(c, "auth/enable", cJSON_CreateObject(), RING_OK, err);
}
