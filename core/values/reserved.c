/* Reserved bytes of public structs: each must be zero, and a refusal names
 * the field and the byte.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include "reserved.h"

#include <kvrt/common.h>

#include "error.h"

int kvrt_check_reserved(const uint8_t *bytes, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (bytes[i] != 0)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "%s.reserved[%zu] is %u, but reserved bytes must be 0 (this libkvrt speaks API "
                             "%d.%d); fill the struct with its _default() function or a designated initialiser",
                             what, i, (unsigned)bytes[i], KVRT_API_VERSION_MAJOR, KVRT_API_VERSION_MINOR);
    return KVRT_OK;
}
