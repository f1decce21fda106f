/* Internal: the agent, its peers, streams and handles, the wire format. */
#ifndef KVRT_XFER_INTERNAL_H
#define KVRT_XFER_INTERNAL_H

#include <pthread.h>
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

/* ---- caches ------------------------------------------------------------------ */

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
    bool addressable;  /* data messages go straight into / out of the cache */
    uint64_t agent_id; /* names the sender of every message */
    uint64_t chunk_bytes;
    const uint8_t *worker_addr;
    uint32_t worker_addr_len;
};

/* What a staged request moves of each block. */
struct xfer_sel {
    uint64_t layer_start, num_layers;
    uint64_t head_start, num_heads;
};

/* One contiguous run: local offset, remote offset, bytes. */
struct xfer_op {
    uint64_t loff, roff, len;
};

/* ---- the wire ---------------------------------------------------------------- */

enum {
    XFER_AM_HELLO = 1,  /* handshake, client -> server: data the metadata */
    XFER_AM_REPLY = 2,  /* handshake answer: status; data metadata or refusal */
    XFER_AM_BEGIN = 3,  /* a staged push, or a pull request: ids or runs */
    XFER_AM_DATA = 4,   /* bytes of a stream (rendezvous or eager) */
    XFER_AM_DONE = 5,   /* the sender has posted every byte; notification */
    XFER_AM_ACK = 6,    /* the receiver of a push has it all (or failed) */
    XFER_AM_ABORT = 7,  /* the initiator gave a stream up */
    XFER_AM_NOTIFY = 8, /* a pull's notification to the pulled peer */
    XFER_AM_BYE = 9,
    XFER_AM_READY = 10, /* handshake, on the client's data endpoint */
};

/* Every message after the handshake starts with the sender's agent id, so
 * the receiver knows the peer without reply endpoints. */
struct xfer_hdr {
    uint64_t from;
    uint64_t xid; /* stream id, chosen by the stream's initiator */
};

enum xfer_begin_kind {
    XFER_BEGIN_PUSH_STAGED = 1,  /* data: destination ids */
    XFER_BEGIN_PULL_REGIONS = 2, /* data: (source, destination, length) runs */
    XFER_BEGIN_PULL_STAGED = 3,  /* data: source ids */
};

struct xfer_begin_msg {
    struct xfer_hdr h;
    uint32_t kind;
    uint32_t reserved;
    uint64_t count;        /* ids or runs in the data */
    struct xfer_sel sel;   /* the receiving side's selection (staged) */
    uint64_t chunk_blocks; /* staged */
    uint64_t total_bytes;
};

enum {
    XFER_DATA_STAGED = 1u, /* `chunk` names the staging chunk */
    XFER_DATA_REPLY = 2u,  /* bytes of the receiver's own pull */
    XFER_DONE_NOTE = 4u,   /* DONE carries a notification */
};

struct xfer_data_msg {
    struct xfer_hdr h;
    uint64_t offset; /* regions: byte offset in the receiver's cache */
    uint32_t chunk;
    uint32_t flags;
};

struct xfer_done_msg {
    struct xfer_hdr h;
    int32_t status; /* a served pull that failed: the data is the message */
    uint32_t flags; /* XFER_DATA_REPLY for a served pull */
    uint64_t total_bytes;
};

struct xfer_ack_msg {
    struct xfer_hdr h;
    int32_t status;
    uint32_t reserved;
};

enum { XFER_ABORT_PULL = 1u }; /* the pull this side asked for; else a push */

struct xfer_abort_msg {
    struct xfer_hdr h;
    uint32_t flags;
    uint32_t reserved;
};

struct xfer_reply_msg {
    int32_t status;
    uint32_t reserved;
};

/* ---- streams ----------------------------------------------------------------- */

