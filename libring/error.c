/*
 * error.c: the version string and ring_strerror (ringx holds the messages).
 */
#include "ring_int.h"

#include <stdio.h>

const char *ring_version(void) { return RING_VERSION_STRING; }

const char *ring_strerror(int code) { return ring__strerror(code); }
