/* cluster.c: see cluster.h. (Being written.) */
#include "cluster.h"
