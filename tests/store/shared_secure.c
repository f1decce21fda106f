/*
 * The shared tier's access control on a redis-server the test starts:
 *
 *   acl   an ACL user with only the store's keys and commands, its
 *         password in a file; a wrong password is one warning and
 *         misses; no AUTH where one is wanted too; a password file others
 *         can read, or none, is refused at open, naming it
 *   tls   rediss:// to a TLS-only server with a CA and certificates the
 *         test makes with openssl (EC keys), with and without a client
 *         certificate; a server another CA signed, or a name the
 *         certificate does not carry, is one warning and misses; TLS
 *         files with redis:// and a missing CA file are refused at open
 *
 *   test-store-secure acl|tls
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_server.h"
#include "shared_seqs.h"
#include "tap.h"

/* ---- ACL ------------------------------------------------------------------- */

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    chmod(path, mode);
}

static void mode_acl(void)
{
    /* the user docs/security.md suggests: the store's keys and commands */
    static const char *const extra[] = {"--user",         "default", "off",   "--user", "kvrt",    "on",
                                        ">s3cret-pass",   "~kvrt:*", "+get",  "+set",   "+exists", "+del",
                                        "+cluster|slots", "+asking", "+ping", NULL};
    struct redis_server srv;
    char why[512];
    if (!redis_server_path(why, sizeof(why))) {
        tap_skip("%s", why);
        return;
    }
    if (!redis_server_start_with(&srv, "127.0.0.1", NULL, extra, "--user kvrt --pass s3cret-pass --no-auth-warning",
                                 why, sizeof(why))) {
        tap_ok(false, "redis-server with an ACL user: %s", why);
        return;
    }
    char *dir = st_tempdir("acl");
    char good[4200], bad[4200], open_file[4200];
    snprintf(good, sizeof(good), "%s/good", dir);
    snprintf(bad, sizeof(bad), "%s/bad", dir);
    snprintf(open_file, sizeof(open_file), "%s/open", dir);
    write_file(good, "s3cret-pass\n", 0600);
    write_file(bad, "not-the-pass\n", 0600);
    write_file(open_file, "s3cret-pass\n", 0644);
    char url[256];
    snprintf(url, sizeof(url), "redis://kvrt@127.0.0.1:%d", srv.port);
    struct st_log lg = {.n = 0};
    struct sq_files f = {.password = good};
    kvrt_store *a = sq_open(url, 1.0, &lg, &f);
    bool ok = a && sq_put(a, 0, 4);
    struct kvrt_store_stats st = a ? sq_stats(a) : (struct kvrt_store_stats){0};
    tap_ok(ok && st.written_shared == 4 * (SQ_N / SQ_T) * sq_model.heads && lg.n == 0,
           "user kvrt with its password file: puts reach the server (%llu entries)",
           (unsigned long long)st.written_shared);
    kvrt_store_close(a);
    kvrt_store *b = sq_open(url, 1.0, &lg, &f);
    uint64_t wrong = 0;
    double slowest;
    uint64_t loaded = b ? sq_get_all(b, 4, &wrong, &slowest) : 0;
    tap_ok(loaded == 4 * SQ_N && wrong == 0, "and a fresh store loads them exactly");
    kvrt_store_close(b);
    lg.n = 0;
    f.password = bad;
    double t0 = sq_now();
    kvrt_store *c = sq_open(url, 1.0, &lg, &f);
    loaded = c ? sq_get_all(c, 4, &wrong, &slowest) : 1;
    tap_ok(c && loaded == 0 && lg.n == 1 && strstr(lg.lines[0], "refused AUTH as user kvrt") && sq_now() - t0 < 2,
           "a wrong password: the store opens, gets miss, one warning: %s", lg.n ? lg.lines[0] : "none");
    kvrt_store_close(c);
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", srv.port);
    lg.n = 0;
    kvrt_store *d = sq_open(url, 1.0, &lg, NULL);
    loaded = d ? sq_get_all(d, 4, &wrong, &slowest) : 1;
    tap_ok(d && loaded == 0 && lg.n == 1, "no AUTH where the server wants one: misses, one warning: %s",
           lg.n ? lg.lines[0] : "none");
    kvrt_store_close(d);
    f.password = open_file;
    kvrt_store *e = sq_open(url, 1.0, NULL, &f);
    tap_ok(!e && strstr(kvrt_error_message(), open_file) && strstr(kvrt_error_message(), "group or others"),
           "a password file others can read is refused at open: %s", kvrt_error_message());
    kvrt_store_close(e);
    f.password = "/nonexistent/pass";
    e = sq_open(url, 1.0, NULL, &f);
    tap_ok(!e && strstr(kvrt_error_message(), "/nonexistent/pass"), "a missing one too: %s", kvrt_error_message());
    kvrt_store_close(e);
    st_rmdir(dir);
    free(dir);
    redis_server_stop(&srv);
}

/* ---- TLS ------------------------------------------------------------------- */

