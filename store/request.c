/* Asynchronous puts and gets: a posted request is checked at once and run
 * on the store's worker thread, in the order posted, so that an engine
 * overlaps them with compute; test, wait and release as in libkvrt-xfer.
 * A request owns its lock, so it outlives the store until released.
 *
 * Layer 6 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "request.h"

enum { REQ_QUEUED, REQ_RUNNING, REQ_DONE };

struct kvrt_store_request {
    struct store_op op;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int state;
    int status;
    uint64_t tokens;
    char message[1024];
    kvrt_store_request *next;
};

static void *worker_main(void *arg)
{
    kvrt_store *s = arg;
    pthread_mutex_lock(&s->req_lock);
    for (;;) {
        while (!s->req_head && !s->worker_stop)
            pthread_cond_wait(&s->req_wake, &s->req_lock);
        kvrt_store_request *r = s->req_head;
        if (!r)
            break;
        s->req_head = r->next;
        if (!s->req_head)
            s->req_tail = NULL;
        pthread_mutex_unlock(&s->req_lock);

        pthread_mutex_lock(&r->lock);
        r->state = REQ_RUNNING;
        pthread_mutex_unlock(&r->lock);
        uint64_t tokens = 0;
        int rc = r->op.run(&r->op, &tokens);
        char msg[1024] = "";
        if (rc != KVRT_OK)
            snprintf(msg, sizeof(msg), "%s", kvrt_error_message());
        pthread_mutex_lock(&r->lock);
        r->status = rc;
        r->tokens = tokens;
        snprintf(r->message, sizeof(r->message), "%s", msg);
        r->state = REQ_DONE;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);

        pthread_mutex_lock(&s->req_lock);
        s->req_open--;
        pthread_cond_broadcast(&s->req_drained);
    }
    pthread_mutex_unlock(&s->req_lock);
    return NULL;
}

int request_post(kvrt_store *s, struct store_op *op, kvrt_store_request **out)
{
    kvrt_store_request *r = calloc(1, sizeof(*r));
    if (!r) {
        store_op_free(op);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory for a request");
    }
    r->op = *op;
    memset(op, 0, sizeof(*op));
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    pthread_mutex_lock(&s->req_lock);
    if (!s->worker_started) {
        if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
            pthread_mutex_unlock(&s->req_lock);
            store_op_free(&r->op);
            pthread_mutex_destroy(&r->lock);
            pthread_cond_destroy(&r->cond);
            free(r);
            return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: cannot start the worker thread");
        }
        s->worker_started = true;
    }
    if (s->req_tail)
        s->req_tail->next = r;
    else
        s->req_head = r;
    s->req_tail = r;
    s->req_open++;
    pthread_cond_signal(&s->req_wake);
    pthread_mutex_unlock(&s->req_lock);
    *out = r;
    return KVRT_OK;
}

void request_shutdown(kvrt_store *s)
{
    pthread_mutex_lock(&s->req_lock);
    while (s->req_open > 0)
        pthread_cond_wait(&s->req_drained, &s->req_lock);
    s->worker_stop = true;
    pthread_cond_broadcast(&s->req_wake);
    bool started = s->worker_started;
    pthread_mutex_unlock(&s->req_lock);
    if (started)
        pthread_join(s->worker, NULL);
    s->worker_started = false;
}

static int result(kvrt_store_request *r, uint64_t *tokens)
{
    if (r->state != REQ_DONE)
        return KVRT_STORE_PENDING;
    if (tokens)
        *tokens = r->tokens;
    if (r->status != KVRT_OK)
        return BASE_FAIL(r->status, "%s", r->message);
    return KVRT_OK;
}

int kvrt_store_test(kvrt_store_request *r, uint64_t *tokens)
{
    if (!r)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_test: the request is NULL");
    pthread_mutex_lock(&r->lock);
    int rc = result(r, tokens);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int kvrt_store_wait(kvrt_store_request *r, double timeout_s, uint64_t *tokens)
{
    if (!r)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_wait: the request is NULL");
    if (isnan(timeout_s))
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_wait: timeout_s is NaN; give seconds, or < 0 to wait until done");
    pthread_mutex_lock(&r->lock);
    if (timeout_s < 0) {
        while (r->state != REQ_DONE)
            pthread_cond_wait(&r->cond, &r->lock);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + (timeout_s > 1e9 ? 1e9 : timeout_s);
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        while (r->state != REQ_DONE)
            if (pthread_cond_timedwait(&r->cond, &r->lock, &ts) == ETIMEDOUT)
                break;
    }
    int rc = result(r, tokens);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

void kvrt_store_release(kvrt_store_request *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    while (r->state != REQ_DONE)
        pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
    store_op_free(&r->op);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r);
}
