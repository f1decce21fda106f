/* Internal: the agent, its peers, the parsed metadata and the planner. */
#ifndef KVRT_XFER_INTERNAL_H
#define KVRT_XFER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include <kvrt/placement.h>
#include <kvrt/runtime.h>
#include <kvrt/xfer.h>

/* Set the message and yield `status`, visibly at the call site (as the
 * core's kvrt_fail), so that analysers see a failing helper never returns
 * KVRT_OK. */
#define XFER_FAIL(status, ...) (kvrt_error_report(KVRT_OK, __VA_ARGS__), (status))
#define ULL(x) ((unsigned long long)(x))

/* One layer of a cache as the planner sees it (either side). */
struct xfer_layer {
    const struct kvrt_spec *spec;
    struct kvrt_view view;           /* [B*r, H, N(k), C] in bytes */
    uint64_t kernel_blocks;          /* r */
    uint64_t kernel_states;          /* N(k) */
    uint64_t heads, states, content; /* H, N of a manager block, C bytes */
    uint64_t staging_offset;         /* within one block's staging bytes */
};

/* A cache described by metadata (the peer) or by the cache itself (local). */
struct xfer_cache_desc {
    enum kvrt_layout layout;
    kvrt_placement *placement; /* owned for the remote side only */
    uint64_t num_blocks;
    uint64_t num_layers;
    struct xfer_layer *layers;
    uint64_t staging_per_block;
    uint64_t bytes;
};

/* A parsed metadata blob (pointers into the blob). */
struct xfer_md {
    struct xfer_cache_desc cache;
    bool registered;
    uint64_t cache_addr, area_addr, area_bytes;
    const uint8_t *cache_rkey, *area_rkey, *worker_addr;
    uint32_t cache_rkey_len, area_rkey_len, worker_addr_len;
};

struct xfer_queued {
    struct xfer_queued *next;
    kvrt_xfer_peer *peer;
    uint32_t kind;
    uint8_t *data;
    size_t len;
};

struct kvrt_xfer_peer {
    kvrt_xfer_agent *agent;
    kvrt_xfer_peer *next;
    ucp_ep_h ep; /* connection (listener/client) or worker-address ep */
    /* The ep that carries RMA and active messages.  A client that came in
     * through the listener (tcp) opens it to the peer's worker address, so
     * that UCX may pick shared memory; the server learns it from BIND. */
    ucp_ep_h data_ep;
    bool own_data_ep; /* created here (closed here) */
    uint64_t token;   /* the server's name for this peer */
    enum kvrt_xfer_peer_state state;
    char why[512];
    bool loaded;   /* metadata checked, rkeys unpacked */
    uint8_t *blob; /* the peer's metadata (kept: md points into it) */
    size_t blob_len;
    struct xfer_md md;
    ucp_rkey_h cache_rkey, area_rkey;
    bool hello_seen; /* server side: the peer's metadata arrived */
    bool reply_seen; /* client side: the answer arrived */
    int reply_status;
    bool ack_seen;
    uint64_t ack_xid;
    int ack_status;
    char ack_msg[512];
};

struct kvrt_xfer_agent {
    kvrt_backend *backend;
    kvrt_cache *cache;
    struct xfer_cache_desc local;
    double timeout_s;

    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_listener_h listener;
    ucp_address_t *worker_addr;
    size_t worker_addr_len;

    bool cache_registered;
    void *cache_addr;
    ucp_mem_h cache_memh;
    void *cache_rkey;
    size_t cache_rkey_len;

    kvrt_buffer *area_buf; /* on the backend: gather/scatter target */
    uint8_t *area_host;    /* registered host bytes (area_buf's own when host memory) */
    bool area_shared;      /* area_host is area_buf's memory */
    uint64_t area_bytes;
    ucp_mem_h area_memh;
    void *area_rkey;
    size_t area_rkey_len;

    kvrt_xfer_peer *peers;
    ucp_conn_request_h pending_conn[16];
    size_t num_pending_conn;
    struct xfer_queued *inbox, **inbox_tail; /* requests from peers */
    struct xfer_queued *notes, **notes_tail; /* notifications */
    uint64_t next_xid;
    uint64_t next_token;
};