static void mode_tls(void)
{
    char why[512];
    if (!redis_server_path(why, sizeof(why))) {
        tap_skip("%s", why);
        return;
    }
    if (system("command -v openssl >/dev/null 2>&1") != 0) {
        tap_skip("the openssl program is not installed (it makes the test's certificates)");
        return;
    }
    char *dir = st_tempdir("tls");
    char *other = st_tempdir("tls-other");
    if (!sq_make_pki(dir, "ca") || !sq_make_pki(other, "ca")) {
        tap_ok(false, "openssl made a CA and certificates");
        return;
    }
    char cert[4200], key[4200], ca[4200], ca_other[4200], ccert[4200], ckey[4200], cli[12800];
    snprintf(cert, sizeof(cert), "%s/server.pem", dir);
    snprintf(key, sizeof(key), "%s/server.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    snprintf(ca_other, sizeof(ca_other), "%s/ca.pem", other);
    snprintf(ccert, sizeof(ccert), "%s/client.pem", dir);
    snprintf(ckey, sizeof(ckey), "%s/client.key", dir);
    snprintf(cli, sizeof(cli), "--tls --cacert %s --cert %s --key %s", ca, ccert, ckey);
    const char *const extra[] = {"--tls-port",
                                 "PORT",
                                 "--tls-cert-file",
                                 cert,
                                 "--tls-key-file",
                                 key,
                                 "--tls-ca-cert-file",
                                 ca,
                                 "--tls-auth-clients",
                                 "optional",
                                 NULL};
    struct redis_server srv;
    if (!redis_server_start_with(&srv, "127.0.0.1", NULL, extra, cli, why, sizeof(why))) {
        tap_ok(false, "redis-server with TLS only: %s", why);
        return;
    }
    char url[256];
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", srv.port);
    struct st_log lg = {.n = 0};
    struct sq_files f = {.ca = ca};
    kvrt_store *a = sq_open(url, 2.0, &lg, &f);
    bool ok = a && sq_put(a, 0, 4);
    struct kvrt_store_stats st = a ? sq_stats(a) : (struct kvrt_store_stats){0};
    tap_ok(ok && st.written_shared == 4 * (SQ_N / SQ_T) * sq_model.heads && lg.n == 0,
           "%s with the CA: puts reach the server (%llu entries)%s%s", url, (unsigned long long)st.written_shared,
           lg.n ? ": " : "", lg.n ? lg.lines[0] : "");
    kvrt_store_close(a);
    f = (struct sq_files){.ca = ca, .cert = ccert, .key = ckey};
    kvrt_store *b = sq_open(url, 2.0, &lg, &f);
    uint64_t wrong = 0;
    double slowest;
    uint64_t loaded = b ? sq_get_all(b, 4, &wrong, &slowest) : 0;
    tap_ok(loaded == 4 * SQ_N && wrong == 0 && lg.n == 0,
           "a fresh store with a client certificate loads them exactly over TLS");
    kvrt_store_close(b);
    lg.n = 0;
    f = (struct sq_files){.ca = ca_other};
    kvrt_store *c = sq_open(url, 1.0, &lg, &f);
    loaded = c ? sq_get_all(c, 4, &wrong, &slowest) : 1;
    tap_ok(c && loaded == 0 && lg.n == 1 && strstr(lg.lines[0], "certificate"),
           "a server another CA signed: misses, one warning: %s", lg.n ? lg.lines[0] : "none");
    kvrt_store_close(c);
    lg.n = 0;
    snprintf(url, sizeof(url), "rediss://localhost:%d", srv.port);
    f = (struct sq_files){.ca = ca};
    kvrt_store *d = sq_open(url, 1.0, &lg, &f);
    loaded = d ? sq_get_all(d, 4, &wrong, &slowest) : 1;
    tap_ok(d && loaded == 0 && lg.n == 1 && strstr(lg.lines[0], "certificate"),
           "a name the certificate does not carry (localhost): misses, one warning: %s", lg.n ? lg.lines[0] : "none");
    kvrt_store_close(d);
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", srv.port);
    kvrt_store *e = sq_open(url, 1.0, NULL, &f);
    tap_ok(!e && strstr(kvrt_error_message(), "rediss://"), "a CA file with redis:// is refused: %s",
           kvrt_error_message());
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", srv.port);
    f = (struct sq_files){.ca = "/nonexistent/ca.pem"};
    e = sq_open(url, 1.0, NULL, &f);
    tap_ok(!e && strstr(kvrt_error_message(), "/nonexistent/ca.pem"), "a missing CA file is refused: %s",
           kvrt_error_message());
    redis_server_stop(&srv);
    st_rmdir(dir);
    st_rmdir(other);
    free(dir);
    free(other);
}

int main(int argc, char **argv)
{
    tap_plan_dynamic();
    sq_init();
    const char *mode = argc > 1 ? argv[1] : "acl";
    if (strcmp(mode, "acl") == 0)
        mode_acl();
    else if (strcmp(mode, "tls") == 0)
        mode_tls();
    else
        tap_ok(false, "unknown mode %s", mode);
    kvrt_runtime_close(sq_rt);
    return tap_done();
}
