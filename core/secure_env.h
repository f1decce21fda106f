/* Internal: the environment, read safely for setuid/setgid programs. */
#ifndef KVRT_CORE_SECURE_ENV_H
#define KVRT_CORE_SECURE_ENV_H

/* NULL in a setuid/setgid process, getenv() otherwise (secure_env.c). */
const char *kvrt_secure_getenv(const char *name);

#endif