/* Bytes leaving this cache: a push posted here, or a pull served here. */
struct xfer_out {
    struct xfer_out *next;
    kvrt_xfer_agent *agent;
    kvrt_xfer_peer *peer;
    kvrt_xfer_handle *h; /* a push's handle; NULL when serving a pull */
    uint64_t xid;
    bool staged;
    bool serving;        /* a pull of the peer's (messages flagged REPLY) */
    struct xfer_op *ops; /* regions: loff source, roff destination */
    size_t nops, next_op;
    uint64_t op_pos; /* bytes of ops[next_op] already posted */
    int64_t *ids;    /* staged: source ids */
    uint64_t nblocks;
    struct xfer_sel sel;
    int64_t *begin_ids;   /* a staged push: destination ids and selection, */
    struct xfer_sel rsel; /* sent with BEGIN */
    uint64_t block_bytes, chunk_blocks, nchunks, next_chunk;
    uint64_t total_bytes, bytes_done;
    unsigned inflight; /* UCX requests that point at this stream */
    bool begin_sent, done_sent, acked;
    bool finished; /* completed or failed; reaped once inflight is 0 */
    int status;
    uint8_t *note;
    size_t note_len;
    double last_activity;
};

struct xfer_deferred; /* a staged chunk waiting for a receive slot */

/* Bytes arriving into this cache: a peer's push, or a pull posted here. */
struct xfer_in {
    struct xfer_in *next;
    kvrt_xfer_agent *agent;
    kvrt_xfer_peer *peer;
    kvrt_xfer_handle *h; /* a pull's handle; NULL for a peer's push */
    uint64_t xid;
    bool pull;
    bool staged;
    bool begun;   /* the staged layout is known (BEGIN, or our own pull) */
    int64_t *ids; /* staged: destination ids */
    uint64_t nblocks;
    struct xfer_sel sel;
    uint64_t block_bytes, chunk_blocks, nchunks, chunks_done;
    uint64_t total_bytes, bytes_got;
    bool done_seen;
    bool ended;        /* the initiator sent its last word (DONE or ABORT) */
    unsigned inflight; /* receives under way (into the cache or a slot) */
    unsigned deferred; /* chunks waiting for a slot */
    bool finished;
    int status;
    char *why;     /* a failure reported by the peer or found here */
    uint8_t *note; /* the push's notification, from DONE */
    size_t note_len;
    double last_activity;
};

/* A UCX request's context; headers and control data live here until the
 * request completes (UCX reads them until then). */
struct xfer_req {
    struct xfer_req *prev, *next; /* the agent's requests in UCX's hands */
    kvrt_xfer_agent *agent;
    struct xfer_out *out; /* a data send */
    struct xfer_in *in;   /* a data receive */
    int slot;             /* staging slot held, or -1 */
    uint32_t chunk;
    uint64_t bytes;
    union {
        struct xfer_data_msg data;
        struct xfer_begin_msg begin;
        struct xfer_done_msg done;
        struct xfer_ack_msg ack;
        struct xfer_abort_msg abort;
        struct xfer_hdr plain;
        struct xfer_reply_msg reply;
    } hdr;
    size_t len; /* bytes of payload[] */
    uint8_t payload[];
};

/* A control message waiting for its peer's data endpoint. */
struct xfer_queued_req {
    struct xfer_queued_req *next;
    unsigned id;
    size_t hlen;
    struct xfer_req *req;
};

/* A staged chunk received into a slot, waiting to be scattered. */
struct xfer_ready {
    struct xfer_ready *next;
    struct xfer_in *in;
    uint32_t chunk;
    int slot;
    uint64_t bytes;
};

struct xfer_deferred {
    struct xfer_deferred *next;
    struct xfer_in *in;
    void *desc;
    uint32_t chunk;
    uint64_t bytes;
};

struct kvrt_xfer_handle {
    kvrt_xfer_handle *next;
    kvrt_xfer_agent *agent; /* NULL once the agent is destroyed */
    struct xfer_out *out;   /* push */
    struct xfer_in *in;     /* pull */
    int status;             /* KVRT_XFER_PENDING, KVRT_OK or the failure */
    char why[640];
    struct kvrt_xfer_plan plan;
    double t_post;
};

