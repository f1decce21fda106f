/*
 * Several processes on one disk store, and processes killed while they put.
 *
 *   concurrent  three processes put their own sequences and one they all
 *               share into one folder at once, each then loads the others'
 *               and checks every token; the parent checks everything after.
 *   crash       20 times: a process puts and flushes sequence after
 *               sequence, saying "stored N" after each flush, and is killed
 *               (SIGKILL) at a random moment; the store must reopen, every
 *               sequence reported stored must be there and exact, and no
 *               entry may be torn (every entry verifies; whatever a get
 *               loads is exact).
 *
 * The children are this program again (--writer, --putter), started with
 * fork and exec so that none inherits a store.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store_test.h"
#include "tap.h"

#define T 64
#define SEQ_CHUNKS 4
#define SHARED_SEQ 1000

static kvrt_runtime *rt;
static struct st_model model;
static const char *self;

static bool runtime(void)
{
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    return kvrt_runtime_open(&o, &rt) == KVRT_OK;
}

/* Sequence k: its tokens and K/V from seed k. */
struct seq {
    struct st_cache c;
    int64_t table[64];
    int32_t tokens[SEQ_CHUNKS * T];
};

static bool seq_cache(struct seq *q, enum kvrt_layout layout, uint64_t bs)
{
    if (!st_cache_make(&q->c, rt, "cpu", &model, layout, bs, 0, SEQ_CHUNKS * T / bs + 4, 0, model.heads))
        return false;
    st_table(&q->c, q->table, SEQ_CHUNKS * T / bs, 7);
    return true;
}

static bool seq_put(kvrt_store *s, struct seq *q, uint64_t k)
{
    st_tokens(q->tokens, SEQ_CHUNKS * T, k);
    if (!st_fill(&q->c, q->table, 0, SEQ_CHUNKS * T, k))
        return false;
    struct kvrt_store_span sp =
        st_span(&q->c, q->table, SEQ_CHUNKS * T / q->c.block_size, q->tokens, SEQ_CHUNKS * T, 0, KVRT_UNSET);
    uint64_t stored = 0;
    return kvrt_store_put(s, &sp, &stored) == KVRT_OK && stored == SEQ_CHUNKS * T;
}

/* Load sequence k: the tokens loaded, and whether they are exact. */
static uint64_t seq_get(kvrt_store *s, struct seq *q, uint64_t k, bool *exact)
{
    st_tokens(q->tokens, SEQ_CHUNKS * T, k);
    struct kvrt_store_span sp =
        st_span(&q->c, q->table, SEQ_CHUNKS * T / q->c.block_size, q->tokens, SEQ_CHUNKS * T, 0, KVRT_UNSET);
    uint64_t loaded = 0;
    *exact = false;
    if (kvrt_store_get(s, &sp, &loaded) != KVRT_OK)
        return 0;
    *exact = st_check(&q->c, q->table, 0, loaded, k, NULL, 0) == 0;
    return loaded;
}

/* ---- children ------------------------------------------------------------ */

/* --writer DIR ID: put sequences ID*10 .. ID*10+5 and the shared one, then
 * load every other writer's; exit 0 when all were exact. */
static int writer(const char *dir, int id, int writers)
{
    if (!runtime())
        return 2;
    kvrt_store *s = st_open(&model, "procs", T, 4 << 20, dir, 0, NULL);
    struct seq q;
    if (!s || !seq_cache(&q, id % 2 ? KVRT_LAYOUT_LBNHC : KVRT_LAYOUT_BLHNC, id % 2 ? 16 : 32))
        return 3;
    for (uint64_t k = 0; k < 6; k++)
        if (!seq_put(s, &q, (uint64_t)id * 10 + k))
            return 4;
    if (!seq_put(s, &q, SHARED_SEQ) || kvrt_store_flush(s) != KVRT_OK)
        return 5;
    /* the others' sequences, as they arrive */
    double end = (double)time(NULL) + 60;
    for (int other = 0; other < writers; other++)
        for (uint64_t k = 0; k < 6; k++) {
            bool exact = false;
            uint64_t got;
            while ((got = seq_get(s, &q, (uint64_t)other * 10 + k, &exact)) < SEQ_CHUNKS * T && exact &&
                   (double)time(NULL) < end)
                usleep(20000);
            if (got != SEQ_CHUNKS * T || !exact) {
                fprintf(stderr, "writer %d: sequence %llu: %llu tokens, %s\n", id, (unsigned long long)other * 10 + k,
                        (unsigned long long)got, exact ? "exact" : "wrong");
                return 6;
            }
        }
    kvrt_store_close(s);
    st_cache_free(&q.c);
    kvrt_runtime_close(rt);
    return 0;
}

