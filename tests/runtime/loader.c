/*
 * Loader and binding: every broken plugin is passed over with its own
 * reason while the good ones keep working; the refusal of an undeclared
 * layout happens before the plugin's bind can run.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvrt/kvrt.h>
#include <kvrt/plugin.h>

#include "fixtures.h"
#include "tap.h"

static const char *dir;
static char marker[256];

/* Bytes the long name variant has after its 64th: never shown. */
#define TEXT_PAST_NAME "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij"

static const char *skip_reason(kvrt_runtime *rt, const char *file)
{
    for (size_t i = 0; i < kvrt_runtime_num_skipped(rt); i++) {
        const char *path, *reason;
        kvrt_runtime_skipped(rt, i, &path, &reason);
        const char *base = strrchr(path, '/');
        if (strcmp(base ? base + 1 : path, file) == 0)
            return reason;
    }
    return NULL;
}

static void expect_skip(kvrt_runtime *rt, const char *file, const char *needle)
{
    const char *r = skip_reason(rt, file);
    if (!tap_ok(r && strstr(r, needle), "%s is skipped with a reason mentioning '%s'", file, needle))
        tap_diag("reason: %s", r ? r : "(not skipped)");
}

static bool loaded(kvrt_runtime *rt, const char *name)
{
    size_t i;
    return kvrt_runtime_find_plugin(rt, name, &i) == KVRT_OK;
}

static bool marker_has(const char *needle)
{
    FILE *f = fopen(marker, "r");
    if (!f)
        return false;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

static void test_discovery(void)
{
    kvrt_runtime *rt = fixture_runtime(dir, NULL);
    tap_ok(rt != NULL, "a runtime opens although most plugins in the folder are broken");
    if (!rt)
        return;
    expect_skip(rt, "kvrt-noentry.so", "no entry symbol kvrt_plugin_entry");
    expect_skip(rt, "kvrt-abi.so", "incompatible ABI major");
    expect_skip(rt, "kvrt-truncated.so", "too small");
    expect_skip(rt, "kvrt-nolayouts.so", "no layouts");
    expect_skip(rt, "kvrt-badlayout.so", "layout value 17");
    expect_skip(rt, "kvrt-duplayout.so", "declared twice");
    expect_skip(rt, "kvrt-noname.so", "name is NULL");
    expect_skip(rt, "kvrt-nounbind.so", "unbind is NULL");
    expect_skip(rt, "kvrt-notelf.so", "dlopen failed");
    expect_skip(rt, "kvrt-longname.so", "followed by a NUL");
    expect_skip(rt, "kvrt-ctlversion.so", "control byte 0x0a at byte 3");
    expect_skip(rt, "kvrt-longdesc.so", "no terminating NUL within 512 bytes");
    const char *r = skip_reason(rt, "kvrt-longname.so");
    tap_ok(r && strstr(r, "abcdefghijabcdefghij") && !strstr(r, TEXT_PAST_NAME),
           "the unterminated name is shown up to the limit, nothing past it");
    tap_ok(loaded(rt, "subset") && loaded(rt, "failbind") && loaded(rt, "nodev"),
           "the good plugins are loaded next to the broken ones");
    tap_ok(!loaded(rt, "abi") && !loaded(rt, "truncated"), "broken plugins are not listed as plugins");
    kvrt_runtime_close(rt);
}

/* Same major, later minor: loaded, reported with the plugin's own ABI, and
 * usable through the fields this core knows. */
static void test_newer_minor(void)
{
    kvrt_runtime *rt = fixture_runtime(dir, NULL);
    size_t i;
    struct kvrt_plugin_info info;
    bool ok =
        rt && kvrt_runtime_find_plugin(rt, "vnext", &i) == KVRT_OK && kvrt_runtime_plugin_info(rt, i, &info) == KVRT_OK;
    tap_ok(ok && info.abi_major == KVRT_PLUGIN_ABI_MAJOR && info.abi_minor == KVRT_PLUGIN_ABI_MINOR + 1,
           "a plugin reporting ABI %d.%d (a newer minor) is loaded and reported as such", KVRT_PLUGIN_ABI_MAJOR,
           KVRT_PLUGIN_ABI_MINOR + 1);
    kvrt_backend *be = NULL;
    tap_ok(ok && kvrt_runtime_bind(rt, "vnext", "LBHNC", &be) == KVRT_OK,
           "a newer-minor plugin binds a layout it declares: %s", be ? "yes" : kvrt_error_message());
    kvrt_runtime_close(rt);
}

/* A shared object in a scanned folder that is not named kvrt-<name>.so is
 * reported, not loaded; asking for a passed-over backend by name says so. */
static void test_passed_over_names(void)
{
    kvrt_runtime *rt = fixture_runtime(dir, NULL);
    if (!rt) {
        tap_ok(false, "runtime opens");
        return;
    }
    expect_skip(rt, "libhelper.so", "kvrt-<name>.so");
    size_t i;
    int rc = kvrt_runtime_find_plugin(rt, "abi", &i);
    const char *msg = kvrt_error_message();
    tap_ok(rc == KVRT_ERR_NODEV && strstr(msg, "backend \"abi\" was passed over") && strstr(msg, "kvrt-abi.so") &&
               strstr(msg, "incompatible ABI major"),
           "asking for a passed-over backend by name says it was passed over and why");
    tap_diag("%s", msg);
    rc = kvrt_runtime_find_plugin(rt, "nosuch", &i);
    tap_ok(rc == KVRT_ERR_NODEV && strstr(kvrt_error_message(), "no backend named \"nosuch\""),
           "a name no file carries is still 'no backend named'");
    kvrt_runtime_close(rt);
}

static void test_duplicates(void)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s:%s", getenv("KVRT_TEST_SECOND_DIR"), dir);
    kvrt_runtime *rt = fixture_runtime(path, NULL);
    if (!rt) {
        tap_ok(false, "runtime with two folders opens");
        return;
    }
    size_t i;
    kvrt_runtime_find_plugin(rt, "subset", &i);
    struct kvrt_plugin_info info;
    kvrt_runtime_plugin_info(rt, i, &info);
    tap_ok(strstr(info.path, "second/kvrt-subset-again.so") != NULL,
           "two plugins named 'subset': the first in search order wins (%s)", info.path);
    expect_skip(rt, "kvrt-subset.so", "was found first");
    kvrt_runtime_close(rt);
}

