#include "xfer_side.h"

#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void side_opts_default(struct side_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->layout = KVRT_LAYOUT_LBHNC;
    o->dtype = KVRT_DTYPE_BF16;
    o->layers = 4;
    o->heads = 4;
    o->head_size = 32;
    o->block_size = 16;
    o->blocks = 128;
    o->seed = 1;
    o->chunk_bytes = 64 << 10;
    o->staging_bytes = 4 * (64 << 10);
    o->timeout_s = 20;
}

static const char *const memory_names[] = {"allocated", "aligned", "mmap", "dlpack"};

const char *side_memory_name(enum side_memory m)
{
    return (unsigned)m < sizeof(memory_names) / sizeof(memory_names[0]) ? memory_names[m] : "?";
}

bool side_memory_parse(const char *name, enum side_memory *m)
{
    for (unsigned i = 0; i < sizeof(memory_names) / sizeof(memory_names[0]); i++)
        if (strcmp(name, memory_names[i]) == 0) {
            *m = (enum side_memory)i;
            return true;
        }
    return false;
}

/* ---- memory the side owns ----------------------------------------------------- */

static void owned_released(struct side_owned *w, void *address)
{
    w->released++;
    w->wrong_address |= address != w->address;
}

static void release_memory(void *user, void *address)
{
    owned_released(user, address);
}

static void dlpack_deleter(DLManagedTensor *t)
{
    owned_released(t->manager_ctx, t->dl_tensor.data);
}

static void owned_free(struct side_owned *w)
{
    if (w->kind == SIDE_MMAP)
        munmap(w->address, w->bytes);
    else
        free(w->address);
    free(w);
}

/* A cache over page-aligned memory of the placement's bytes. */
static int wrap_cache(struct side *s)
{
    uint64_t bytes = (kvrt_placement_size(s->p) + 4095) & ~(uint64_t)4095;
    struct side_owned *w = calloc(1, sizeof(*w));
    if (!w)
        return kvrt_error_report(KVRT_ERR_NOMEM, "side_open: out of memory");
    w->kind = s->o.memory;
    w->bytes = bytes;
    if (w->kind == SIDE_MMAP) {
        w->address = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (w->address == MAP_FAILED)
            w->address = NULL;
    } else {
        w->address = aligned_alloc(4096, bytes);
    }
    if (!w->address) {
        free(w);
        return kvrt_error_report(KVRT_ERR_NOMEM, "side_open: no %llu bytes for the cache", (unsigned long long)bytes);
    }
    /* Not zero unless asked: the cache keeps what its memory holds. */
    memset(w->address, s->o.zero ? 0 : 0xa5, bytes);
    int rc;
    if (w->kind == SIDE_DLPACK) {
        w->shape[0] = (int64_t)bytes;
        w->tensor.dl_tensor = (DLTensor){.data = w->address,
                                         .device = {kDLCPU, 0},
                                         .ndim = 1,
                                         .dtype = {kDLUInt, 8, 1},
                                         .shape = w->shape,
                                         .strides = NULL,
                                         .byte_offset = 0};
        w->tensor.manager_ctx = w;
        w->tensor.deleter = dlpack_deleter;
        rc = kvrt_cache_from_dlpack(s->be, s->p, &w->tensor, &s->c);
    } else {
        struct kvrt_memory m;
        kvrt_memory_default(&m);
        m.address = w->address;
        m.bytes = bytes;
        m.release = release_memory;
        m.release_user = w;
        rc = kvrt_cache_wrap(s->be, s->p, &m, &s->c);
    }
    if (rc != KVRT_OK)
        owned_free(w); /* not adopted: kvrt will never hand it back */
    else
        s->owned = w;
    return rc;
}

/* ---- a side ------------------------------------------------------------------- */