/* --putter DIR BASE: put and flush sequences BASE, BASE+1, ... forever,
 * printing "stored K" after each flush. */
static int putter(const char *dir, uint64_t base)
{
    if (!runtime())
        return 2;
    /* no memory tier: every entry goes through the queue to disk */
    kvrt_store *s = st_open(&model, "crash", T, 0, dir, 0, NULL);
    struct seq q;
    if (!s || !seq_cache(&q, KVRT_LAYOUT_LBHNC, 16)) {
        fprintf(stderr, "putter: %s\n", kvrt_error_message());
        return 3;
    }
    for (uint64_t k = base;; k++) {
        if (!seq_put(s, &q, k) || kvrt_store_flush(s) != KVRT_OK) {
            fprintf(stderr, "putter: sequence %llu: %s\n", (unsigned long long)k, kvrt_error_message());
            return 4;
        }
        printf("stored %llu\n", (unsigned long long)k);
        fflush(stdout);
    }
}

/* ---- the parent ---------------------------------------------------------- */

static pid_t spawn(char *const argv[], int *out_fd)
{
    int p[2] = {-1, -1};
    if (out_fd && pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        if (out_fd) {
            dup2(p[1], 1);
            close(p[0]);
            close(p[1]);
        }
        execv(self, argv);
        _exit(127);
    }
    if (out_fd) {
        close(p[1]);
        *out_fd = p[0];
    }
    return pid;
}

static void concurrent(const char *dir)
{
    enum { N = 3 };
    pid_t pids[N];
    char ids[N][8], n[8];
    snprintf(n, sizeof(n), "%d", N);
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof(ids[i]), "%d", i);
        char *argv[] = {(char *)self, "--writer", (char *)dir, ids[i], n, NULL};
        pids[i] = spawn(argv, NULL);
    }
    int good = 0;
    for (int i = 0; i < N; i++) {
        int st = 0;
        if (pids[i] > 0 && waitpid(pids[i], &st, 0) == pids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0)
            good++;
        else
            tap_diag("writer %d: status %d", i, st);
    }
    tap_ok(good == N, "%d processes put into one folder at once and each loads the others' sequences exactly", N);
    kvrt_store *s = st_open(&model, "procs", T, 0, dir, 0, NULL);
    struct seq q;
    bool ok = s && seq_cache(&q, KVRT_LAYOUT_LHBNC, 8);
    uint64_t exact_all = 0;
    for (int i = 0; ok && i < N; i++)
        for (uint64_t k = 0; k < 6; k++) {
            bool exact = false;
            exact_all += seq_get(s, &q, (uint64_t)i * 10 + k, &exact) == SEQ_CHUNKS * T && exact;
        }
    bool exact = false;
    uint64_t shared = ok ? seq_get(s, &q, SHARED_SEQ, &exact) : 0;
    struct kvrt_store_verify_report r = {0};
    ok = ok && kvrt_store_verify(s, false, NULL, NULL, &r) == KVRT_OK;
    tap_ok(ok && exact_all == N * 6 && shared == SEQ_CHUNKS * T && exact &&
               r.entries == (N * 6 + 1) * SEQ_CHUNKS * model.heads && r.bad == 0,
           "afterwards: all %d sequences exact, the one all wrote stored once (%llu entries, none bad)", N * 6 + 1,
           (unsigned long long)r.entries);
    kvrt_store_close(s);
    if (ok)
        st_cache_free(&q.c);
}

static uint64_t rng_state = 0x12345;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Read "stored K" lines for `ms` milliseconds; the last K reported, -1 none. */
static long long read_reports(int fd, int ms, char *buf, size_t *len, size_t cap, long long last)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int left = ms - (int)((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0)
            break;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, left) <= 0)
            break;
        ssize_t r = read(fd, buf + *len, cap - 1 - *len);
        if (r <= 0)
            break;
        *len += (size_t)r;
        buf[*len] = '\0';
        char *nl;
        while ((nl = strchr(buf, '\n'))) {
            unsigned long long k;
            if (sscanf(buf, "stored %llu", &k) == 1)
                last = (long long)k;
            size_t used = (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, *len - used + 1);
            *len -= used;
        }
    }
    return last;
}

