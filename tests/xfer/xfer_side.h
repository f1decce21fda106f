/*
 * The two processes of a libkvrt-xfer test: a side (a CPU cache filled
 * with the pattern of tests/lib/xfer_pattern.h, and its agent) in this
 * process, and child processes that each hold one side, serve it and
 * answer commands on a pipe.
 *
 * A child prints "port N" (with --listen) and "md HEX" (its metadata) when
 * ready, then accepts peers, progresses, applies every notification's
 * record to its expected contents and answers one line per command:
 *   load HEX            kvrt_xfer_peer_load of that blob  -> "loaded" / "error ..."
 *   connect PORT        kvrt_xfer_connect                 -> "peer I" / "error ..."
 *   push I BASE N PER   push to peer I without end: PER blocks a transfer,
 *                       one at a time, into its blocks BASE.. in turns
 *                       over N                              -> "pushing"
 *   stop I              no more pushes; the one in flight ends
 *                                                 -> "stopped OK FAILED WHY"
 *   verify              compare the whole cache           -> "verify BAD NOTES WHERE"
 *   stats               kvrt_xfer_agent_stats             -> "stats OUT IN UCX BUSY PEERS"
 *   status              peers and notifications -> "status connected=.. peers=..
 *                       notes=.. bad=.. out=.. in=.. ucx=.. busy=.."
 *   quit                close everything and exit 0
 * Options besides the cache's: --listen, --push-to PORT --push BASE:N:PER
 * (connect and push from the start), --check-notes (check a notified
 * transfer's blocks the moment it arrives), --report-notes (and print
 * "note INDEX ok|bad" for each), --zero (no pattern: the cache stays zero).
 * It exits when its stdin closes (the parent died).
 */
#ifndef KVRT_TESTS_XFER_SIDE_H
#define KVRT_TESTS_XFER_SIDE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include <kvrt/kvrt.h>
#include <kvrt/xfer.h>

#include "xfer_pattern.h"

struct side_opts {
    enum kvrt_layout layout;
    enum kvrt_dtype dtype;
    uint64_t layers, heads, head_size, block_size, blocks;
    uint64_t seed, head_offset;
    uint64_t chunk_bytes, staging_bytes;
    double timeout_s;
    bool zero; /* leave the cache zero (no pattern written) */
};

/* 4 layers x 4 KV heads x head size 32, bf16, 16-token blocks (32 KiB of
 * staging per block), 128 blocks; 64 KiB chunks, four of them: small enough
 * that staged transfers run many chunks and wait for slots. */
void side_opts_default(struct side_opts *o);

struct side {
    kvrt_runtime *rt;
    kvrt_backend *be;
    kvrt_placement *p;
    kvrt_cache *c;
    struct xpat x;
    kvrt_xfer_agent *a;
    struct side_opts o;
};

/* KVRT_OK, or the failing status with kvrt_error_message(). */
int side_open(struct side *s, const struct side_opts *o);
void side_close(struct side *s);

/* A record of `n` blocks pushed (or pulled, when pull) from `src` ids of the
 * source side to `dst` ids, all layers and heads; text for a notification. */
char *side_record(const struct side_opts *source, const int64_t *src, const int64_t *dst, uint64_t n, bool pull,
                  uint64_t index);

struct child {
    pid_t pid;
    FILE *to, *from;
    unsigned port;
    char *md; /* the child's metadata, decoded */
    size_t md_len;
};

/* Start `self --child ARGS...` (args NULL-terminated) and read its ready
 * lines.  false (with a diagnostic) when it did not come up. */
bool child_start(struct child *c, const char *self, const char *const *args);
/* Send one command line, read one answer line (without the newline). */
bool child_cmd(struct child *c, const char *cmd, char *reply, size_t size, double timeout_s);
/* quit, then wait (SIGKILL after a few seconds); the exit status, or
 * 128 + signal. */
int child_stop(struct child *c);
/* SIGKILL now and reap. */
void child_kill(struct child *c);

/* The child's program: `self --child ...`. */
int child_main(int argc, char **argv);

/* Hex of a blob (malloc'd) and back. */
char *to_hex(const void *blob, size_t len);
void *from_hex(const char *hex, size_t *len);

#endif
