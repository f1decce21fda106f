/*
 * The shared tier's client, in parts that need no server: CRC16 (XMODEM)
 * against the cluster specification's check value, key -> slot against
 * pairs `redis-cli CLUSTER KEYSLOT` gave (Redis 7.0, hash tags included),
 * and the URL parser on good and bad addresses.  Compiles store/redis_*.c
 * alone: they depend on nothing else of the store.
 */
#include <stdio.h>
#include <string.h>

#include "redis_slot.h"
#include "redis_url.h"
#include "tap.h"

static void crc(void)
{
    /* the specification: CRC16 of "123456789" is 0x31C3 */
    tap_ok(redis_crc16("123456789", 9) == 0x31C3, "CRC16 of \"123456789\" is 0x31C3 (got 0x%04X)",
           redis_crc16("123456789", 9));
    tap_ok(redis_crc16("", 0) == 0, "CRC16 of nothing is 0");
    static const struct {
        const char *key;
        unsigned slot;
    } pairs[] = {
        {"foo", 12182},
        {"bar", 5061},
        {"123456789", 12739},
        {"{user1000}.following", 3443},
        {"{user1000}.followers", 3443},
        {"foo{}{bar}", 8363},
        {"foo{{bar}}zap", 4015},
        {"foo{bar}{zap}", 5061},
        {"{}", 15257},
        {"a{b", 13340},
        {"kvrt:abc", 15771},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        unsigned s = redis_key_slot(pairs[i].key, strlen(pairs[i].key));
        tap_ok(s == pairs[i].slot, "slot of \"%s\" is %u as CLUSTER KEYSLOT says (got %u)", pairs[i].key, pairs[i].slot,
               s);
    }
    /* binary keys: NUL and high bytes count like any other */
    unsigned char bin[] = {'k', 0, 0xff, '{', 0x80, '}', 1};
    tap_ok(redis_key_slot(bin, sizeof(bin)) == (redis_crc16(bin + 4, 1) & 16383u),
           "a binary key's tag {\\x80} is what is hashed");
}

static void good(const char *url, bool tls, const char *user, int n, const char *host0, int port0, const char *last,
                 int port_last)
{
    struct redis_url u;
    char why[256] = "";
    bool ok = redis_url_parse(url, &u, why, sizeof(why));
    tap_ok(ok && u.tls == tls && strcmp(u.user, user) == 0 && u.num_seeds == n && strcmp(u.seeds[0].host, host0) == 0 &&
               u.seeds[0].port == port0 && strcmp(u.seeds[n - 1].host, last) == 0 && u.seeds[n - 1].port == port_last,
           "%s: tls %d, user \"%s\", %d address(es), first %s port %d%s", url, tls, user, n, host0, port0,
           ok ? "" : why);
}

static void bad(const char *url, const char *says)
{
    struct redis_url u;
    char why[256] = "";
    bool ok = redis_url_parse(url, &u, why, sizeof(why));
    tap_ok(!ok && strstr(why, says), "refused: \"%s\" (%s)", url ? url : "(null)", why);
}

static void urls(void)
{
    good("redis://127.0.0.1:6379", false, "", 1, "127.0.0.1", 6379, "127.0.0.1", 6379);
    good("redis://cache.local", false, "", 1, "cache.local", 6379, "cache.local", 6379);
    good("redis://h1:7000,h2:7001,10.0.0.3:7002", false, "", 3, "h1", 7000, "10.0.0.3", 7002);
    good("rediss://kvrt@h1:6380", true, "kvrt", 1, "h1", 6380, "h1", 6380);
    good("redis://[::1]:7000,[fe80::1%eth0]:7001", false, "", 2, "::1", 7000, "fe80::1%eth0", 7001);
    good("redis://[::1]", false, "", 1, "::1", 6379, "::1", 6379);
    good("redis://user_1@h:1/", false, "user_1", 1, "h", 1, "h", 1);
    bad(NULL, "no URL");
    bad("http://h:1", "scheme");
    bad("redis://", "names no host");
    bad("redis://h:0", "port \"0\"");
    bad("redis://h:65536", "port \"65536\"");
    bad("redis://h:-1", "port \"-1\"");
    bad("redis://h:12x", "port \"12x\"");
    bad("redis://h:", "port \"\"");
    bad("redis://::1:7000", "more than one ':'");
    bad("redis://[::1:7000", "does not close");
    bad("redis://[::1]7000", "after ']'");
    bad("redis://user:pass@h:1", "the character ':'");
    bad("redis://@h:1", "user before '@'");
    bad("redis://a@b@h:1", "more than one '@'");
    bad("redis://h1:1,,h2:2", "names no host");
    bad("redis://h1:1,", "names no host");
    bad("redis://h o:1", "the character ' '");
    bad("redis://a:1,a:2,a:3,a:4,a:5,a:6,a:7,a:8,a:9,a:10,a:11,a:12,a:13,a:14,a:15,a:16,a:17", "more than 16");
    char longhost[400];
    memset(longhost, 'h', sizeof(longhost));
    memcpy(longhost, "redis://", 8);
    longhost[sizeof(longhost) - 1] = '\0';
    bad(longhost, "longer than");
    struct redis_addr a = {.host = "::1", .port = 7};
    char out[64];
    redis_addr_format(&a, out, sizeof(out));
    tap_ok(strcmp(out, "[::1]:7") == 0, "an IPv6 address is written in brackets: %s", out);
}

int main(void)
{
    tap_plan_dynamic();
    crc();
    urls();
    return tap_done();
}