/* ---- peers and the agent --------------------------------------------------- */

struct kvrt_xfer_peer {
    kvrt_xfer_agent *agent;
    kvrt_xfer_peer *next;
    ucp_ep_h conn_ep; /* client-server (tcp), or NULL for a loaded peer */
    ucp_ep_h data_ep; /* to the peer's worker address: every message */
    void *wire_req;   /* the data endpoint's first flush, until it is done */
    bool wired;
    struct xfer_queued_req *queue, **queue_tail; /* messages waiting for it */
    void *close_req[2];
    char name[96];
    enum kvrt_xfer_peer_state state;
    char why[512];
    bool cleaned;     /* a failed peer's streams are failed, its eps closing */
    bool closed_here; /* kvrt_xfer_peer_close or the agent's end */
    bool loaded;      /* metadata checked */
    uint8_t *blob;    /* the peer's metadata (md points into it) */
    size_t blob_len;
    struct xfer_md md;
    bool hello_seen; /* server side: the peer's metadata arrived */
    bool reply_seen; /* client side: the answer arrived */
    bool ready_seen; /* server side: the client's data endpoint works */
    int reply_status;
};

struct xfer_note {
    struct xfer_note *next;
    kvrt_xfer_peer *peer;
    uint8_t *data;
    size_t len;
};

/* The staging pool: one registered allocation cut into chunk slots, the
 * first half for sending, the second for receiving (so that two agents
 * pushing to each other never hold each other's slots). */
struct xfer_pool {
    kvrt_buffer *buf; /* backend buffer: the slots themselves (host backends) */
    uint8_t *host;    /* the slots' host bytes */
    bool host_is_buf; /* host is buf's memory */
    void *host_alloc; /* host bytes allocated here (other backends) */
    ucp_mem_h memh;
    uint64_t chunk;  /* bytes per slot */
    unsigned nslots; /* 2 * half */
    unsigned half;
    unsigned *free_send, nfree_send;
    unsigned *free_recv, nfree_recv;
    kvrt_buffer *scratch; /* one chunk of whole blocks, on the backend */
};

struct kvrt_xfer_agent {
    pthread_mutex_t lock;
    kvrt_backend *backend;
    kvrt_cache *cache;
    struct xfer_cache_desc local;
    double timeout_s;
    uint64_t id;

    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_listener_h listener;
    ucp_address_t *worker_addr;
    size_t worker_addr_len;
    int efd;

    bool addressable; /* the cache has host memory, registered */
    uint8_t *cache_addr;
    ucp_mem_h cache_memh;
    struct xfer_pool pool;
    double registration_s;
    uint64_t registered_bytes;

    kvrt_xfer_peer *peers;
    uint64_t peer_count; /* names "peer N" */
    ucp_conn_request_h pending_conn[16];
    size_t num_pending_conn;
    struct xfer_out *outs;
    struct xfer_in *ins;
    kvrt_xfer_handle *handles;
    struct xfer_ready *ready, **ready_tail;
    struct xfer_deferred *deferred, **deferred_tail;
    struct xfer_note *notes, **notes_tail;
    uint64_t next_xid;
    struct xfer_req *reqs; /* every request UCX still holds */
    uint64_t ucx_requests;
    double last_progress;
    int served_error; /* first failure of a peer's push, for kvrt_xfer_progress */
    char served_why[640];
    struct kvrt_xfer_stats stats;
};

/* ---- functions --------------------------------------------------------------- */

/* metadata.c (compiled alone into the fuzz replay: no calls out of it) */
int xfer_desc_local(kvrt_cache *c, struct xfer_cache_desc *out);
int xfer_desc_from_placement(struct xfer_cache_desc *d);
void xfer_desc_free(struct xfer_cache_desc *d, bool owns_placement);
int xfer_md_export(const kvrt_xfer_agent *a, uint8_t **blob, size_t *len);
int xfer_md_parse(const uint8_t *blob, size_t len, struct xfer_md *md);
int xfer_md_compatible(const struct xfer_cache_desc *local, const struct xfer_cache_desc *remote);

