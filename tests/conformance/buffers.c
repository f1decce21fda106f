#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

void conf_diag_status(const char *what, int status)
{
    tap_diag("  %s: %s: %s", what, kvrt_status_name(status), kvrt_error_message());
}

kvrt_buffer *conf_buffer(kvrt_backend *b, uint64_t bytes, const void *init)
{
    kvrt_buffer *buf;
    int status = kvrt_buffer_create(b, bytes, &buf);
    if (status != KVRT_OK) {
        conf_diag_status("kvrt_buffer_create", status);
        return NULL;
    }
    if (init) {
        status = kvrt_buffer_upload(buf, 0, init, bytes);
        if (status != KVRT_OK) {
            conf_diag_status("kvrt_buffer_upload", status);
            kvrt_buffer_destroy(buf);
            return NULL;
        }
    }
    return buf;
}

/* Position-dependent, so that a write at a shifted offset shows too. */
void conf_sentinel(uint8_t *dst, uint64_t bytes)
{
    for (uint64_t i = 0; i < bytes; i++)
        dst[i] = (uint8_t)(0xa5 ^ (i * 7));
}

kvrt_buffer *conf_sentinel_buffer(kvrt_backend *b, uint64_t bytes)
{
    uint8_t *host = malloc(bytes ? bytes : 1);
    if (!host)
        return NULL;
    conf_sentinel(host, bytes);
    kvrt_buffer *buf = conf_buffer(b, bytes, host);
    free(host);
    return buf;
}

uint8_t *conf_download(kvrt_buffer *buf)
{
    uint64_t n = kvrt_buffer_size(buf);
    uint8_t *host = malloc(n ? n : 1);
    if (!host) {
        tap_diag("  out of host memory for %llu bytes", (unsigned long long)n);
        return NULL;
    }
    int status = kvrt_buffer_download(buf, 0, host, n);
    if (status != KVRT_OK) {
        conf_diag_status("kvrt_buffer_download", status);
        free(host);
        return NULL;
    }
    return host;
}

int64_t conf_first_diff(const uint8_t *a, const uint8_t *b, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (int64_t)i;
    return -1;
}
