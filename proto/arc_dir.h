/*
 * arc_dir.h: the names in a host's data dir that every part reading it
 * agrees on (proto/arc.md, "The data dir"): the agent writes them, a
 * data-plane service such as examples/kv reads them. Constants only, so a
 * service may include this header without linking ringproto.
 */
#ifndef RING_PROTO_ARC_DIR_H
#define RING_PROTO_ARC_DIR_H

/* <data-dir>/arcs/<token>/: the installed arcs, one directory a token. */
#define ARC_DIR_ARCS "arcs"
/* <data-dir>/placed: this data dir has owned tokens in the cluster. The
 * agent writes it durably before it first acks a version with tokens; an
 * owned token without its arc on a placed data dir is a missing arc. */
#define ARC_DIR_PLACED "placed"

#endif /* RING_PROTO_ARC_DIR_H */
