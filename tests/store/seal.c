/*
 * The tenant secret's primitives (store/seal.c): the key file's rule, the
 * derived keys, and sealed entries that open only unchanged, under the
 * name they were sealed for, with the secret they were sealed with.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvrt/runtime.h>

#include "seal.h"
#include "tap.h"

#define HDR 128u
#define N 5000u /* not a multiple of the AES block */

static char dir[256];

static const char *key_file(const char *name, const void *bytes, size_t len, mode_t mode)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, bytes, len) != (ssize_t)len)
        abort();
    close(fd);
    chmod(path, mode);
    return path;
}

static void header(uint8_t *h, uint8_t fill)
{
    memset(h, fill, HDR);
}

int main(void)
{
    tap_plan(16);
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof(dir), "%s/seal.XXXXXX", tmp);
    if (!mkdtemp(dir))
        abort();
    uint8_t secret[32], other[32];
    for (int i = 0; i < 32; i++) {
        secret[i] = (uint8_t)(i * 7 + 1);
        other[i] = (uint8_t)(i * 7 + 2);
    }

    struct store_secret a, b, a2;
    tap_ok(store_secret_load(key_file("good", secret, 32, 0600), "key_file", &a) == KVRT_OK,
           "a 32-byte key, mode 0600");
    tap_ok(store_secret_derive(secret, 32, &a2) == KVRT_OK && memcmp(&a, &a2, sizeof(a)) == 0,
           "the file and the same bytes derive the same keys");
    tap_ok(store_secret_derive(other, 32, &b) == KVRT_OK && memcmp(a.seal_key, b.seal_key, 32) != 0 &&
               memcmp(a.chain_key, a.seal_key, 32) != 0,
           "another secret, other keys; the chain and seal keys differ");
    struct store_secret bad;
    int rc = store_secret_load(key_file("open", secret, 32, 0644), "key_file", &bad);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "mode 0644") &&
               strstr(kvrt_error_message(), "open\""),
           "a key file others may read is refused, naming it: %s", kvrt_error_message());
    rc = store_secret_load(key_file("short", secret, 31, 0600), "KVRT_STORE_KEY_FILE", &bad);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "31-byte") &&
               strstr(kvrt_error_message(), "KVRT_STORE_KEY_FILE"),
           "a 31-byte key is refused, naming the source: %s", kvrt_error_message());
    rc = store_secret_load("/nonexistent/key", "key_file", &bad);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "/nonexistent/key"), "a missing file: %s",
           kvrt_error_message());

    uint8_t *plain = malloc(N), *buf = malloc(HDR + N), *copy = malloc(HDR + N);
    for (unsigned i = 0; i < N; i++)
        plain[i] = (uint8_t)(i * 31 + 5);
    header(buf, 0x11);
    tap_ok(store_seal(&a, buf, plain, N, buf + HDR) == KVRT_OK && memcmp(buf + HDR, plain, N) != 0,
           "sealed: the payload is not in clear");
    memcpy(copy, buf, HDR + N);
    tap_ok(store_unseal(&a, copy, copy + HDR, N) == NULL && memcmp(copy + HDR, plain, N) == 0,
           "opened with its secret: the same bytes");
    memcpy(copy, buf, HDR + N);
    copy[HDR + 4321] ^= 1;
    tap_ok(store_unseal(&a, copy, copy + HDR, N) != NULL, "one payload bit changed: refused");
    memcpy(copy, buf, HDR + N);
    copy[60] ^= 0x80; /* the chunk key's field */
    tap_ok(store_unseal(&a, copy, copy + HDR, N) != NULL, "moved under another name (header changed): refused");
    memcpy(copy, buf, HDR + N);
    copy[120] ^= 1; /* the tag */
    tap_ok(store_unseal(&a, copy, copy + HDR, N) != NULL, "the tag changed: refused");
    memcpy(copy, buf, HDR + N);
    const char *why = store_unseal(&b, copy, copy + HDR, N);
    tap_ok(why && strstr(why, "key"), "another secret cannot open it: %s", why ? why : "(opened)");

    uint8_t *again = malloc(HDR + N);
    header(again, 0x11);
    store_seal(&a, again, plain, N, again + HDR);
    tap_ok(memcmp(again + 84, buf + 84, 4) != 0 || memcmp(again + 104, buf + 104, 8) != 0,
           "each seal draws a new nonce");
    tap_ok(memcmp(again + HDR, buf + HDR, N) != 0, "so the same bytes seal differently");

    uint8_t k1[32], k2[32], k3[32];
    const void *parts[] = {"kvrt", plain};
    const size_t lens[] = {4, 100};
    store_secret_mac(&a, parts, lens, 2, k1);
    store_secret_mac(&a, parts, lens, 2, k2);
    store_secret_mac(&b, parts, lens, 2, k3);
    tap_ok(memcmp(k1, k2, 32) == 0, "a keyed chunk key is deterministic");
    tap_ok(memcmp(k1, k3, 32) != 0, "another secret names the same chunk otherwise");

    free(plain);
    free(buf);
    free(copy);
    free(again);
    store_secret_wipe(&a);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