static void test_refusal_before_bind(void)
{
    kvrt_runtime *rt = fixture_runtime(dir, NULL);
    if (!rt) {
        tap_ok(false, "runtime opens");
        return;
    }
    unlink(marker);
    kvrt_backend *b = NULL;
    int st = kvrt_runtime_bind(rt, "subset", "BLHNC", &b);
    tap_ok(st == KVRT_ERR_REFUSED, "binding an undeclared layout is refused (%s)", kvrt_status_name(st));
    const char *m = kvrt_error_message();
    tap_ok(strstr(m, "BLHNC") && strstr(m, "subset") && strstr(m, "LBHNC, LBNHC"),
           "the refusal names the layout, the backend and its layouts");
    tap_diag("%s", m);
    tap_ok(!marker_has("subset bind"), "the plugin's bind never ran for the refused layout");

    st = kvrt_runtime_bind(rt, "subset", "NHC", &b);
    tap_ok(st == KVRT_OK, "alias NHC (LBNHC) is declared and binds");
    tap_ok(marker_has("subset bind 1"), "bind ran with LBNHC (1) for the accepted alias");
    tap_ok(b && kvrt_backend_layout(b) == KVRT_LAYOUT_LBNHC, "the backend reports LBNHC");

    unlink(marker);
    st = kvrt_runtime_bind(rt, "subset", "BHLNC", &b);
    tap_ok(st == KVRT_ERR_REFUSED && !marker_has("bind"), "a second refusal also runs no plugin code");

    st = kvrt_runtime_bind(rt, "subset", "lbnhc", &b);
    tap_ok(st == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "lbnhc"),
           "a misspelt layout is invalid and quoted as spelled");

    st = kvrt_runtime_bind(rt, "failbind", "LBHNC", &b);
    tap_ok(st != KVRT_OK && strstr(kvrt_error_message(), "failbind") &&
               strstr(kvrt_error_message(), "TEST_BIND_FAILED"),
           "a failing bind is reported with the backend's reason");
    tap_diag("%s", kvrt_error_message());

    st = kvrt_runtime_bind(rt, "nodev", "LBHNC", &b);
    tap_ok(st == KVRT_ERR_NODEV && strstr(kvrt_error_message(), "TEST_NO_DEVICE"),
           "an explicitly named backend without a device is a hard error with the reason");

    st = kvrt_runtime_bind(rt, "nosuch", "LBHNC", &b);
    tap_ok(st == KVRT_ERR_NODEV && strstr(kvrt_error_message(), "nosuch"), "an unknown backend name is reported");

    /* Automatic selection: failbind and nodev come before subset in search
     * order, each is passed over with its reason. */
    st = kvrt_runtime_bind(rt, NULL, "LBHNC", &b);
    tap_ok(st == KVRT_OK && strcmp(kvrt_backend_name(b), "subset") == 0,
           "automatic selection binds the first backend that can take the layout");
    const char *trace = kvrt_runtime_trace(rt);
    tap_ok(strstr(trace, "passed over backend \"failbind\"") &&
               strstr(trace, "passed over backend \"nodev\": no device"),
           "every backend passed over is reported with its reason");
    tap_diag("%s", trace);

    st = kvrt_runtime_bind(rt, NULL, "BLNHC", &b);
    tap_ok(st == KVRT_ERR_NODEV && strstr(kvrt_error_message(), "does not declare BLNHC"),
           "no backend takes BLNHC: the error lists each one's reason");

    setenv("KVRT_BACKEND", "subset", 1);
    unlink(marker);
    st = kvrt_runtime_bind(rt, NULL, "BLNHC", &b);
    tap_ok(st == KVRT_ERR_REFUSED && !marker_has("bind"),
           "KVRT_BACKEND names a backend that refuses: hard error, no bind");
    st = kvrt_runtime_bind(rt, NULL, "LBHNC", &b);
    tap_ok(st == KVRT_OK && strcmp(kvrt_backend_name(b), "subset") == 0, "KVRT_BACKEND selects the backend");
    unsetenv("KVRT_BACKEND");
    kvrt_runtime_close(rt);
}