/* agent.c */
double xfer_now(void);
int xfer_ucx_fail(ucs_status_t st, const char *what);
int xfer_check_reserved(const uint8_t *bytes, size_t n, const char *what);
void xfer_lock(kvrt_xfer_agent *a);
void xfer_unlock(kvrt_xfer_agent *a);

/* pool.c */
int xfer_pool_create(kvrt_xfer_agent *a, uint64_t chunk, uint64_t total);
void xfer_pool_destroy(kvrt_xfer_agent *a);
int xfer_pool_take(kvrt_xfer_agent *a, bool send);
void xfer_pool_give(kvrt_xfer_agent *a, int slot);
uint8_t *xfer_pool_slot(kvrt_xfer_agent *a, int slot);
uint64_t xfer_sel_block_bytes(const struct xfer_cache_desc *d, const struct xfer_sel *s);
/* Gather blocks (the selection, packed) into a slot; scatter them back. */
int xfer_pool_pack(kvrt_xfer_agent *a, int slot, const int64_t *ids, uint64_t n, const struct xfer_sel *s);
int xfer_pool_unpack(kvrt_xfer_agent *a, int slot, const int64_t *ids, uint64_t n, const struct xfer_sel *s);
/* Blocks per chunk that both sides' slots hold. */
uint64_t xfer_chunk_blocks(const kvrt_xfer_agent *a, const kvrt_xfer_peer *p);

/* peer.c */
int xfer_peer_new(kvrt_xfer_agent *a, kvrt_xfer_peer **out);
void xfer_peer_ep_params(ucp_ep_params_t *ep, kvrt_xfer_peer *p);
int xfer_peer_take_blob(kvrt_xfer_agent *a, kvrt_xfer_peer *p);
/* Opens the data endpoint and starts its wire-up (a flush); until that
 * completes, messages wait in the peer's queue and streams do not send. */
int xfer_peer_open_data_ep(kvrt_xfer_agent *a, kvrt_xfer_peer *p);
void xfer_peer_check_wired(kvrt_xfer_peer *p);
kvrt_xfer_peer *xfer_peer_by_id(kvrt_xfer_agent *a, uint64_t id);
void xfer_peer_fail(kvrt_xfer_peer *p, const char *fmt, ...) KVRT_PRINTF(2, 3);
int xfer_peer_ok(const kvrt_xfer_peer *p, const char *what);
void xfer_peer_cleanup(kvrt_xfer_peer *p);
void xfer_peer_destroy(kvrt_xfer_peer *p, bool polite);
void xfer_peer_drop(kvrt_xfer_agent *a, kvrt_xfer_peer *p, bool polite);

/* wire.c */
int xfer_set_am_handlers(kvrt_xfer_agent *a);
struct xfer_req *xfer_req_new(kvrt_xfer_agent *a, size_t payload);
void xfer_req_free(struct xfer_req *r);
/* A request handed to UCX is on the agent's list until its callback. */
void xfer_req_start(struct xfer_req *r);
void xfer_req_done(struct xfer_req *r);
/* Send a control message (eager); the header is r->hdr, the data r->payload. */
int xfer_ctl_send(kvrt_xfer_peer *p, unsigned id, struct xfer_req *r, size_t hlen);
int xfer_ctl_send_copy(kvrt_xfer_peer *p, unsigned id, const void *hdr, size_t hlen, const void *data, size_t dlen);
/* Blocking (handshake and goodbye): send on `ep`, progress until sent. */
int xfer_ctl_send_wait(kvrt_xfer_agent *a, kvrt_xfer_peer *p, ucp_ep_h ep, unsigned id, const void *hdr, size_t hlen,
                       const void *data, size_t dlen, const char *what);
struct xfer_hdr xfer_hdr_for(const kvrt_xfer_peer *p, uint64_t xid);

