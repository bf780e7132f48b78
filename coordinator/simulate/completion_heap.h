/*
 * completion_heap.h: a min-heap of request completions (finish time, node),
 * for load simulations: `ringctl simulate` and the bounded-load tests.
 * The caller owns v, sized for the most requests in flight.
 */
#ifndef RING_COMPLETION_HEAP_H
#define RING_COMPLETION_HEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct done {
  uint64_t at;   /* finish time */
  uint16_t node; /* node whose load it holds */
} done;

typedef struct heap {
  done *v;  /* capacity chosen by the caller */
  size_t n; /* entries in use */
} heap;

static inline void heap_push(heap *h, done d) {
  size_t i = h->n++;
  for (; i > 0 && h->v[(i - 1) / 2].at > d.at; i = (i - 1) / 2)
    h->v[i] = h->v[(i - 1) / 2];
  h->v[i] = d;
}

/* Removes and returns the earliest completion; the heap must not be empty. */
static inline done heap_pop(heap *h) {
  done top = h->v[0], last = h->v[--h->n];
  size_t i = 0;
  for (;;) {
    size_t k = 2 * i + 1;
    if (k >= h->n)
      break;
    if (k + 1 < h->n && h->v[k + 1].at < h->v[k].at)
      k++;
    if (h->v[k].at >= last.at)
      break;
    h->v[i] = h->v[k];
    i = k;
  }
  if (h->n > 0)
    h->v[i] = last;
  return top;
}

#endif /* RING_COMPLETION_HEAP_H */
