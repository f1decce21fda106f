/*
 * A damaged data file, fuzzed: a store folder is copied and N copies get
 * random bytes of the index (data.mdb: LMDB's meta and tree pages) or of
 * the slot file (slots.dat: entry headers, payloads) changed, or one of
 * them cut at a random length.  Each copy
 * is then opened, looked up, loaded from and verified in a child process,
 * which must end normally: the open refuses the folder with a message, or
 * works and every token a get loads is exact.  Never a crash, never a wrong
 * token.
 *
 *   test-store-flips [ROUNDS]      (default 100)
 *   test-store-flips --probe DIR   the child: one damaged copy
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store_test.h"
#include "tap.h"

#define T 32
#define SEQS 6
#define N (3 * T)

static kvrt_runtime *rt;
static struct st_model model;

static bool runtime(void)
{
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    return kvrt_runtime_open(&o, &rt) == KVRT_OK;
}

struct seq {
    struct st_cache c;
    int64_t table[16];
    int32_t tokens[N];
};

static struct kvrt_store_span span(struct seq *q)
{
    return st_span(&q->c, q->table, N / 16, q->tokens, N, 0, KVRT_UNSET);
}

/* The child: exit 0 when everything it loaded was exact (or the open was
 * refused with a message), 1 when a token was wrong. */
static int probe(const char *dir)
{
    if (!runtime())
        return 2;
    kvrt_store *s = st_open(&model, "flips", T, 1 << 20, dir, 0, NULL);
    if (!s) {
        fprintf(stderr, "refused: %s\n", kvrt_error_message());
        return strlen(kvrt_error_message()) > 0 ? 0 : 3;
    }
    struct seq q;
    if (!st_cache_make(&q.c, rt, "cpu", &model, KVRT_LAYOUT_LBNHC, 16, 0, N / 16 + 2, 0, model.heads))
        return 2;
    st_table(&q.c, q.table, N / 16, 3);
    int wrong = 0;
    for (uint64_t k = 0; k < SEQS; k++) {
        st_tokens(q.tokens, N, k);
        uint64_t hit = 0, loaded = 0;
        struct kvrt_store_span sp = span(&q);
        kvrt_store_lookup(s, q.tokens, N, 0, 0, &hit);
        if (kvrt_store_get(s, &sp, &loaded) == KVRT_OK && st_check(&q.c, q.table, 0, loaded, k, NULL, 0) != 0)
            wrong++;
    }
    struct kvrt_store_verify_report r = {0};
    kvrt_store_verify(s, true, NULL, NULL, &r);
    fprintf(stderr, "verify: %llu entries, %llu bad\n", (unsigned long long)r.entries, (unsigned long long)r.bad);
    kvrt_store_close(s);
    st_cache_free(&q.c);
    kvrt_runtime_close(rt);
    return wrong ? 1 : 0;
}

static bool make_store(const char *dir)
{
    kvrt_store *s = st_open(&model, "flips", T, 1 << 20, dir, 0, NULL);
    struct seq q;
    if (!s || !st_cache_make(&q.c, rt, "cpu", &model, KVRT_LAYOUT_LBHNC, 16, 0, N / 16 + 2, 0, model.heads))
        return false;
    st_table(&q.c, q.table, N / 16, 1);
    bool ok = true;
    for (uint64_t k = 0; k < SEQS && ok; k++) {
        st_tokens(q.tokens, N, k);
        struct kvrt_store_span sp = span(&q);
        uint64_t stored = 0;
        ok = st_fill(&q.c, q.table, 0, N, k) && kvrt_store_put(s, &sp, &stored) == KVRT_OK && stored == N;
    }
    ok = ok && kvrt_store_flush(s) == KVRT_OK;
    kvrt_store_close(s);
    st_cache_free(&q.c);
    return ok;
}

static uint64_t rng_state;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static bool copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    bool ok = a && b;
    while (ok && (n = fread(buf, 1, sizeof(buf), a)) > 0)
        ok = fwrite(buf, 1, n, b) == n;
    if (a)
        fclose(a);
    if (b && fclose(b) != 0)
        ok = false;
    return ok;
}

/* Damage a copy: flip bytes of the index (data.mdb) or of the slot file
 * (slots.dat), or cut one of them. */
