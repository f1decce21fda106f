/*
 * fuzz-xfer-address: libkvrt-xfer's check of a peer's UCX worker address
 * (xfer/address.c), which stands between what a peer sends and UCX's own
 * unpacking (that asserts and reads past the end on malformed input).  An
 * address is accepted only when its walk stayed inside the input, ended
 * exactly at its end, and a second walk agrees; a refusal says why in one
 * line.
 */
#include <stdbool.h>

#include "address.h"
#include "fuzz.h"

/* Member by member: the struct has padding, which a parse need not set. */
static bool same_shape(const struct xfer_addr_shape *a, const struct xfer_addr_shape *b)
{
    if (a->version != b->version || a->entries != b->entries)
        return false;
    for (unsigned i = 0; i < a->entries && i < XFER_ADDR_MAX_ENTRIES; i++)
        if (a->tl[i].csum != b->tl[i].csum || a->tl[i].dev_len != b->tl[i].dev_len ||
            a->tl[i].iface_len != b->tl[i].iface_len || a->tl[i].dev_off != b->tl[i].dev_off ||
            a->tl[i].iface_off != b->tl[i].iface_off)
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    if (size)
        memcpy(copy, data, size);
    struct xfer_addr_shape a, b;
    char why[256] = "";
    int rc = xfer_addr_parse(copy, size, &a, why, sizeof(why));
    if (rc == 0) {
        if (a.entries == 0 || a.entries > XFER_ADDR_MAX_ENTRIES || a.version > 1)
            fuzz_fail(__FILE__, __LINE__, "shape", "accepted an address of %u entries, version %u", a.entries,
                      a.version);
        if (xfer_addr_parse(copy, size, &b, why, sizeof(why)) != 0 || !same_shape(&a, &b))
            fuzz_fail(__FILE__, __LINE__, "stable", "a second walk of an accepted address disagrees");
        /* Checked against itself, an address agrees unless an entry is
         * in a form UCX never packs, and then says so in one line. */
        if (xfer_addr_check(&a, copy, size, why, sizeof(why)) != 0 &&
            (!strstr(why, "a form UCX 1.13 never packs") || strchr(why, '\n')))
            fuzz_fail(__FILE__, __LINE__, "self", "an address disagrees with its own shape: %s", why);
    } else if (why[0] == '\0' || strchr(why, '\n')) {
        fuzz_fail(__FILE__, __LINE__, "why", "a refusal without a one-line reason");
    }
    free(copy);
    return 0;
}
