/*
 * kvrt xfer serve / send: what the two sides share — the cache set-up, the
 * deterministic pattern, the expected state, and the notification record.
 */
#ifndef KVRT_TOOLS_CLI_XFER_H
#define KVRT_TOOLS_CLI_XFER_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/placement.h>
#include <kvrt/runtime.h>
#include <kvrt/xfer.h>

#include "cli_model.h"
#include "xfer_pattern.h"

/* The largest global head index --head-offset and --peer-head-offset take. */
#define XFER_MAX_HEAD_OFFSET (1u << 20)

/* Option ids shared by both subcommands (below CLI_MODEL_OPT_FIRST). */
enum xfer_opt {
    XO_JSON,
    XO_BACKEND,
    XO_LAYOUT,
    XO_SEED,
    XO_HEAD_OFFSET,
    XO_TIMEOUT,
    XO_STAGING,
    XO_CHUNK,
    XO_INFLIGHT,
    XO_LISTEN,
    XO_PORT_FILE,
    XO_SESSIONS,
    XO_KEEP_GOING,
    XO_CONNECT,
    XO_IDS,
    XO_REMOTE_IDS,
    XO_LAYER_RANGE,
    XO_HEADS,
    XO_PULL,
    XO_METHOD,
    XO_REPEAT,
    XO_PEER_SEED,
    XO_PEER_HEAD_OFFSET,
    XO_KEY_FILE,
    XO_INSECURE,
    XO_ALLOW,
    XO_GRANT,
};

/* The options both subcommands read, after their own and before the model's. */
extern const struct cli_option xfer_common_options[];

/* Their help lines. */
void xfer_print_common_options(FILE *out);

struct xfer_side {
    const char *command; /* "xfer serve" */
    bool json;
    const char *backend_name, *layout_name;
    const char *layout_option; /* --layout as the table spells it */
    uint64_t seed, head_offset;
    double timeout;
    uint64_t staging_bytes, chunk_bytes;
    const char *key_file; /* NULL: KVRT_XFER_KEY_FILE, read by libkvrt-xfer */
    bool insecure;
    const char *allow;  /* serve: peers' addresses */
    int64_t *grant_ids; /* serve: every peer may read and write these */
    uint64_t num_grant_ids;
    bool require_grants;
    struct cli_model_flags flags;

    const struct kvrt_model_info *model;
    kvrt_runtime *rt;
    kvrt_backend *backend;
    enum kvrt_layout layout;
    kvrt_placement *placement;
    kvrt_cache *cache;
    uint64_t num_blocks;
    struct xpat pattern; /* the cache's pattern and what it should hold */
    /* Records of completed pushes, applied to `pattern` at verification:
     * computing what a transfer wrote costs about as much as the transfer,
     * and a serve that did it between transfers held the next one up. */
    struct xpat_record *records;
    size_t num_records, cap_records;
    kvrt_xfer_agent *agent;
};

/* Apply a shared option; true when `opt` was one (then *ok tells validity). */
bool xfer_side_option(struct xfer_side *s, const struct cli_option *opt, const char *value, bool *ok);

/* Model, backend, layout, placement, cache, pattern fill and agent. */
int xfer_side_set_up(struct xfer_side *s);
void xfer_side_free(struct xfer_side *s);

/* The staging pool the agent took (its chunks and their size), as
 * libkvrt-xfer answers (kvrt_xfer_agent_stats); a CLI exit status.  The
 * print writes it as one "staging" line. */
int xfer_side_staging(const struct xfer_side *s, uint64_t *chunks, uint64_t *chunk_bytes);
void xfer_side_print_staging(const struct xfer_side *s);
/* {"chunks", "chunk_bytes"}; NULL (error printed) when it cannot be built. */
json_t *xfer_side_staging_json(const struct xfer_side *s);

/* Compare every block with what it should hold (tools/xfer/xfer_pattern.h):
 * mismatching bytes (0 = ok), the first one's place in *where; UINT64_MAX
 * on a backend error. */
uint64_t xfer_side_verify(struct xfer_side *s, char *where, size_t size);

/* A notification's record, parsed (false, error printed, when it is not
 * one); unless the peer pulled, kept to be applied to the expected contents
 * by xfer_side_verify, in the order taken.  *r is a copy the caller frees. */
bool xfer_side_take_record(struct xfer_side *s, const char *text, struct xpat_record *r);

/* "ADDR:PORT" (ADDR optional: 127.0.0.1). */
bool xfer_parse_endpoint(const char *option, const char *text, char *addr, size_t size, uint16_t *port);
/* "0-7,12,9": ids in order (free with free()). */
bool xfer_parse_ids(const char *option, const char *text, int64_t **ids, uint64_t *n);

int cli_xfer_serve(int argc, char **argv);
int cli_xfer_send(int argc, char **argv);
void cli_xfer_serve_help(FILE *out, bool common);
void cli_xfer_send_help(FILE *out, bool common);

/* The two as commands of their own (`kvrt xfer serve --help`, ...). */
extern const struct cli_command cli_xfer_serve_command;
extern const struct cli_command cli_xfer_send_command;

#endif
