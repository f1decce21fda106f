#include <stdlib.h>

#include "secure_env.h"

/* Like the OpenCL ICD and Vulkan loaders: a setuid/setgid program must not
 * let its caller pick which shared objects it loads. */
const char *kvrt_secure_getenv(const char *name)
{
#if defined(__GLIBC__) || defined(_GNU_SOURCE)
    return secure_getenv(name);
#else
    if (getuid() != geteuid() || getgid() != getegid())
        return NULL;
    return getenv(name);
#endif
}
