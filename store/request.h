/*
 * Posted puts and gets (request.c): run on the store's worker thread.
 *
 * Layer 6 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_REQUEST_H
#define KVRT_STORE_REQUEST_H

#include "op.h"

/* Post an op (taken over) to the worker thread. */
int request_post(kvrt_store *s, struct store_op *op, kvrt_store_request **out);
/* Wait for every posted request, then stop the worker. */
void request_shutdown(kvrt_store *s);

#endif