int side_open(struct side *s, const struct side_opts *o)
{
    memset(s, 0, sizeof(*s));
    s->o = *o;
    struct kvrt_spec spec;
    kvrt_spec_default(&spec);
    spec.dtype = o->dtype;
    spec.block_size = o->block_size;
    spec.num_kv_heads = o->heads;
    spec.head_size = o->head_size;
    struct kvrt_layer_entry layers[16];
    char names[16][16];
    if (o->layers > 16)
        return kvrt_error_report(KVRT_ERR_INVALID, "side_open: at most 16 layers");
    for (uint64_t l = 0; l < o->layers; l++) {
        snprintf(names[l], sizeof(names[l]), "layer.%llu", (unsigned long long)l);
        layers[l].name = names[l];
        layers[l].spec = spec;
    }
    struct kvrt_group g = {layers, o->layers};
    int rc = kvrt_runtime_open(NULL, &s->rt);
    if (rc == KVRT_OK)
        rc = kvrt_runtime_bind(s->rt, "cpu", kvrt_layout_name(o->layout), &s->be);
    if (rc == KVRT_OK)
        rc = kvrt_placement_create(o->layout, &g, 1, o->blocks, 0, &s->p);
    if (rc == KVRT_OK)
        rc = o->memory == SIDE_ALLOCATED ? kvrt_cache_create(s->be, s->p, &s->c) : wrap_cache(s);
    if (rc == KVRT_OK)
        rc = o->zero ? xpat_init_zero(&s->x, s->be, s->c) : xpat_init(&s->x, s->be, s->c, o->seed, o->head_offset);
    if (rc == KVRT_OK) {
        struct kvrt_xfer_agent_options ao;
        kvrt_xfer_agent_options_default(&ao);
        ao.chunk_bytes = o->chunk_bytes;
        ao.staging_bytes = o->staging_bytes;
        ao.timeout_s = o->timeout_s;
        ao.key_file = o->key_file;
        ao.allow = o->allow;
        ao.flags = o->flags;
        ao.log = o->log;
        ao.log_user = o->log_user;
        rc = kvrt_xfer_agent_create(s->be, s->c, &ao, &s->a);
    }
    return rc;
}

bool side_close(struct side *s)
{
    kvrt_xfer_agent_destroy(s->a);
    xpat_free(&s->x);
    kvrt_placement_destroy(s->p);
    if (s->rt)
        kvrt_runtime_close(s->rt);
    struct side_owned *w = s->owned;
    bool ok = true;
    if (w) {
        ok = w->released == 1 && !w->wrong_address;
        if (!ok)
            fprintf(stderr, "side_close: the %s memory of the cache was handed back %d times%s\n",
                    side_memory_name(w->kind), w->released, w->wrong_address ? ", once with another address" : "");
        if (w->released == 1)
            owned_free(w);
    }
    memset(s, 0, sizeof(*s));
    return ok;
}

void side_ids(int64_t *v, uint64_t n, uint64_t first, uint64_t stride, uint64_t mod)
{
    for (uint64_t i = 0; i < n; i++)
        v[i] = (int64_t)((first + i * stride) % mod);
}

kvrt_xfer_handle *side_post(struct side *s, kvrt_xfer_peer *p, const struct side_opts *source, const int64_t *mine,
                            const int64_t *theirs, uint64_t n, bool pull, uint64_t index)
{
    char *note =
        pull ? side_record(source, theirs, mine, n, true, index) : side_record(source, mine, theirs, n, false, index);
    struct kvrt_xfer_request r;
    kvrt_xfer_request_default(&r);
    r.direction = pull ? KVRT_XFER_PULL : KVRT_XFER_PUSH;
    r.num_blocks = n;
    r.local_ids = mine;
    r.remote_ids = theirs;
    r.notification = note;
    r.notification_len = strlen(note);
    kvrt_xfer_handle *h = NULL;
    if (kvrt_xfer_post(s->a, p, &r, &h) != KVRT_OK)
        tap_diag("post: %s", kvrt_error_message());
    free(note);
    return h;
}

void side_agent_clean(kvrt_xfer_agent *a, const char *what)
{
    /* Stragglers (acknowledgements' sends) finish within a few rounds. */
    struct kvrt_xfer_stats st = {.size = sizeof(st)};
    double deadline = now() + 5;
    do {
        kvrt_xfer_progress(a);
        kvrt_xfer_agent_stats(a, &st);
    } while ((st.outgoing || st.incoming || st.ucx_requests || st.staging_busy) && now() < deadline);
    tap_ok(st.outgoing == 0 && st.incoming == 0 && st.ucx_requests == 0 && st.staging_busy == 0 && st.handles == 0,
           "%s: nothing left here (streams out %llu, in %llu, UCX requests %llu, busy chunks %llu, handles %llu)", what,
           (unsigned long long)st.outgoing, (unsigned long long)st.incoming, (unsigned long long)st.ucx_requests,
           (unsigned long long)st.staging_busy, (unsigned long long)st.handles);
}

char *side_record(const struct side_opts *source, const int64_t *src, const int64_t *dst, uint64_t n, bool pull,
                  uint64_t index)
{
    struct xpat_record r = {.src_ids = (int64_t *)src,
                            .dst_ids = (int64_t *)dst,
                            .num_blocks = n,
                            .seed = source->seed,
                            .head_offset = source->head_offset,
                            .index = index,
                            .pull = pull};
    return xpat_record_text(&r);
}

/* ---- hex --------------------------------------------------------------------- */

char *to_hex(const void *blob, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    const uint8_t *b = blob;
    char *t = malloc(2 * len + 1);
    if (!t)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        t[2 * i] = digits[b[i] >> 4];
        t[2 * i + 1] = digits[b[i] & 15];
    }
    t[2 * len] = '\0';
    return t;
}