/* A FIFO named like a plugin, in a folder and named directly: dlopen on it
 * would block for ever, so it is refused by type before. */
static void test_fifo(void)
{
    char tmpl[] = "/tmp/kvrt-fifo-XXXXXX";
    char *tmp = mkdtemp(tmpl);
    char fifo[1024];
    if (!tmp) {
        tap_ok(false, "mkdtemp");
        return;
    }
    snprintf(fifo, sizeof(fifo), "%s/kvrt-x.so", tmp);
    if (mkfifo(fifo, 0600) != 0) {
        tap_skip("a FIFO in a plugin folder: mkfifo failed");
        tap_skip("a FIFO named in the plugin path: mkfifo failed");
    } else {
        kvrt_runtime *rt = fixture_runtime(tmp, NULL);
        const char *r = rt ? skip_reason(rt, "kvrt-x.so") : NULL;
        tap_ok(r && strstr(r, "a FIFO") && strstr(r, "regular files"),
               "a FIFO in a plugin folder is skipped as a FIFO, without blocking");
        kvrt_runtime_close(rt);
        rt = fixture_runtime(fifo, NULL);
        r = rt ? skip_reason(rt, "kvrt-x.so") : NULL;
        tap_ok(r && strstr(r, "a FIFO"), "a FIFO named in the plugin path is skipped as a FIFO");
        kvrt_runtime_close(rt);
        unlink(fifo);
    }
    rmdir(tmp);
}

/* An entry longer than a file name can be: truncated, it would name
 * another file.  Here the first 4095 bytes name kvrt-subset.so exactly. */