static bool damage(const char *src, const char *dst, char *what, size_t size)
{
    static const char *const files[] = {"data.mdb", "slots.dat"};
    mkdir(dst, 0755);
    for (int i = 0; i < 2; i++) {
        char a[4300], b[4300];
        snprintf(a, sizeof(a), "%s/%s", src, files[i]);
        snprintf(b, sizeof(b), "%s/%s", dst, files[i]);
        if (!copy_file(a, b))
            return false;
    }
    const char *name = files[rng() % 2];
    char b[4300];
    snprintf(b, sizeof(b), "%s/%s", dst, name);
    struct stat st;
    if (stat(b, &st) != 0)
        return false;
    uint64_t size_bytes = (uint64_t)st.st_size;
    if (rng() % 8 == 0) {
        uint64_t cut = rng() % size_bytes;
        snprintf(what, size, "%s cut to %llu of %llu bytes", name, (unsigned long long)cut,
                 (unsigned long long)size_bytes);
        return truncate(b, (off_t)cut) == 0;
    }
    int fd = open(b, O_RDWR);
    if (fd < 0)
        return false;
    int flips = 1 + (int)(rng() % 8);
    size_t used = (size_t)snprintf(what, size, "%s: %d bytes changed at", name, flips);
    for (int i = 0; i < flips; i++) {
        /* in the index, half of them in the first pages, where LMDB keeps
         * its meta and tree pages */
        uint64_t at = rng() % 2 ? rng() % (size_bytes < 32768 ? size_bytes : 32768) : rng() % size_bytes;
        unsigned char c = 0;
        if (pread(fd, &c, 1, (off_t)at) != 1)
            break;
        c ^= (unsigned char)(1 + rng() % 255);
        if (pwrite(fd, &c, 1, (off_t)at) != 1)
            break;
        if (used < size)
            used += (size_t)snprintf(what + used, size - used, " %llu", (unsigned long long)at);
    }
    close(fd);
    return true;
}

int main(int argc, char **argv)
{
    st_model_init(&model, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 2, 16, 16);
    if (argc == 3 && strcmp(argv[1], "--probe") == 0)
        return probe(argv[2]);
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    tap_plan_dynamic();
    if (!runtime())
        tap_skip_all("no runtime: %s", kvrt_error_message());
    char *dir = st_tempdir("flips");
    char *work = st_tempdir("flipped");
    if (!dir || !work || !make_store(dir))
        tap_skip_all("cannot make the store to damage");
    const char *seed = getenv("KVRT_TEST_SEED");
    rng_state = seed ? strtoull(seed, NULL, 10) : ((uint64_t)time(NULL) * 2654435761u | 1);
    tap_diag("random seed %llu", (unsigned long long)rng_state);
    int crashed = 0, wrong = 0, refused = 0;
    for (int i = 0; i < rounds; i++) {
        char copy[4096], what[512] = "";
        snprintf(copy, sizeof(copy), "%s/%d", work, i);
        if (!damage(dir, copy, what, sizeof(what))) {
            tap_ok(false, "damage copy %d", i);
            continue;
        }
        char err[4300];
        snprintf(err, sizeof(err), "%s/err", copy);
        pid_t pid = fork();
        if (pid == 0) {
            if (!freopen(err, "w", stderr))
                _exit(4);
            execl(argv[0], argv[0], "--probe", copy, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        FILE *f = fopen(err, "r");
        char line[512] = "";
        if (f) {
            if (!fgets(line, sizeof(line), f))
                line[0] = '\0';
            fclose(f);
        }
        line[strcspn(line, "\n")] = '\0';
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        crashed += WIFSIGNALED(st);
        wrong += WIFEXITED(st) && WEXITSTATUS(st) == 1;
        refused += strncmp(line, "refused", 7) == 0;
        tap_ok(ok, "copy %d (%s): %s", i, what,
               WIFSIGNALED(st) ? "CRASHED"
               : ok            ? (line[0] ? line : "fine")
                               : "a wrong token or no message");
        if (WIFSIGNALED(st) && getenv("KVRT_TEST_KEEP"))
            tap_diag("kept %s", copy);
        else
            st_rmdir(copy);
    }
    tap_diag("%d copies: %d crashed, %d served a wrong token, %d refused at open", rounds, crashed, wrong, refused);
    if (!getenv("KVRT_TEST_KEEP")) {
        st_rmdir(dir);
        st_rmdir(work);
    }
    free(dir);
    free(work);
    kvrt_runtime_close(rt);
    return tap_done();
}