static int nibble(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

void *from_hex(const char *hex, size_t *len)
{
    size_t n = strlen(hex);
    if (n % 2)
        return NULL;
    uint8_t *b = malloc(n / 2 + 1);
    for (size_t i = 0; b && i < n / 2; i++) {
        int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(b);
            return NULL;
        }
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    *len = n / 2;
    return b;
}

/* ---- the parent's end of a child ------------------------------------------- */

/* UCX prints its own log lines ("[time] [host:pid] file:line UCX ERROR
 * ...") on stdout, which is a child's answer channel: they are passed on to
 * stderr, not taken for answers. */
static bool ucx_log_line(const char *line)
{
    return line[0] == '[' && strstr(line, " UCX ") != NULL;
}

static bool read_line(struct child *c, char *buf, size_t size, double timeout_s)
{
    double deadline = now() + timeout_s;
    int fd = fileno(c->from);
    for (;;) {
        size_t n = 0;
        while (n + 1 < size) {
            struct pollfd pfd = {fd, POLLIN, 0};
            int left = (int)((deadline - now()) * 1e3);
            if (left <= 0 || poll(&pfd, 1, left) <= 0)
                return false;
            char ch;
            if (read(fd, &ch, 1) != 1)
                return false;
            if (ch == '\n')
                break;
            buf[n++] = ch;
        }
        buf[n] = '\0';
        if (!ucx_log_line(buf))
            return true;
        fprintf(stderr, "child's UCX: %s\n", buf);
    }
}

bool child_start(struct child *c, const char *self, const char *const *args)
{
    memset(c, 0, sizeof(*c));
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0)
        return false;
    const char *argv[40] = {self, "--child"};
    int n = 2;
    for (int i = 0; args[i] && n < 39; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    c->pid = fork();
    if (c->pid < 0)
        return false;
    if (c->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execv(self, (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c->to = fdopen(in[1], "w");
    c->from = fdopen(out[0], "r");
    char *line = malloc(1 << 20);
    bool ok = line != NULL;
    /* "port N" first when listening, then "md HEX". */
    while (ok && (ok = read_line(c, line, 1 << 20, 30))) {
        if (sscanf(line, "port %u", &c->port) == 1)
            continue;
        if (strncmp(line, "md ", 3) == 0) {
            c->md = from_hex(line + 3, &c->md_len);
            ok = c->md != NULL;
            break;
        }
        fprintf(stderr, "child: %s\n", line);
        ok = false;
    }
    free(line);
    if (!ok)
        child_kill(c);
    return ok;
}

bool child_cmd(struct child *c, const char *cmd, char *reply, size_t size, double timeout_s)
{
    if (!c->to || fprintf(c->to, "%s\n", cmd) < 0 || fflush(c->to) != 0)
        return false;
    return read_line(c, reply, size, timeout_s);
}

static int reap(struct child *c, double timeout_s)
{
    double deadline = now() + timeout_s;
    int status = 0;
    pid_t r;
    while ((r = waitpid(c->pid, &status, WNOHANG)) == 0 && now() < deadline) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (r == 0) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, &status, 0);
    }
    c->pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void close_pipes(struct child *c)
{
    if (c->to)
        fclose(c->to);
    if (c->from)
        fclose(c->from);
    free(c->md);
    c->to = c->from = NULL;
    c->md = NULL;
}

int child_stop(struct child *c)
{
    if (!c->pid)
        return -1;
    if (c->to) {
        fprintf(c->to, "quit\n");
        fflush(c->to);
    }
    int st = reap(c, 15);
    close_pipes(c);
    return st;
}

void child_kill(struct child *c)
{
    if (c->pid) {
        kill(c->pid, SIGKILL);
        reap(c, 5);
    }
    close_pipes(c);
}

bool child_verified_range(struct child *c, uint64_t lo, uint64_t hi, const char *what, uint64_t *got)
{
    char reply[512];
    unsigned long long bad = 1, n = 0;
    /* A pull's notification reaches the pulled peer after the puller's
     * handle completes (the puller sends it then), so the last ones may
     * still be on their way: ask again until they are in, for a while. */
    double deadline = now() + 10;
    bool ok;
    for (;;) {
        ok = child_cmd(c, "verify", reply, sizeof(reply), 30) && sscanf(reply, "verify %llu %llu", &bad, &n) == 2;
        if (!ok || bad != 0 || n >= lo || now() > deadline)
            break;
        usleep(10000);
    }
    ok = ok && bad == 0 && n >= lo && n <= hi;
    if (!tap_ok(ok, "%s: every byte of the peer's cache as its %llu notifications say", what, n))
        tap_diag("child said: %s (expected %llu to %llu notifications)", reply, (unsigned long long)lo,
                 (unsigned long long)hi);
    if (got)
        *got = n;
    return ok;
}

bool child_verified(struct child *c, uint64_t notes, const char *what)
{
    return child_verified_range(c, notes, notes, what, NULL);
}

void child_clean(struct child *c, const char *what)
{
    char reply[256];
    unsigned long long out = 9, in = 9, ucx = 9, busy = 9, peers = 0;
    bool ok = child_cmd(c, "stats", reply, sizeof(reply), 30) &&
              sscanf(reply, "stats %llu %llu %llu %llu %llu", &out, &in, &ucx, &busy, &peers) == 5;
    tap_ok(ok && out == 0 && in == 0 && ucx == 0 && busy == 0,
           "%s: nothing left in the peer's agent (streams out %llu, in %llu, UCX requests %llu, busy chunks %llu)",
           what, out, in, ucx, busy);
}

/* ---- the child --------------------------------------------------------------- */

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (errno || *end || end == s)
        return false;
    *v = x;
    return true;
}

/* Pushes, one at a time, to one peer: `per` of this side's first blocks
 * into the peer's blocks [base, base + count), in turns of `per` blocks, so
 * that a transfer never writes blocks the one before it wrote. */
struct pusher {
    kvrt_xfer_peer *peer;
    uint64_t base, count, per, index;
    kvrt_xfer_handle *h;
    uint64_t ok, failed;
    char why[512];
    bool active;
};

enum { MAX_PEERS = 256 };

enum { MAX_POSTS = 64 };

struct child_state {
    struct side s;
    kvrt_xfer_peer *peers[MAX_PEERS]; /* NULL once closed */
    int npeers;
    struct pusher push[MAX_PEERS];
    uint64_t notes, refused, bad_notes;
    bool check_notes, report_notes;
    kvrt_xfer_handle *posts[MAX_POSTS]; /* "post" */
    char last_refusal[700];             /* accept's last refusal */
    char last_failed[700];              /* the last failed peer closed here, and why */
    char last_log[1024];                /* the agent's last log line (--log) */
    uint64_t log_lines;
};

static void child_log(void *user, enum kvrt_log_level level, const char *message)
{
    struct child_state *cs = user;
    (void)level;
    snprintf(cs->last_log, sizeof(cs->last_log), "%s", message);
    cs->log_lines++;
}

/* "3,5,9" -> ids (malloc'd), *n */
static int64_t *id_list(const char *text, uint64_t *n)
{
    uint64_t cap = 1;
    for (const char *c = text; *c; c++)
        cap += *c == ',';
    int64_t *v = malloc(cap * sizeof(*v));
    *n = 0;
    for (const char *c = text; v && *c;) {
        char *end;
        v[(*n)++] = strtoll(c, &end, 10);
        if (end == c)
            break;
        c = *end == ',' ? end + 1 : end;
    }
    return v;
}

static int64_t *iota(uint64_t first, uint64_t n)
{
    int64_t *v = malloc((n ? n : 1) * sizeof(*v));
    for (uint64_t i = 0; v && i < n; i++)
        v[i] = (int64_t)(first + i);
    return v;
}

static void push_step(struct child_state *cs, struct pusher *pu)
{
    if (pu->h) {
        int rc = kvrt_xfer_test(pu->h);
        if (rc == KVRT_XFER_PENDING)
            return;
        if (rc == KVRT_OK) {
            pu->ok++;
        } else {
            pu->failed++;
            snprintf(pu->why, sizeof(pu->why), "%s", kvrt_error_message());
            pu->active = false; /* a failed peer takes no more */
        }
        kvrt_xfer_release(pu->h);
        pu->h = NULL;
    }
    if (!pu->active)
        return;
    uint64_t turns = pu->count / pu->per;
    int64_t *src = iota(0, pu->per), *dst = iota(pu->base + (pu->index % turns) * pu->per, pu->per);
    char *note = side_record(&cs->s.o, src, dst, pu->per, false, pu->index);
    struct kvrt_xfer_request r;
    kvrt_xfer_request_default(&r);
    r.num_blocks = pu->per;
    r.local_ids = src;
    r.remote_ids = dst;
    r.notification = note;
    r.notification_len = note ? strlen(note) : 0;
    if (kvrt_xfer_post(cs->s.a, pu->peer, &r, &pu->h) != KVRT_OK) {
        pu->failed++;
        snprintf(pu->why, sizeof(pu->why), "%s", kvrt_error_message());
        pu->active = false;
        pu->h = NULL;
    }
    pu->index++;
    free(src);
    free(dst);
    free(note);
}

static int add_peer(struct child_state *cs, kvrt_xfer_peer *p)
{
    if (cs->npeers == MAX_PEERS) {
        kvrt_xfer_peer_close(p);
        return -1;
    }
    cs->peers[cs->npeers] = p;
    return cs->npeers++;
}

static void answer(struct child_state *cs, char *line)
{
    unsigned port;
    int i;
    unsigned long long base, count, per;
    if (strncmp(line, "load ", 5) == 0) {
        size_t len;
        void *blob = from_hex(line + 5, &len);
        kvrt_xfer_peer *p = NULL;
        int rc = blob ? kvrt_xfer_peer_load(cs->s.a, blob, len, &p) : KVRT_ERR_INVALID;
        free(blob);
        if (rc == KVRT_OK)
            add_peer(cs, p);
        printf(rc == KVRT_OK ? "loaded\n" : "error %s\n", kvrt_error_message());
    } else if (sscanf(line, "connect %u", &port) == 1) {
        kvrt_xfer_peer *p = NULL;
        if (kvrt_xfer_connect(cs->s.a, "127.0.0.1", (uint16_t)port, &p) == KVRT_OK)
            printf("peer %d\n", add_peer(cs, p));
        else
            printf("error %s\n", kvrt_error_message());
    } else if (sscanf(line, "push %d %llu %llu %llu", &i, &base, &count, &per) == 4 && i >= 0 && i < cs->npeers &&
               cs->peers[i] && per > 0 && count >= per) {
        cs->push[i] = (struct pusher){cs->peers[i], base, count, per, 0, NULL, 0, 0, "", true};
        printf("pushing\n");
    } else if (sscanf(line, "stop %d", &i) == 1 && i >= 0 && i < cs->npeers) {
        /* No new transfer; the one in flight ends (the agent's timeout
         * bounds it). */
        struct pusher *pu = &cs->push[i];
        pu->active = false;
        while (pu->h)
            push_step(cs, pu);
        printf("stopped %llu %llu %s\n", (unsigned long long)pu->ok, (unsigned long long)pu->failed,
               pu->why[0] ? pu->why : "-");
    } else if (strncmp(line, "post ", 5) == 0) {
        /* post I push|pull MINE THEIRS: one transfer, its record as the
         * notification -> "posted H" */
        char dir[8], mine[4096], theirs[4096];
        int h = -1;
        for (int k = 0; k < MAX_POSTS && h < 0; k++)
            if (!cs->posts[k])
                h = k;
        if (sscanf(line, "post %d %7s %4095s %4095s", &i, dir, mine, theirs) == 4 && i >= 0 && i < cs->npeers &&
            cs->peers[i] && h >= 0) {
            uint64_t n, m;
            int64_t *a = id_list(mine, &n), *b = id_list(theirs, &m);
            bool pull = strcmp(dir, "pull") == 0;
            cs->posts[h] = n == m ? side_post(&cs->s, cs->peers[i], &cs->s.o, a, b, n, pull, 0) : NULL;
            if (cs->posts[h])
                printf("posted %d\n", h);
            else
                printf("error %s\n", kvrt_error_message());
            free(a);
            free(b);
        } else {
            printf("error bad post \"%s\"\n", line);
        }
    } else if (sscanf(line, "wait %d", &i) == 1 && i >= 0 && i < MAX_POSTS && cs->posts[i]) {
        /* wait H SECONDS -> "done STATUS MESSAGE" (released) */
        double t = 10;
        sscanf(line, "wait %d %lf", &i, &t);
        int rc = kvrt_xfer_wait(cs->posts[i], t);
        printf("done %d %s\n", rc, rc == KVRT_OK || rc == KVRT_XFER_PENDING ? "-" : kvrt_error_message());
        if (rc != KVRT_XFER_PENDING) {
            kvrt_xfer_release(cs->posts[i]);
            cs->posts[i] = NULL;
        }
    } else if (strncmp(line, "grant ", 6) == 0 || strncmp(line, "revoke ", 7) == 0) {
        /* grant|revoke I r|w|rw IDS|all */
        char what[4], ids[4096];
        bool grant = line[0] == 'g';
        if (sscanf(line + (grant ? 6 : 7), "%d %3s %4095s", &i, what, ids) == 3 && i >= 0 && i < cs->npeers &&
            cs->peers[i]) {
            unsigned access =
                (strchr(what, 'r') ? KVRT_XFER_GRANT_READ : 0) | (strchr(what, 'w') ? KVRT_XFER_GRANT_WRITE : 0);
            uint64_t n = 0;
            int64_t *v = strcmp(ids, "all") == 0 ? NULL : id_list(ids, &n);
            int rc = grant ? kvrt_xfer_grant(cs->peers[i], access, v, n) : kvrt_xfer_revoke(cs->peers[i], access, v, n);
            printf(rc == KVRT_OK ? "granted\n" : "error %s\n", kvrt_error_message());
            free(v);
        } else {
            printf("error bad grant \"%s\"\n", line);
        }
    } else if (strncmp(line, "agent-grant ", 12) == 0 || strncmp(line, "agent-revoke ", 13) == 0) {
        /* agent-grant|agent-revoke r|w|rw IDS|all: every peer's */
        char what[4], ids[4096];
        bool grant = line[6] == 'g';
        if (sscanf(line + (grant ? 12 : 13), "%3s %4095s", what, ids) == 2) {
            unsigned access =
                (strchr(what, 'r') ? KVRT_XFER_GRANT_READ : 0) | (strchr(what, 'w') ? KVRT_XFER_GRANT_WRITE : 0);
            uint64_t n = 0;
            int64_t *v = strcmp(ids, "all") == 0 ? NULL : id_list(ids, &n);
            int rc =
                grant ? kvrt_xfer_agent_grant(cs->s.a, access, v, n) : kvrt_xfer_agent_revoke(cs->s.a, access, v, n);
            printf(rc == KVRT_OK ? "granted\n" : "error %s\n", kvrt_error_message());
            free(v);
        } else {
            printf("error bad grant \"%s\"\n", line);
        }
    } else if (sscanf(line, "peerstate %d", &i) == 1 && i >= 0 && i < cs->npeers) {
        const char *why = "";
        int st = cs->peers[i] ? (int)kvrt_xfer_peer_state(cs->peers[i], &why) : -1;
        printf("peerstate %d %s\n", st, why[0] ? why : "-");
    } else if (sscanf(line, "close %d", &i) == 1 && i >= 0 && i < cs->npeers) {
        kvrt_xfer_peer_close(cs->peers[i]);
        cs->peers[i] = NULL;
        printf("closed\n");
    } else if (strcmp(line, "newest") == 0) {
        printf("newest %d %s\n", cs->npeers,
               cs->npeers && cs->peers[cs->npeers - 1] ? kvrt_xfer_peer_name(cs->peers[cs->npeers - 1]) : "-");
    } else if (strcmp(line, "events") == 0) {
        /* What the agent refused, failed and said. */
        struct kvrt_xfer_stats st = {.size = sizeof(st)};
        kvrt_xfer_agent_stats(cs->s.a, &st);
        printf("events refused=%llu violations=%llu strangers=%llu denied=%llu notes=%llu accept_errors=%llu "
               "log_lines=%llu\n",
               (unsigned long long)st.refused, (unsigned long long)st.violations, (unsigned long long)st.strangers,
               (unsigned long long)st.denied, (unsigned long long)cs->notes, (unsigned long long)cs->refused,
               (unsigned long long)cs->log_lines);
    } else if (strncmp(line, "metric ", 7) == 0) {
        /* metric SAMPLE: the value the agent's Prometheus text gives the
         * sample (its name and labels as written), or "metric none". */
        size_t need = 0;
        kvrt_xfer_agent_metrics(cs->s.a, NULL, 0, &need);
        char *text = need ? malloc(need) : NULL;
        const char *want = line + 7, *at = NULL;
        size_t wl = strlen(want);
        if (text && kvrt_xfer_agent_metrics(cs->s.a, text, need, NULL) == KVRT_OK)
            for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, want, wl) == 0 && l[wl] == ' ') {
                    at = l + wl + 1;
                    break;
                }
        if (at)
            printf("metric %.*s\n", (int)strcspn(at, "\n"), at);
        else
            printf("metric none\n");
        free(text);
    } else if (strcmp(line, "lastlog") == 0) {
        printf("lastlog %s\n", cs->last_log[0] ? cs->last_log : "-");
    } else if (strcmp(line, "lastrefusal") == 0) {
        printf("lastrefusal %s\n", cs->last_refusal[0] ? cs->last_refusal : "-");
    } else if (strcmp(line, "lastfailed") == 0) {
        printf("lastfailed %s\n", cs->last_failed[0] ? cs->last_failed : "-");
    } else if (sscanf(line, "verify-below %d", &i) == 1) {
        /* Blocks below i that do not hold what they should. */
        uint64_t bad = 0;
        for (int64_t b = 0; b < i; b++)
            bad += !xpat_block_ok(&cs->s.x, b);
        printf("verify-below %llu %llu\n", (unsigned long long)bad, (unsigned long long)cs->notes);
    } else if (strcmp(line, "verify") == 0) {
        char where[256];
        uint64_t bad = xpat_verify(&cs->s.x, where, sizeof(where));
        printf("verify %llu %llu %s\n", (unsigned long long)bad, (unsigned long long)cs->notes, where[0] ? where : "-");
    } else if (strcmp(line, "stats") == 0 || strcmp(line, "status") == 0) {
        struct kvrt_xfer_stats st = {.size = sizeof(st)};
        kvrt_xfer_agent_stats(cs->s.a, &st);
        int connected = 0;
        for (int k = 0; k < cs->npeers; k++)
            connected += cs->peers[k] && kvrt_xfer_peer_state(cs->peers[k], NULL) == KVRT_XFER_PEER_CONNECTED;
        if (line[4] == 's')
            printf("stats %llu %llu %llu %llu %llu\n", (unsigned long long)st.outgoing, (unsigned long long)st.incoming,
                   (unsigned long long)st.ucx_requests, (unsigned long long)st.staging_busy,
                   (unsigned long long)st.peers);
        else
            printf("status connected=%d peers=%d notes=%llu bad=%llu out=%llu in=%llu ucx=%llu busy=%llu\n", connected,
                   cs->npeers, (unsigned long long)cs->notes, (unsigned long long)cs->bad_notes,
                   (unsigned long long)st.outgoing, (unsigned long long)st.incoming,
                   (unsigned long long)st.ucx_requests, (unsigned long long)st.staging_busy);
    } else {
        printf("error unknown command \"%s\"\n", line);
    }
    fflush(stdout);
}

