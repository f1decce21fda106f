/*
 * fuzz-xfer-metadata: the kvrt-xfer metadata parser (kvrt_xfer_metadata_parse).
 *
 * A blob arrives from another process before any check has run, so every
 * input must either parse into a placement kvrt itself rebuilds and agrees
 * with, or be refused with one line naming the field -- never read outside
 * the input, never crash, never leak.
 */
#include <kvrt/xfer.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kvrt_xfer_metadata_info info = {.size = sizeof(info)};
    /* An exact-size heap copy, so a read past the end is an ASan error. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    if (size)
        memcpy(copy, data, size);
    int rc = kvrt_xfer_metadata_parse(copy, size, &info);
    free(copy);
    if (rc == KVRT_OK) {
        if (info.num_blocks == 0 || info.num_layers == 0 || info.num_sets == 0 || info.chunk_bytes == 0 ||
            !kvrt_layout_valid((int)info.layout))
            fuzz_fail(__FILE__, __LINE__, "accepted blob", "accepted a blob describing no cache");
        return 0;
    }
    const char *m = kvrt_error_message();
    if (rc != KVRT_ERR_INVALID && rc != KVRT_ERR_NOMEM)
        fuzz_fail(__FILE__, __LINE__, "status", "status %d for a bad blob: %s", rc, m);
    if (m[0] == '\0' || strchr(m, '\n'))
        fuzz_fail(__FILE__, __LINE__, "one line", "message is empty or spans lines: \"%s\"", m);
    return 0;
}
