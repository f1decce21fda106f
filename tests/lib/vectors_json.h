/* Test helper: load an acceptance-vector file and read its fields. */
#ifndef KVRT_TESTS_VECTORS_JSON_H
#define KVRT_TESTS_VECTORS_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

/* Load dir/file; on failure print a TAP bail-out reason and return NULL. */
json_t *vectors_load(const char *dir, const char *file);

/* The vectors directory from argv[1], else $KVRT_VECTORS_DIR, else NULL. */
const char *vectors_dir_arg(int argc, char **argv);

/* json integer -> uint64 (false when not a non-negative integer). */
bool vectors_u64(const json_t *v, uint64_t *out);

/* Read a file whole; *len gets its size.  NULL on error (errno set). */
char *vectors_read_file(const char *path, size_t *len);

#endif
