/* Sequences through the shared tier, for its tests on real servers
 * (shared_seqs.h). */
#include "shared_seqs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tap.h"

kvrt_runtime *sq_rt;
struct st_model sq_model;
uint64_t sq_memory_bytes = 64 << 20;

double sq_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sq_nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

int sq_sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* A CA (dir/CA.pem, .key) and what it signs: server.pem/.key for
 * 127.0.0.1 (an IP SAN), client.pem/.key (openssl, EC keys). */
bool sq_make_pki(const char *dir, const char *ca)
{
    return sq_sh("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "
                 "/CN=%s -keyout %s.key -out %s.pem "
                 ">/dev/null 2>&1",
                 dir, ca, ca, ca) == 0 &&
           sq_sh("cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "
                 "/CN=kvrt-test-server -keyout server.key -out "
                 "server.csr >/dev/null 2>&1 && printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && openssl x509 -req "
                 "-in server.csr -CA %s.pem -CAkey %s.key -CAcreateserial -days 2 -extfile san.ext -out server.pem "
                 ">/dev/null 2>&1",
                 dir, ca, ca) == 0 &&
           sq_sh("cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=kvrt-client "
                 "-keyout client.key -out client.csr "
                 ">/dev/null 2>&1 && openssl x509 -req -in client.csr -CA %s.pem -CAkey %s.key -CAcreateserial -days 2 "
                 "-out client.pem >/dev/null 2>&1",
                 dir, ca, ca) == 0;
}

kvrt_store *sq_open(const char *shared, double timeout, struct st_log *lg, const struct sq_files *f)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.groups = &sq_model.group;
    o.num_groups = 1;
    o.model_id = "cluster";
    o.chunk_tokens = SQ_T;
    o.memory_bytes = sq_memory_bytes;
    o.shared = shared;
    o.shared_timeout_s = timeout;
    o.log = lg ? st_log_fn : NULL;
    o.log_user = lg;
    if (f) {
        o.shared_password_file = f->password;
        o.shared_ca_file = f->ca;
        o.shared_cert_file = f->cert;
        o.shared_cert_key_file = f->key;
    }
    kvrt_store *s = NULL;
    if (kvrt_store_open(&o, &s) != KVRT_OK)
        tap_diag("kvrt_store_open: %s", kvrt_error_message());
    return s;
}

bool sq_make(struct seq *q, uint64_t seed)
{
    if (!st_cache_make(&q->c, sq_rt, "cpu", &sq_model, KVRT_LAYOUT_BLNHC, 16, 0, SQ_N / 16 + 2, 0, sq_model.heads))
        return false;
    st_table(&q->c, q->table, SQ_N / 16, seed);
    st_tokens(q->tokens, SQ_N, 1000 + seed);
    return true;
}

/* Put sequences [from, to) (pattern seed = sequence), flushed. */
bool sq_put(kvrt_store *s, int from, int to)
{
    bool ok = true;
    for (int i = from; i < to && ok; i++) {
        struct seq q;
        if (!sq_make(&q, (uint64_t)i))
            return false;
        struct kvrt_store_span sp = st_span(&q.c, q.table, SQ_N / 16, q.tokens, SQ_N, 0, KVRT_UNSET);
        uint64_t stored = 0;
        ok = st_fill(&q.c, q.table, 0, SQ_N, (uint64_t)i) && kvrt_store_put(s, &sp, &stored) == KVRT_OK &&
             stored == SQ_N;
        st_cache_free(&q.c);
    }
    return ok && kvrt_store_flush(s) == KVRT_OK;
}

/* Get sequence i into a new cache: tokens loaded; *wrong counts cells
 * that differ from what was put. */
uint64_t sq_get(kvrt_store *s, int i, uint64_t *wrong)
{
    struct seq q;
    if (!sq_make(&q, (uint64_t)i)) {
        *wrong += 1;
        return 0;
    }
    struct kvrt_store_span sp = st_span(&q.c, q.table, SQ_N / 16, q.tokens, SQ_N, 0, KVRT_UNSET);
    uint64_t loaded = 0;
    if (kvrt_store_get(s, &sp, &loaded) != KVRT_OK)
        tap_diag("get: %s", kvrt_error_message());
    uint64_t bad = loaded ? st_check(&q.c, q.table, 0, loaded, (uint64_t)i, NULL, 0) : 0;
    *wrong += bad;
    st_cache_free(&q.c);
    return loaded;
}

/* All sequences [0, n): tokens loaded in all; the slowest call. */
uint64_t sq_get_all(kvrt_store *s, int n, uint64_t *wrong, double *slowest)
{
    uint64_t total = 0;
    *slowest = 0;
    for (int i = 0; i < n; i++) {
        double t0 = sq_now();
        total += sq_get(s, i, wrong);
        double took = sq_now() - t0;
        if (took > *slowest)
            *slowest = took;
    }
    return total;
}

uint64_t sq_lookup(kvrt_store *s, int n)
{
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        int32_t tok[SQ_N];
        st_tokens(tok, SQ_N, 1000 + (uint64_t)i);
        uint64_t hit = 0;
        if (kvrt_store_lookup(s, tok, SQ_N, 0, 0, &hit) == KVRT_OK)
            total += hit;
    }
    return total;
}

struct kvrt_store_stats sq_stats(kvrt_store *s)
{
    struct kvrt_store_stats st = {0};
    kvrt_store_stats(s, &st);
    return st;
}

void sq_init(void)
{
    st_model_init(&sq_model, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 2, 16, 16);
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    if (kvrt_runtime_open(&o, &sq_rt) != KVRT_OK)
        tap_skip_all("no runtime: %s", kvrt_error_message());
}
