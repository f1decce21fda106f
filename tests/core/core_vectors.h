/* Test helper: read geometry/placement acceptance vectors into kvrt structs. */
#ifndef KVRT_TESTS_CORE_VECTORS_H
#define KVRT_TESTS_CORE_VECTORS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <kvrt/kvrt.h>

/* Load dir/file (dir from argv[1] or $KVRT_VECTORS_DIR); NULL after a
 * "Bail out!" line on failure. */
json_t *cv_load(int argc, char **argv, const char *file);

/* Integer member (false when negative or not an integer); null or absent
 * -> KVRT_UNSET. */
bool cv_u64(const json_t *obj, const char *key, uint64_t *out);

/* A vectors spec object -> kvrt_spec.  false (with *why) when malformed. */
bool cv_spec(const json_t *obj, struct kvrt_spec *out, const char **why);

/* true when every string of the array occurs in msg; tap_diag's the rest. */
bool cv_mentions(const json_t *strings, const char *msg);

/* Compare n integers with the JSON array; tap_diag on mismatch. */
bool cv_eq_array(const json_t *want, const uint64_t *got, size_t n);

#endif
