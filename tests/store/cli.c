/*
 * kvrt store stat|ls|verify|gc on folders written here: what each prints,
 * as text and as JSON, its exit status, and its refusals.
 *
 *   test-store-cli KVRT
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "store_test.h"
#include "subprocess.h"
#include "tap.h"

#define T 32

static const char *kvrt_exe;

static struct spawn_result run(const char *a, const char *b, const char *c, const char *d, const char *e)
{
    char *argv[] = {(char *)kvrt_exe, (char *)a, (char *)b, (char *)c, (char *)d, (char *)e, NULL};
    struct spawn_result r;
    if (spawn_run(kvrt_exe, argv, NULL, &r) != 0)
        r.status = -1;
    return r;
}

static json_t *json_of(const struct spawn_result *r)
{
    json_error_t err;
    return json_loads(r->out, 0, &err);
}

/* A store of seqs sequences of 2 chunks in dir, of layer groups of g
 * layers (0: none). */
static bool make_g(const char *dir, int seqs, uint64_t g)
{
    kvrt_runtime *rt;
    struct kvrt_runtime_options ro;
    kvrt_runtime_options_default(&ro);
    if (kvrt_runtime_open(&ro, &rt) != KVRT_OK)
        return false;
    struct st_model m;
    st_model_init(&m, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 2, 16, 16);
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.groups = &m.group;
    o.num_groups = 1;
    o.model_id = "cli@1";
    o.chunk_tokens = T;
    o.memory_bytes = 0;
    o.path = dir;
    o.layers_per_entry = g;
    kvrt_store *s = NULL;
    if (kvrt_store_open(&o, &s) != KVRT_OK)
        tap_diag("kvrt_store_open: %s", kvrt_error_message());
    struct st_cache c;
    bool ok = s && st_cache_make(&c, rt, "cpu", &m, KVRT_LAYOUT_LBHNC, 16, 0, 10, 0, 2);
    int64_t table[8];
    int32_t tok[2 * T];
    st_table(&c, table, 4, 1);
    for (int k = 0; ok && k < seqs; k++) {
        st_tokens(tok, 2 * T, (uint64_t)k);
        struct kvrt_store_span sp = st_span(&c, table, 4, tok, 2 * T, 0, KVRT_UNSET);
        uint64_t stored = 0;
        ok = st_fill(&c, table, 0, 2 * T, (uint64_t)k) && kvrt_store_put(s, &sp, &stored) == KVRT_OK;
    }
    ok = ok && kvrt_store_flush(s) == KVRT_OK;
    kvrt_store_close(s);
    st_cache_free(&c);
    kvrt_runtime_close(rt);
    return ok;
}

static bool make(const char *dir, int seqs)
{
    return make_g(dir, seqs, 0);
}

