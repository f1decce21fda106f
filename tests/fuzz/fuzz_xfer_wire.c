/*
 * fuzz-xfer-wire: libkvrt-xfer's check of every message a peer sends
 * (xfer/wire.c).  The first bytes choose the message id, whether it came as
 * a rendezvous, the header's length and whether the header names the one
 * session there is; the rest is the header and the data.  Every input is
 * either accepted with fields inside the protocol's rules, or dropped as a
 * stranger, or a violation with one line saying why -- never a read outside
 * the input, never a crash.
 */
#include "fuzz.h"
#include "wire.h"

static const struct wire_ident peer = {
    0x1111222233334444ull,
    {0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab}};

static void check_ok(const struct wire_msg *m)
{
    if (m->owner != &peer)
        fuzz_fail(__FILE__, __LINE__, "owner", "accepted a message for another owner");
    switch (m->id) {
    case WIRE_BEGIN:
        if (m->u.begin.count == 0 || m->len != m->u.begin.count * 8 + m->u.begin.note_len ||
            m->u.begin.order > WIRE_ORDER_STAGING || m->u.begin.chunk_bytes == 0 || m->rndv)
            fuzz_fail(__FILE__, __LINE__, "begin", "accepted a BEGIN outside the rules");
        break;
    case WIRE_DATA:
        if (m->len == 0 || m->xid == 0)
            fuzz_fail(__FILE__, __LINE__, "data", "accepted DATA of %zu bytes for stream %llu", m->len,
                      (unsigned long long)m->xid);
        break;
    case WIRE_ACK:
    case WIRE_END:
        if (!wire_status_valid(m->u.status.status) || m->len > XFER_MAX_REASON)
            fuzz_fail(__FILE__, __LINE__, "status", "accepted status %d", (int)m->u.status.status);
        break;
    default:
        if (m->rndv)
            fuzz_fail(__FILE__, __LINE__, "eager", "accepted %s as a rendezvous message", wire_name(m->id));
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    unsigned id = data[0] % 16;
    bool rndv = data[1] & 1, named = data[1] & 2, ready = data[1] & 4;
    size_t hlen = data[2] % 160, dlen;
    if (hlen > size - 4)
        hlen = size - 4;
    dlen = size - 4 - hlen;
    /* Exact-size heap copies, so a read past either end is an ASan error. */
    uint8_t *hdr = malloc(hlen ? hlen : 1), *body = malloc(dlen ? dlen : 1);
    if (!hdr || !body) {
        free(hdr);
        free(body);
        return 0;
    }
    memcpy(hdr, data + 4, hlen);
    memcpy(body, data + 4 + hlen, dlen);
    if (named && hlen >= sizeof(struct wire_hdr)) {
        memcpy(hdr, &peer.from, sizeof(peer.from));
        memcpy(hdr + 16, peer.token, sizeof(peer.token));
    }
    struct wire_sessions s = {0};
    if (wire_session_add(&s, &peer, (void *)&peer, !ready) != KVRT_OK)
        fuzz_fail(__FILE__, __LINE__, "session", "cannot add a session");
    struct wire_msg m;
    char why[600];
    enum wire_result r = wire_decode(&s, id, hdr, hlen, body, dlen, rndv, &m, why, sizeof(why));
    if (r == WIRE_OK)
        check_ok(&m);
    else if (r == WIRE_VIOLATION && (why[0] == '\0' || strchr(why, '\n')))
        fuzz_fail(__FILE__, __LINE__, "why", "a violation without a one-line reason: \"%s\"", why);
    union {
        struct wire_hello h;
        struct wire_reply r;
        struct wire_proof p;
        struct wire_accept a;
    } hs;
    why[0] = '\0';
    bool ok = id == WIRE_HELLO   ? wire_decode_hello(hdr, hlen, dlen, rndv, &hs.h, why, sizeof(why))
              : id == WIRE_REPLY ? wire_decode_reply(hdr, hlen, dlen, rndv, &hs.r, why, sizeof(why))
              : id == WIRE_PROOF ? wire_decode_proof(hdr, hlen, dlen, rndv, &hs.p, why, sizeof(why))
                                 : wire_decode_accept(hdr, hlen, dlen, rndv, &hs.a, why, sizeof(why));
    if (!ok && (why[0] == '\0' || strchr(why, '\n')))
        fuzz_fail(__FILE__, __LINE__, "why", "a refused handshake message without a one-line reason");
    wire_sessions_free(&s);
    free(hdr);
    free(body);
    return 0;
}