/* The handshake answer's header. */
struct xfer_reply {
    int32_t status;
    uint32_t reserved;
    uint64_t token;
};

static inline ucp_ep_h xfer_data_ep(const kvrt_xfer_peer *p)
{
    return p->data_ep ? p->data_ep : p->ep;
}

/* Active message ids. */
enum {
    XFER_AM_HELLO = 1,   /* data: metadata */
    XFER_AM_REPLY = 2,   /* header status; data: metadata or the refusal */
    XFER_AM_COMMIT = 3,  /* staged push arrived: scatter it */
    XFER_AM_PREPARE = 4, /* staged pull: gather into the area */
    XFER_AM_ACK = 5,     /* answer to COMMIT/PREPARE */
    XFER_AM_NOTIFY = 6,  /* data: the notification */
    XFER_AM_BYE = 7,
    XFER_AM_BIND = 8, /* header: the token; this ep is the peer's data ep */
};

/* The selection of a staged request: what each block contributes. */
struct xfer_sel {
    uint64_t layer_start, num_layers;
    uint64_t head_start, num_heads;
};

/* COMMIT / PREPARE header, followed by the ids in the data. */
struct xfer_stage_msg {
    uint64_t xid;
    uint64_t num_blocks;
    struct xfer_sel sel;
};

/* metadata.c */
int xfer_desc_local(kvrt_cache *c, struct xfer_cache_desc *out);
int xfer_desc_from_placement(struct xfer_cache_desc *d);
void xfer_desc_free(struct xfer_cache_desc *d, bool owns_placement);
int xfer_md_export(const kvrt_xfer_agent *a, uint8_t **blob, size_t *len);
int xfer_md_parse(const uint8_t *blob, size_t len, struct xfer_md *md);
int xfer_md_compatible(const struct xfer_cache_desc *local, const struct xfer_cache_desc *remote);

/* messages.c */
int xfer_ucx_fail(ucs_status_t st, const char *what);
int xfer_set_am_handlers(kvrt_xfer_agent *a);
int xfer_wait(kvrt_xfer_agent *a, kvrt_xfer_peer *p, void *req, const char *what);
int xfer_am_send(kvrt_xfer_agent *a, kvrt_xfer_peer *p, unsigned id, const void *hdr, size_t hlen, const void *data,
                 size_t dlen, const char *what);
int xfer_peer_ok(const kvrt_xfer_peer *p, const char *what);
int xfer_serve_inbox(kvrt_xfer_agent *a);
double xfer_now(void);

/* peer.c: a new peer is linked into a->peers and CONNECTED; drop = unlink +
 * free without flushing. */
int xfer_peer_new(kvrt_xfer_agent *a, kvrt_xfer_peer **out);
void xfer_peer_ep_params(ucp_ep_params_t *ep, kvrt_xfer_peer *p);
int xfer_peer_load_blob(kvrt_xfer_agent *a, kvrt_xfer_peer *p, size_t len);
void xfer_peer_unlink(kvrt_xfer_agent *a, kvrt_xfer_peer *p);
void xfer_peer_free(kvrt_xfer_peer *p, bool polite);
void xfer_peer_drop(kvrt_xfer_agent *a, kvrt_xfer_peer *p);

/* staging.c: one batch of blocks between the cache and the area (packed). */
uint64_t xfer_sel_block_bytes(const struct xfer_cache_desc *d, const struct xfer_sel *s);
int xfer_stage_out(kvrt_xfer_agent *a, const int64_t *ids, uint64_t n, const struct xfer_sel *s);
int xfer_stage_in(kvrt_xfer_agent *a, const int64_t *ids, uint64_t n, const struct xfer_sel *s);

/* The memory address of a kvrt buffer when it has one (host memory). */
void *xfer_buffer_host_address(kvrt_buffer *buf);

/* "0 (auto), 1 (regions), ...": the valid method values, for messages. */
const char *xfer_method_values(void);

#endif