static void crash(const char *dir, int rounds)
{
    uint64_t base = 0;
    uint64_t reported_total = 0;
    static bool was_reported[100000];
    for (int round = 0; round < rounds; round++) {
        char b[32];
        snprintf(b, sizeof(b), "%llu", (unsigned long long)base);
        char *argv[] = {(char *)self, "--putter", (char *)dir, b, NULL};
        int fd = -1;
        pid_t pid = spawn(argv, &fd);
        char buf[4096];
        size_t len = 0;
        /* killed 30 to 400 ms in: at open, in a put, in a commit, between */
        int ms = 30 + (int)(rng() % 370);
        long long last = -1;
        /* the last round of a run where no child got as far as a flush
         * (a sanitizer build starts slowly): 30 to 400 ms after its first,
         * so that the run always checks stored sequences */
        for (int waited = 0; round == rounds - 1 && reported_total == 0 && last < 0 && waited < 60000; waited += 100)
            last = read_reports(fd, 100, buf, &len, sizeof(buf), last);
        last = read_reports(fd, ms, buf, &len, sizeof(buf), last);
        kill(pid, SIGKILL);
        int st = 0;
        waitpid(pid, &st, 0);
        last = read_reports(fd, 0, buf, &len, sizeof(buf), last); /* what it said before dying */
        close(fd);
        uint64_t reported = last < 0 ? 0 : (uint64_t)(last + 1) - base;
        reported_total += reported;
        for (uint64_t k = base; k < base + reported && k < 100000; k++)
            was_reported[k] = true;
        /* reopen: every reported sequence exact, nothing torn */
        kvrt_store *s = st_open(&model, "crash", T, 0, dir, 0, NULL);
        struct seq q;
        bool ok = s && seq_cache(&q, KVRT_LAYOUT_BLNHC, 32);
        uint64_t lost = 0, wrong = 0;
        for (uint64_t k = 0; ok && k < base + reported + 1; k++) {
            bool exact = false;
            uint64_t got = seq_get(s, &q, k, &exact);
            if (!exact)
                wrong++;
            if (k < 100000 && was_reported[k] && got != SEQ_CHUNKS * T)
                lost++;
        }
        struct kvrt_store_verify_report r = {0};
        ok = ok && kvrt_store_verify(s, false, NULL, NULL, &r) == KVRT_OK;
        tap_ok(ok && lost == 0 && wrong == 0 && r.bad == 0 && WIFSIGNALED(st),
               "kill -9 after %d ms (%llu sequences reported stored this time): the store reopens, none lost, "
               "none torn (%llu entries verify)",
               ms, (unsigned long long)reported, (unsigned long long)r.entries);
        if (lost || wrong)
            tap_diag("lost %llu, wrong %llu", (unsigned long long)lost, (unsigned long long)wrong);
        if (!WIFSIGNALED(st))
            tap_diag("the putter ended by itself (status %d) before it was killed", st);
        kvrt_store_close(s);
        if (ok)
            st_cache_free(&q.c);
        /* the next child goes on after the last sequence that may be there */
        base += reported + 1;
    }
    tap_ok(reported_total > 0, "the killed processes reported %llu sequences stored in all",
           (unsigned long long)reported_total);
}

int main(int argc, char **argv)
{
    self = argv[0];
    st_model_init(&model, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 4, 2, 64, 64);
    if (argc == 5 && strcmp(argv[1], "--writer") == 0)
        return writer(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (argc == 4 && strcmp(argv[1], "--putter") == 0)
        return putter(argv[2], strtoull(argv[3], NULL, 10));
    tap_plan_dynamic();
    if (!runtime())
        tap_skip_all("no runtime: %s", kvrt_error_message());
    const char *what = argc > 1 ? argv[1] : "all";
    int rounds = argc > 2 ? atoi(argv[2]) : 20;
    char *dir = st_tempdir("procs");
    if (!dir)
        tap_skip_all("no temporary folder");
    if (strcmp(what, "all") == 0 || strcmp(what, "concurrent") == 0)
        concurrent(dir);
    st_rmdir(dir);
    rng_state ^= (uint64_t)time(NULL);
    tap_diag("random seed %llu", (unsigned long long)rng_state);
    if (strcmp(what, "all") == 0 || strcmp(what, "crash") == 0) {
        char *cdir = st_tempdir("crash");
        crash(cdir, rounds);
        st_rmdir(cdir);
        free(cdir);
    }
    free(dir);
    kvrt_runtime_close(rt);
    return tap_done();
}