/* Change one payload byte of the first entry in the file. */
static bool damage(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/slots.dat", dir);
    FILE *f = fopen(path, "r+b");
    if (!f)
        return false;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf), f);
    bool ok = false;
    for (size_t i = 0; i + 8 <= n && !ok; i++)
        if (memcmp(buf + i, "KVRTSENT", 8) == 0 || memcmp(buf + i, "KVRTSEAL", 8) == 0) {
            buf[i + 128 + 5] ^= 1;
            ok = fseek(f, (long)(i + 128 + 5), SEEK_SET) == 0 && fputc(buf[i + 128 + 5], f) != EOF;
        }
    return fclose(f) == 0 && ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        printf("Bail out! usage: %s KVRT\n", argv[0]);
        return 1;
    }
    kvrt_exe = argv[1];
    tap_plan_dynamic();
    char *dir = st_tempdir("cli");
    if (!dir || !make(dir, 3))
        tap_skip_all("cannot write a store to look at");

    struct spawn_result r = run("store", "stat", dir, NULL, NULL);
    tap_ok(r.status == 0 && strstr(r.out, "model        cli@1") && strstr(r.out, "12 entries") &&
               strstr(r.out, "32 tokens of one head"),
           "stat: the model, the entries, the chunk");
    spawn_result_free(&r);
    r = run("store", "stat", dir, "--json", NULL);
    json_t *j = json_of(&r);
    tap_ok(r.status == 0 && j &&
               strcmp(json_string_value(json_object_get(json_object_get(j, "model"), "model_id")), "cli@1") == 0 &&
               json_integer_value(json_object_get(json_object_get(j, "disk"), "entries")) == 12 &&
               json_integer_value(json_object_get(json_object_get(j, "model"), "chunk_tokens")) == T,
           "stat --json: model_id, entries and chunk_tokens as numbers");
    json_decref(j);
    spawn_result_free(&r);

    r = run("store", "ls", "--json", dir, NULL);
    j = json_of(&r);
    json_t *entries = json_object_get(j, "entries");
    tap_ok(r.status == 0 && json_array_size(entries) == 12 &&
               strlen(json_string_value(json_object_get(json_array_get(entries, 0), "key"))) == 64 &&
               json_integer_value(json_object_get(json_array_get(entries, 0), "bytes")) == 128 + 4096,
           "ls --json (the folder after the option): 12 entries with 64-digit keys and their bytes");
    json_decref(j);
    spawn_result_free(&r);
    r = run("store", "ls", dir, NULL, NULL);
    tap_ok(r.status == 0 && strstr(r.out, "12 entries\n"), "ls: a line per entry and the count");
    spawn_result_free(&r);

    r = run("store", "verify", dir, NULL, NULL);
    tap_ok(r.status == 0 && strstr(r.out, "12 entries verified: 0 bad"), "verify of a good store: exit 0");
    spawn_result_free(&r);
    bool damaged = damage(dir);
    r = run("store", "verify", dir, "--json", NULL);
    j = json_of(&r);
    json_t *problems = json_object_get(j, "problems");
    const char *why = json_string_value(json_object_get(json_array_get(problems, 0), "why"));
    tap_ok(damaged && r.status == 1 && json_integer_value(json_object_get(j, "bad")) == 1 && why &&
               (strstr(why, "checksum mismatch") || strstr(why, "seal does not verify")),
           "verify finds the damaged entry, says why (%s), exit 1", why ? why : "none");
    json_decref(j);
    spawn_result_free(&r);
    r = run("store", "verify", dir, "--drop", NULL);
    tap_ok(r.status == 1 && strstr(r.out, "bad ") && strstr(r.out, "1 bad, dropped"), "verify --drop drops it");
    spawn_result_free(&r);
    r = run("store", "verify", dir, NULL, NULL);
    tap_ok(r.status == 0 && strstr(r.out, "11 entries verified: 0 bad"), "and the store verifies again");
    spawn_result_free(&r);

    r = run("store", "gc", dir, "--target", "16KiB");
    tap_ok(r.status == 0 && strstr(r.out, "evicted 9 entries; 2 left"),
           "gc --target 16KiB keeps 2 entries (8 KiB slots): %s", r.out);
    spawn_result_free(&r);
    r = run("store", "gc", dir, "--json", NULL);
    j = json_of(&r);
    tap_ok(r.status == 0 && json_integer_value(json_object_get(j, "evicted")) == 0 &&
               json_integer_value(json_object_get(j, "entries")) == 2,
           "gc to the capacity evicts nothing more");
    json_decref(j);
    spawn_result_free(&r);

    r = run("store", "stat", "/", NULL, NULL);
    tap_ok(r.status == 2 && strstr(r.err, "\"/\" is not a kvrt store: it holds no data.mdb"),
           "a folder that is no store: exit 2: %s", r.err);
    spawn_result_free(&r);
    r = run("store", "ls", NULL, NULL, NULL);
    tap_ok(r.status == 2 && strstr(r.err, "store ls: the store folder is required"), "no folder: exit 2: %s", r.err);
    spawn_result_free(&r);
    r = run("store", "ls", dir, dir, NULL);
    tap_ok(r.status == 2 && strstr(r.err, "one store folder"), "two folders: exit 2: %s", r.err);
    spawn_result_free(&r);
    r = run("store", "sweep", dir, NULL, NULL);
    tap_ok(r.status == 2 && strstr(r.err, "unknown subcommand \"sweep\"; valid are stat, ls, verify and gc"),
           "an unknown subcommand names the valid ones: %s", r.err);
    spawn_result_free(&r);
    r = run("store", NULL, NULL, NULL, NULL);
    tap_ok(r.status == 2 && strstr(r.err, "a subcommand is required"), "no subcommand: exit 2");
    spawn_result_free(&r);
    r = run("--man-source", NULL, NULL, NULL, NULL);
    tap_ok(r.status == 0 && strstr(r.out, "### store") && strstr(r.out, "kvrt store verify DIR"),
           "kvrt(1) has a store section with the subcommands");
    spawn_result_free(&r);
    st_rmdir(dir);
    free(dir);

    /* a store of layer groups: one layer per entry of the 2 layers */
    dir = st_tempdir("cli-groups");
    bool grouped = dir && make_g(dir, 1, 1);
    r = run("store", "stat", dir, NULL, NULL);
    tap_ok(grouped && r.status == 0 && strstr(r.out, "layer groups 1 layers per entry") && strstr(r.out, "8 entries"),
           "stat of a store of layer groups names them: 2 chunks x 2 heads x 2 groups");
    spawn_result_free(&r);
    r = run("store", "stat", dir, "--json", NULL);
    j = json_of(&r);
    tap_ok(r.status == 0 && j &&
               json_integer_value(json_object_get(json_object_get(j, "model"), "layers_per_entry")) == 1,
           "stat --json: model.layers_per_entry 1");
    json_decref(j);
    spawn_result_free(&r);
    r = run("store", "verify", dir, NULL, NULL);
    tap_ok(r.status == 0 && strstr(r.out, "8 entries verified: 0 bad"), "verify of a store of layer groups: exit 0");
    spawn_result_free(&r);
    if (dir)
        st_rmdir(dir);
    free(dir);
    return tap_done();
}