static void test_long_entry(void)
{
    char *entry = malloc(PATH_MAX + 64);
    if (!entry) {
        tap_ok(false, "malloc");
        return;
    }
    size_t len = (size_t)snprintf(entry, PATH_MAX, "%s/", dir);
    const char *file = "kvrt-subset.so";
    while (len + 2 + strlen(file) <= PATH_MAX - 1) {
        memcpy(entry + len, "./", 2);
        len += 2;
    }
    if (len + strlen(file) < PATH_MAX - 1) {
        /* An odd remainder: one more slash keeps the same file. */
        entry[len++] = '/';
    }
    snprintf(entry + len, PATH_MAX + 64 - len, "%sXXXXXXXXXX", file);
    kvrt_runtime *rt = fixture_runtime(entry, NULL);
    bool refused = rt && kvrt_runtime_num_plugins(rt) == 0 && kvrt_runtime_num_skipped(rt) == 1;
    const char *path = "", *reason = "";
    if (refused)
        kvrt_runtime_skipped(rt, 0, &path, &reason);
    tap_ok(refused && strstr(reason, "at most") && strstr(path, "..."),
           "a %zu-byte plugin path entry is refused by name, not truncated into kvrt-subset.so", strlen(entry));
    if (rt && !refused)
        tap_diag("plugins %zu, skipped %zu", kvrt_runtime_num_plugins(rt), kvrt_runtime_num_skipped(rt));
    kvrt_runtime_close(rt);
    entry[PATH_MAX - 1] = '\0';
    rt = fixture_runtime(entry, NULL);
    tap_ok(rt && loaded(rt, "subset"), "its first %d bytes do name kvrt-subset.so (the test is meaningful)",
           PATH_MAX - 1);
    kvrt_runtime_close(rt);
    free(entry);
}

static void test_paths(void)
{
    char path[1024];
    /* Empty elements never mean the current directory. */
    char cwd[512];
    if (!getcwd(cwd, sizeof(cwd)))
        cwd[0] = '\0';
    if (chdir(dir) != 0)
        tap_diag("chdir failed");
    kvrt_runtime *rt = fixture_runtime("::", NULL);
    tap_ok(rt && kvrt_runtime_num_plugins(rt) == 0 && kvrt_runtime_num_skipped(rt) == 0,
           "empty path elements do not search the current directory");
    kvrt_runtime_close(rt);
    if (cwd[0] && chdir(cwd) != 0)
        tap_diag("chdir back failed");

    snprintf(path, sizeof(path), "%s/kvrt-subset.so", dir);
    rt = fixture_runtime(path, NULL);
    tap_ok(rt && kvrt_runtime_num_plugins(rt) == 1 && loaded(rt, "subset"), "a path element may name a plugin file");
    kvrt_runtime_close(rt);

    /* A folder anyone can write to is refused unless explicitly allowed. */
    char tmpl[] = "/tmp/kvrt-loader-XXXXXX";
    char *tmp = mkdtemp(tmpl);
    if (!tmp) {
        tap_ok(false, "mkdtemp");
        return;
    }
    snprintf(path, sizeof(path), "cp %s/kvrt-subset.so %s/", dir, tmp);
    if (system(path) != 0)
        tap_diag("copy failed");
    chmod(tmp, 0777);
    rt = fixture_runtime(tmp, NULL);
    const char *r = rt ? skip_reason(rt, strrchr(tmp, '/') + 1) : NULL;
    tap_ok(rt && kvrt_runtime_num_plugins(rt) == 0 && r && strstr(r, "writable by other users") &&
               strstr(r, "KVRT_ALLOW_INSECURE_PLUGINS"),
           "a world-writable plugin folder is refused with the reason");
    if (r)
        tap_diag("%s", r);
    kvrt_runtime_close(rt);
    setenv("KVRT_ALLOW_INSECURE_PLUGINS", "1", 1);
    rt = fixture_runtime(tmp, NULL);
    tap_ok(rt && loaded(rt, "subset"), "KVRT_ALLOW_INSECURE_PLUGINS=1 accepts it");
    kvrt_runtime_close(rt);
    unsetenv("KVRT_ALLOW_INSECURE_PLUGINS");
    snprintf(path, sizeof(path), "rm -rf %s", tmp);
    if (system(path) != 0)
        tap_diag("cleanup failed");
}

int main(void)
{
    dir = getenv("KVRT_TEST_PLUGIN_DIR");
    if (!dir)
        tap_skip_all("KVRT_TEST_PLUGIN_DIR is not set; run through meson test");
    snprintf(marker, sizeof(marker), "/tmp/kvrt-loader-marker-%d", (int)getpid());
    setenv("KVRT_TEST_MARKER", marker, 1);
    unsetenv("KVRT_BACKEND");
    tap_plan_dynamic();
    test_discovery();
    test_newer_minor();
    test_passed_over_names();
    test_duplicates();
    test_refusal_before_bind();
    test_paths();
    test_fifo();
    test_long_entry();
    unlink(marker);
    return tap_done();
}
