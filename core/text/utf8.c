/* kvrt_utf8_repair: text from paths, names and plugins made well-formed
 * UTF-8, as JSON requires.
 *
 * Layer 1 of libkvrt (core/text/; CONTRIBUTING.md, "Where things live").
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <kvrt/common.h>

/* Length of the well-formed UTF-8 sequence at p (at most `left` bytes),
 * or 0 when it is not one (overlong forms, surrogates and values past
 * U+10FFFF included, as jansson checks). */
static size_t utf8_sequence(const unsigned char *p, size_t left)
{
    if (p[0] < 0x80)
        return 1;
    size_t n;
    uint32_t cp;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        n = 2;
        cp = p[0] & 0x1fu;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        n = 3;
        cp = p[0] & 0x0fu;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        n = 4;
        cp = p[0] & 0x07u;
    } else {
        return 0;
    }
    if (left < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

size_t kvrt_utf8_repair(char *dst, size_t size, const char *src, size_t len)
{
    static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
    const unsigned char *in = (const unsigned char *)src;
    size_t total = 0, written = 0;
    bool room = dst && size > 0;
    for (size_t i = 0; src && i < len;) {
        size_t n = utf8_sequence(in + i, len - i);
        const char *piece = n ? (const char *)in + i : replacement;
        size_t plen = n ? n : 3;
        i += n ? n : 1;
        total += plen;
        /* Each piece goes in whole or not at all, and nothing after a piece
         * that did not fit: the text is cut, never holed. */
        if (room && written + plen < size) {
            memcpy(dst + written, piece, plen);
            written += plen;
        } else {
            room = false;
        }
    }
    if (dst && size > 0)
        dst[written] = '\0';
    return total;
}