/* plan.c */
struct plan_in {
    const struct kvrt_xfer_request *req;
    struct xfer_sel lsel, rsel;
    bool full;
};
struct xfer_planned {
    struct plan_in in;
    enum kvrt_xfer_method method;
    struct xfer_op *ops;
    size_t nops;
    uint64_t block_bytes;  /* packed staging bytes per block */
    uint64_t chunk_blocks; /* staged */
};
int xfer_plan_make(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *r, struct xfer_planned *ps,
                   struct kvrt_xfer_plan *out);
int xfer_check_ids(const int64_t *ids, size_t n, uint64_t limit, const char *side, const char *name, bool unique);
/* A selection a peer asks for, inside this cache (KVRT_ERR_INVALID naming it). */
int xfer_check_sel(const struct xfer_cache_desc *d, const struct xfer_sel *s, const char *what);
uint64_t xfer_max_message(void);

/* out.c */
struct xfer_out *xfer_out_new(kvrt_xfer_agent *a, kvrt_xfer_peer *p, uint64_t xid);
void xfer_out_issue(struct xfer_out *o);
void xfer_out_fail(struct xfer_out *o, int status, const char *fmt, ...) KVRT_PRINTF(3, 4);
void xfer_out_on_ack(kvrt_xfer_peer *p, const struct xfer_ack_msg *m, const void *data, size_t len);
void xfer_out_on_begin(kvrt_xfer_peer *p, const struct xfer_begin_msg *m, const void *data, size_t len);
void xfer_out_on_abort(kvrt_xfer_peer *p, uint64_t xid);
void xfer_out_free(struct xfer_out *o);

/* in.c */
struct xfer_in *xfer_in_new(kvrt_xfer_agent *a, kvrt_xfer_peer *p, uint64_t xid, bool pull);
ucs_status_t xfer_in_on_data(kvrt_xfer_peer *p, const struct xfer_data_msg *m, void *data, size_t len, bool rndv);
void xfer_in_on_begin(kvrt_xfer_peer *p, const struct xfer_begin_msg *m, const void *data, size_t len);
void xfer_in_on_done(kvrt_xfer_peer *p, const struct xfer_done_msg *m, const void *data, size_t len);
void xfer_in_on_abort(kvrt_xfer_peer *p, uint64_t xid);
void xfer_in_fail(struct xfer_in *in, int status, const char *fmt, ...) KVRT_PRINTF(3, 4);
void xfer_in_scatter_ready(kvrt_xfer_agent *a);
void xfer_in_start_deferred(kvrt_xfer_agent *a);
void xfer_in_finish(kvrt_xfer_agent *a);
void xfer_in_free(struct xfer_in *in);

/* handle.c */
void xfer_handle_finish(kvrt_xfer_handle *h, int status, const char *why);
/* A stream ended: counted, and its handle (if any) gets the outcome and
 * lets go of it. */
void xfer_stream_ended(kvrt_xfer_agent *a, kvrt_xfer_handle **h, int status, const char *why);

/* progress.c */
/* One round: UCX, then every queue (scatters, deferred receives, sends,
 * completions, failed peers, timeouts).  The lock is held. */
void xfer_progress_round(kvrt_xfer_agent *a);
/* Wait for work without the lock: a short spin, then the event fd, at most
 * until `deadline` (and a few milliseconds, so deadlines are checked). */
void xfer_idle(kvrt_xfer_agent *a, double deadline);
int xfer_note_push(kvrt_xfer_agent *a, kvrt_xfer_peer *p, uint8_t *data, size_t len);
/* Progress (the lock released between rounds) until a UCX request is done,
 * the peer fails or the deadline; the request is freed. */
int xfer_wait_request(kvrt_xfer_agent *a, kvrt_xfer_peer *p, void *req, double deadline, const char *what);

/* "0 (auto), 1 (regions), ...": the valid method values, for messages. */
const char *xfer_method_values(void);

#endif
