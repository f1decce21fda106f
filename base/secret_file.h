/*
 * The rule a file must keep to hold a secret (a key, a password): a
 * regular file owned by this user or root, no bit for group or others, and
 * no longer than the secret may be.  One rule, one wording, for every
 * library that reads a secret from a file, so that an operator learns it
 * once.
 *
 * Base of libkvrt-xfer and libkvrt-store: below every layer of both.
 */
#ifndef KVRT_BASE_SECRET_FILE_H
#define KVRT_BASE_SECRET_FILE_H

#include <stddef.h>

/* Why the file open on fd may not hold a secret, as the end of a sentence
 * "it ..." (words in why[0..size) where they need numbers), or NULL when it
 * may.  `what` names the secret ("a key"), which is min_bytes to max_bytes
 * long (one more byte is allowed for a trailing newline). */
const char *base_secret_refusal(int fd, const char *what, long long min_bytes, long long max_bytes, char *why,
                                size_t size);

/* Up to cap bytes of fd into buf, through interrupted and short reads, until
 * the end of the file or cap; the count read (a read error ends it early). */
size_t base_secret_read(int fd, void *buf, size_t cap);

#endif
