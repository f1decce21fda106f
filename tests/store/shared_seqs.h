/* Sequences through the shared tier, for its tests on real servers
 * (tests/store/cluster.c, shared_secure.c, hostile.c): a small model,
 * stores opened on a URL with the tier's files, sequence i put with its
 * own tokens and pattern and checked cell by cell when got back. */
#ifndef KVRT_TESTS_SHARED_SEQS_H
#define KVRT_TESTS_SHARED_SEQS_H

#include <stdbool.h>
#include <stdint.h>

#include "store_test.h"

#define SQ_T 32         /* tokens per chunk */
#define SQ_N (4 * SQ_T) /* tokens per sequence */
#define SQ_SEQS 24

extern kvrt_runtime *sq_rt;
extern struct st_model sq_model;
/* The memory tier of the stores opened next; 0 where every get must ask
 * the servers (failover, resharding). */
extern uint64_t sq_memory_bytes;

double sq_now(void);
void sq_nap(double s);
int sq_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A CA named ca in dir and the certificates it signs: server.pem and
 * server.key for 127.0.0.1 (an IP SAN), client.pem and client.key
 * (the openssl program; false when it fails). */
bool sq_make_pki(const char *dir, const char *ca);

struct sq_files {
    const char *password, *ca, *cert, *key;
};
kvrt_store *sq_open(const char *shared, double timeout, struct st_log *lg, const struct sq_files *f);

struct seq {
    struct st_cache c;
    int64_t table[32];
    int32_t tokens[SQ_N];
};
bool sq_make(struct seq *q, uint64_t seed);
/* Put sequences [from, to), flushed. */
bool sq_put(kvrt_store *s, int from, int to);
/* Get sequence i: tokens loaded; *wrong counts cells unlike what was put. */
uint64_t sq_get(kvrt_store *s, int i, uint64_t *wrong);
/* Sequences [0, n): tokens loaded in all; the slowest call. */
uint64_t sq_get_all(kvrt_store *s, int n, uint64_t *wrong, double *slowest);
uint64_t sq_lookup(kvrt_store *s, int n);
struct kvrt_store_stats sq_stats(kvrt_store *s);
/* Open sq_rt and sq_model; without a runtime the test is skipped. */
void sq_init(void);

#endif