static void take_notes(struct child_state *cs)
{
    char *msg;
    size_t len;
    kvrt_xfer_peer *from;
    while (kvrt_xfer_notification(cs->s.a, &from, &msg, &len) == KVRT_OK && msg) {
        struct xpat_record r;
        if (xpat_record_parse(msg, &r)) {
            if (!r.pull)
                xpat_apply(&cs->s.x, &r);
            cs->notes++;
            /* A notified transfer's blocks must hold what it moved, now. */
            bool ok = true;
            for (uint64_t b = 0; cs->check_notes && !r.pull && b < r.num_blocks; b++)
                ok = ok && xpat_block_ok(&cs->s.x, r.dst_ids[b]);
            cs->bad_notes += !ok;
            if (cs->report_notes) {
                printf("note %llu %s\n", (unsigned long long)r.index, ok ? "ok" : "bad");
                fflush(stdout);
            }
            xpat_record_free(&r);
        } else {
            fprintf(stderr, "child: a notification that is not a record: %s\n", msg);
        }
        kvrt_free(msg);
    }
}

int child_main(int argc, char **argv)
{
    struct side_opts o;
    side_opts_default(&o);
    bool listen = false;
    uint64_t push_port = 0, base = 0, count = 0, per = 0;
    static struct child_state cs;
    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        bool ok = true;
        if (strcmp(argv[i], "--listen") == 0) {
            listen = true;
            continue;
        }
        if (strcmp(argv[i], "--check-notes") == 0) {
            cs.check_notes = true;
            continue;
        }
        if (strcmp(argv[i], "--report-notes") == 0) {
            cs.check_notes = cs.report_notes = true;
            continue;
        }
        if (strcmp(argv[i], "--zero") == 0) {
            o.zero = true;
            continue;
        }
        if (strcmp(argv[i], "--log") == 0) {
            o.log = child_log;
            o.log_user = &cs;
            continue;
        }
        if (strcmp(argv[i], "--memory") == 0)
            ok = side_memory_parse(v, &o.memory);
        else if (strcmp(argv[i], "--layout") == 0)
            ok = kvrt_layout_parse(v, &o.layout) == KVRT_OK;
        else if (strcmp(argv[i], "--dtype") == 0)
            ok = kvrt_dtype_parse(v, &o.dtype) == KVRT_OK;
        else if (strcmp(argv[i], "--seed") == 0)
            ok = parse_u64(v, &o.seed);
        else if (strcmp(argv[i], "--blocks") == 0)
            ok = parse_u64(v, &o.blocks);
        else if (strcmp(argv[i], "--layers") == 0)
            ok = parse_u64(v, &o.layers);
        else if (strcmp(argv[i], "--heads") == 0)
            ok = parse_u64(v, &o.heads);
        else if (strcmp(argv[i], "--head-size") == 0)
            ok = parse_u64(v, &o.head_size);
        else if (strcmp(argv[i], "--chunk") == 0)
            ok = parse_u64(v, &o.chunk_bytes);
        else if (strcmp(argv[i], "--staging") == 0)
            ok = parse_u64(v, &o.staging_bytes);
        else if (strcmp(argv[i], "--timeout") == 0)
            ok = (o.timeout_s = strtod(v, NULL)) > 0;
        else if (strcmp(argv[i], "--key-file") == 0)
            o.key_file = v;
        else if (strcmp(argv[i], "--allow") == 0)
            o.allow = v;
        else if (strcmp(argv[i], "--flags") == 0) {
            uint64_t f = 0;
            ok = parse_u64(v, &f);
            o.flags = (uint32_t)f;
        } else if (strcmp(argv[i], "--push-to") == 0)
            ok = parse_u64(v, &push_port);
        else if (strcmp(argv[i], "--push") == 0)
            ok = sscanf(v, "%llu:%llu:%llu", (unsigned long long *)&base, (unsigned long long *)&count,
                        (unsigned long long *)&per) == 3 &&
                 per > 0 && count >= per;
        else
            ok = false;
        if (!ok) {
            printf("error bad child option %s %s\n", argv[i], v);
            return 2;
        }
        i++;
    }
    if (side_open(&cs.s, &o) != KVRT_OK) {
        printf("error %s\n", kvrt_error_message());
        return 1;
    }
    uint16_t port = 0;
    if (listen && kvrt_xfer_listen(cs.s.a, NULL, 0, &port) != KVRT_OK) {
        printf("error %s\n", kvrt_error_message());
        return 1;
    }
    if (listen)
        printf("port %u\n", port);
    void *blob;
    size_t len;
    if (kvrt_xfer_metadata_export(cs.s.a, &blob, &len) != KVRT_OK) {
        printf("error %s\n", kvrt_error_message());
        return 1;
    }
    char *hex = to_hex(blob, len);
    printf("md %s\n", hex);
    fflush(stdout);
    free(hex);
    kvrt_free(blob);
    if (push_port) {
        /* A pushing peer from the start (--push BASE:COUNT:PER). */
        kvrt_xfer_peer *p = NULL;
        if (kvrt_xfer_connect(cs.s.a, "127.0.0.1", (uint16_t)push_port, &p) != KVRT_OK) {
            fprintf(stderr, "child: %s\n", kvrt_error_message());
            return 1;
        }
        int k = add_peer(&cs, p);
        cs.push[k] = (struct pusher){p, base, count ? count : per, per ? per : 1, 0, NULL, 0, 0, "", true};
    }
    int efd;
    kvrt_xfer_event_fd(cs.s.a, &efd);
    char line[1 << 16];
    size_t have = 0;
    bool quit = false;
    while (!quit) {
        if (listen) {
            kvrt_xfer_peer *p = NULL;
            int rc = kvrt_xfer_accept(cs.s.a, 1e-3, &p);
            if (rc == KVRT_OK)
                add_peer(&cs, p);
            else if (rc != KVRT_XFER_PENDING) {
                cs.refused++;
                snprintf(cs.last_refusal, sizeof(cs.last_refusal), "%s", kvrt_error_message());
            }
        }
        bool pushing = false;
        for (int k = 0; k < cs.npeers; k++) {
            if (cs.push[k].active || cs.push[k].h)
                push_step(&cs, &cs.push[k]);
            pushing |= cs.push[k].active;
            /* A peer that failed or left, with nothing of ours in flight,
             * is closed here (kvrt_xfer_peer_close of a failed peer). */
            const char *why = "";
            if (cs.peers[k] && !cs.push[k].active && !cs.push[k].h &&
                kvrt_xfer_peer_state(cs.peers[k], &why) != KVRT_XFER_PEER_CONNECTED) {
                snprintf(cs.last_failed, sizeof(cs.last_failed), "%s %s", kvrt_xfer_peer_name(cs.peers[k]),
                         why[0] ? why : "closed");
                kvrt_xfer_peer_close(cs.peers[k]);
                cs.peers[k] = NULL;
            }
        }
        if (kvrt_xfer_progress(cs.s.a) != KVRT_OK)
            fprintf(stderr, "child: %s\n", kvrt_error_message());
        take_notes(&cs);
        /* Sleep on the agent's event fd and the command pipe together. */
        struct pollfd pfd[2] = {{0, POLLIN, 0}, {efd, POLLIN, 0}};
        bool armed = !listen && !pushing && kvrt_xfer_arm(cs.s.a) == KVRT_OK;
        if (poll(pfd, armed ? 2 : 1, armed ? 5 : 0) > 0 && (pfd[0].revents & (POLLIN | POLLHUP))) {
            ssize_t k = read(0, line + have, sizeof(line) - 1 - have);
            if (k <= 0)
                break; /* the parent is gone */
            have += (size_t)k;
            line[have] = '\0';
            char *nl;
            while ((nl = strchr(line, '\n'))) {
                *nl = '\0';
                take_notes(&cs);
                if (strcmp(line, "quit") == 0)
                    quit = true;
                else
                    answer(&cs, line);
                size_t used = (size_t)(nl + 1 - line);
                memmove(line, nl + 1, have - used + 1);
                have -= used;
            }
        }
    }
    for (int i = 0; i < MAX_POSTS; i++)
        kvrt_xfer_release(cs.posts[i]);
    for (int i = 0; i < cs.npeers; i++) {
        if (cs.push[i].h)
            kvrt_xfer_release(cs.push[i].h);
        kvrt_xfer_peer_close(cs.peers[i]);
    }
    return side_close(&cs.s) ? 0 : 3;
}

int side_main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    tap_plan_dynamic();
    return -1;
}
