/*
 * The address of the shared tier: redis://[USER@]HOST:PORT[,HOST:PORT...]
 * or rediss:// (TLS), IPv6 hosts in brackets.  Several addresses are
 * seeds of one cluster (any that answers tells the rest); a plain server
 * is named by one.  No dependency on the rest of the store: the unit
 * tests compile it alone.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_REDIS_URL_H
#define KVRT_STORE_REDIS_URL_H

#include <stdbool.h>
#include <stddef.h>

#define REDIS_URL_MAX_SEEDS 16
#define REDIS_HOST_MAX 256
#define REDIS_USER_MAX 128

struct redis_addr {
    char host[REDIS_HOST_MAX]; /* a name or an address, IPv6 without brackets */
    int port;
};

struct redis_url {
    bool tls;                  /* rediss:// */
    char user[REDIS_USER_MAX]; /* the ACL user; "" for none */
    struct redis_addr seeds[REDIS_URL_MAX_SEEDS];
    int num_seeds;
};

/* The valid form, for messages. */
#define REDIS_URL_FORM                                                                                                 \
    "redis://[USER@]HOST:PORT[,HOST:PORT...] or rediss://... (TLS); IPv6 as [ADDR]:PORT; port 1-65535, default "       \
    "6379; at most 16 addresses"

/* Parse url; false with why (what is wrong with it) on bad input. */
bool redis_url_parse(const char *url, struct redis_url *out, char *why, size_t size);

/* "HOST:PORT", or "[HOST]:PORT" for an IPv6 address. */
void redis_addr_format(const struct redis_addr *a, char *out, size_t size);

#endif
