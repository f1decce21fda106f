/*
 * The two processes of a libkvrt-xfer test: a side (a CPU cache filled
 * with the pattern of tools/xfer/xfer_pattern.h, and its agent) in this
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
 *   post I push|pull MINE THEIRS   one transfer (ids "3,5,9") -> "posted H"
 *   wait H SECONDS      its end, released      -> "done STATUS MESSAGE"
 *   grant|revoke I r|w|rw IDS|all              -> "granted" / "error ..."
 *   peerstate I / close I / newest             a peer's state, its close,
 *                       the count of peers accepted and the last one's name
 *   events              the agent's refusals, violations, strangers,
 *                       denials, notifications taken, accept errors, log lines
 *   lastlog / lastrefusal / lastfailed         the last log line (--log),
 *                       accept refusal, failed peer closed here and why
 *   verify-below N      blocks below N that differ -> "verify-below BAD NOTES"
 *   quit                close everything and exit 0
 * Options besides the cache's: --listen, --push-to PORT --push BASE:N:PER
 * (connect and push from the start), --check-notes (check a notified
 * transfer's blocks the moment it arrives), --report-notes (and print
 * "note INDEX ok|bad" for each), --zero (no pattern: the cache stays zero),
 * --memory allocated|aligned|mmap|dlpack (where the cache lives), --key-file F,
 * --flags N, --allow LIST (kvrt_xfer_agent_options), --log (keep the agent's
 * log lines).
 * It exits when its stdin closes (the parent died), with status 3 when its
 * cache's memory was not handed back exactly once.
 */
#ifndef KVRT_TESTS_XFER_SIDE_H
#define KVRT_TESTS_XFER_SIDE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include <kvrt/dlpack.h>
#include <kvrt/kvrt.h>
#include <kvrt/xfer.h>

#include "xfer_pattern.h"

/* Where a side's cache lives: kvrt's own allocation, or memory the side
 * owns under kvrt_cache_wrap (aligned_alloc, mmap) or kvrt_cache_from_dlpack
 * (a flat uint8 DLPack tensor over aligned_alloc). */
enum side_memory { SIDE_ALLOCATED, SIDE_ALIGNED, SIDE_MMAP, SIDE_DLPACK };

/* The name of a memory kind (--memory), and back. */
const char *side_memory_name(enum side_memory m);
bool side_memory_parse(const char *name, enum side_memory *m);

struct side_opts {
    enum side_memory memory;
    enum kvrt_layout layout;
    enum kvrt_dtype dtype;
    uint64_t layers, heads, head_size, block_size, blocks;
    uint64_t seed, head_offset;
    uint64_t chunk_bytes, staging_bytes;
    double timeout_s;
    bool zero; /* leave the cache zero (no pattern written) */
    /* The agent's key file and flags (kvrt_xfer_agent_options), and where
     * its warnings go (NULL: stderr). */
    const char *key_file;
    const char *allow;
    uint32_t flags;
    void (*log)(void *user, enum kvrt_log_level level, const char *message);
    void *log_user;
};

/* 4 layers x 4 KV heads x head size 32, bf16, 16-token blocks (32 KiB of
 * staging per block), 128 blocks; 64 KiB chunks, four of them: small enough
 * that staged transfers run many chunks and wait for slots. */
void side_opts_default(struct side_opts *o);

/* Memory a side owns under a wrapped cache, and what kvrt did with it: on
 * the heap, since kvrt hands it back when its last reference goes, which
 * may be an agent's end after the runtime's close. */
struct side_owned {
    enum side_memory kind;
    void *address;
    uint64_t bytes;
    int released;       /* release callbacks, or the DLPack deleter's runs */
    bool wrong_address; /* a release named other memory */
    DLManagedTensor tensor;
    int64_t shape[1];
};

struct side {
    kvrt_runtime *rt;
    kvrt_backend *be;
    kvrt_placement *p;
    kvrt_cache *c;
    struct xpat x;
    kvrt_xfer_agent *a;
    struct side_owned *owned; /* NULL for kvrt's own allocation */
    struct side_opts o;
};

/* KVRT_OK, or the failing status with kvrt_error_message(). */
int side_open(struct side *s, const struct side_opts *o);
/* Whatever of the side is still open goes (the agent first); then the
 * owned memory is freed if kvrt handed it back.  false (with a diagnostic
 * on stderr) when kvrt did not hand it back exactly once, with its
 * address: that memory is then left allocated. */
bool side_close(struct side *s);

/* Post one push (or pull) of `n` blocks, its record as the notification;
 * NULL (with a TAP diagnostic) when refused. */
kvrt_xfer_handle *side_post(struct side *s, kvrt_xfer_peer *p, const struct side_opts *source, const int64_t *mine,
                            const int64_t *theirs, uint64_t n, bool pull, uint64_t index);
/* ids v[i] = (first + i * stride) % mod */
void side_ids(int64_t *v, uint64_t n, uint64_t first, uint64_t stride, uint64_t mod);
/* A TAP point: nothing left in the agent after a few rounds of progress
 * (streams, UCX requests, busy chunks, handles). */
void side_agent_clean(kvrt_xfer_agent *a, const char *what);

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
/* TAP points: the child's whole cache against the records of its
 * notifications, which must number `lo` to `hi` (*got, may be NULL, gets
 * the count); nothing left in the child's agent. */
bool child_verified_range(struct child *c, uint64_t lo, uint64_t hi, const char *what, uint64_t *got);
bool child_verified(struct child *c, uint64_t notes, const char *what);
void child_clean(struct child *c, const char *what);

/* The child's program: `self --child ...`. */
int child_main(int argc, char **argv);

/* The start of each multi-process test's main(): run as a child (--child)
 * and return its exit status, or, in the parent, ignore SIGPIPE (a child
 * that died shows as a failed command, not a dead parent), start a dynamic
 * TAP plan and return -1. */
int side_main(int argc, char **argv);

/* Hex of a blob (malloc'd) and back. */
char *to_hex(const void *blob, size_t len);
void *from_hex(const char *hex, size_t *len);

#endif
