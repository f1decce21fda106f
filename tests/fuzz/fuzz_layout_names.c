/*
 * fuzz-layout-names: layout and dtype names, and VLLM_KV_CACHE_LAYOUT.
 *
 * The input (up to its first NUL) is the name.  A name that parses must
 * round-trip through its canonical name; one that does not must be refused
 * with KVRT_ERR_INVALID and a one-line message that quotes it, with control
 * bytes, quotes and backslashes escaped.  The oracle for both is written
 * here from the documentation, not taken from the core.
 */
#include <stdbool.h>

#include <kvrt/dtype.h>
#include <kvrt/layout.h>

#include "fuzz.h"

/* Longest input prefix whose quoted form the checks look for: the core may
 * truncate long values to keep its message readable. */
#define QUOTE_CHECK_LEN 24

static const struct {
    const char *name;
    enum kvrt_layout layout;
} layout_names[] = {
    {"LBHNC", KVRT_LAYOUT_LBHNC}, {"LBNHC", KVRT_LAYOUT_LBNHC}, {"LHBNC", KVRT_LAYOUT_LHBNC},
    {"BLHNC", KVRT_LAYOUT_BLHNC}, {"BLNHC", KVRT_LAYOUT_BLNHC}, {"BHLNC", KVRT_LAYOUT_BHLNC},
    {"NHD", KVRT_LAYOUT_LBNHC},   {"NHC", KVRT_LAYOUT_LBNHC},   {"HND", KVRT_LAYOUT_LBHNC},
    {"HNC", KVRT_LAYOUT_LBHNC},
};

static const struct {
    const char *name;
    enum kvrt_dtype dtype;
} dtype_names[] = {
    {"fp32", KVRT_DTYPE_FP32},         {"fp16", KVRT_DTYPE_FP16},         {"bf16", KVRT_DTYPE_BF16},
    {"fp8_e4m3", KVRT_DTYPE_FP8_E4M3}, {"fp8_e5m2", KVRT_DTYPE_FP8_E5M2}, {"int8", KVRT_DTYPE_INT8},
    {"uint8", KVRT_DTYPE_UINT8},       {"float32", KVRT_DTYPE_FP32},      {"float16", KVRT_DTYPE_FP16},
    {"bfloat16", KVRT_DTYPE_BF16},
};

/* The expected escaped form of the first `max` bytes of s, as kvrt/common.h
 * documents it (\n, \t, \r or \xNN), with quotes and backslashes escaped. */
static void escape(const char *s, size_t max, char *out, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < max && s[i] && n + 5 < size; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            n += (size_t)snprintf(out + n, size - n, "\\%c", c);
        else if (c == '\n' || c == '\t' || c == '\r')
            n += (size_t)snprintf(out + n, size - n, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
        else if (c < 0x20 || c == 0x7f)
            n += (size_t)snprintf(out + n, size - n, "\\x%02x", c);
        else
            out[n++] = (char)c;
    }
    out[n] = '\0';
}

static void check_one_line(const char *call)
{
    for (const unsigned char *p = (const unsigned char *)kvrt_error_message(); *p; p++)
        FUZZ_CHECK(*p >= 0x20 && *p != 0x7f,
                   "%s: message has control byte 0x%02x: the quoted value "
                   "must be escaped so that the message stays one line",
                   call, *p);
}

/* The message must contain `<lead>"<escaped prefix of name>`. */
static void check_quotes(const char *call, const char *lead, const char *name)
{
    char want[4 * QUOTE_CHECK_LEN + 64], esc[4 * QUOTE_CHECK_LEN + 8];
    escape(name, QUOTE_CHECK_LEN, esc, sizeof(esc));
    snprintf(want, sizeof(want), "%s\"%s", lead, esc);
    FUZZ_CHECK(fuzz_contains(kvrt_error_message(), want), "%s: message does not quote the input as %s", call, want);
}

static void fuzz_layout(const char *name)
{
    enum kvrt_layout l = (enum kvrt_layout) - 1;
    int expect = -1;
    for (size_t i = 0; i < sizeof(layout_names) / sizeof(layout_names[0]); i++)
        if (strcmp(name, layout_names[i].name) == 0)
            expect = (int)layout_names[i].layout;

    int rc = kvrt_layout_parse(name, &l);
    if (rc == KVRT_OK) {
        FUZZ_CHECK(expect >= 0, "kvrt_layout_parse accepted \"%s\", which is not a valid spelling", name);
        FUZZ_CHECK((int)l == expect, "kvrt_layout_parse(\"%s\") gave %d, want %d", name, (int)l, expect);
        const char *canon = kvrt_layout_name(l);
        FUZZ_CHECK(canon != NULL, "no name for parsed layout %d", (int)l);
        enum kvrt_layout again;
        FUZZ_CHECK(kvrt_layout_parse(canon, &again) == KVRT_OK && again == l,
                   "canonical name \"%s\" does not parse back to %d", canon, (int)l);
        int order[KVRT_NUM_AXES];
        FUZZ_CHECK(kvrt_layout_stride_order(l, order) == KVRT_OK, "no stride order for %s", canon);
        for (int p = 0; p < KVRT_NUM_AXES; p++)
            FUZZ_CHECK(canon[p] == "LBHNC"[order[p]], "name %s disagrees with its stride order at %d", canon, p);
    } else {
        FUZZ_CHECK(expect < 0, "kvrt_layout_parse refused valid spelling \"%s\"", name);
        FUZZ_CHECK(rc == KVRT_ERR_INVALID, "kvrt_layout_parse returned %d", rc);
        fuzz_check_error(rc, "kvrt_layout_parse");
        check_one_line("kvrt_layout_parse");
        check_quotes("kvrt_layout_parse", "unknown layout ", name);
        FUZZ_CHECK(fuzz_contains(kvrt_error_message(), kvrt_layout_valid_names()),
                   "kvrt_layout_parse: message does not list the valid names");
    }

    /* The environment path must agree with the direct parse. */
    if (setenv(KVRT_LAYOUT_ENV, name, 1) != 0)
        return;
    bool is_set = false;
    enum kvrt_layout from_env = (enum kvrt_layout) - 1;
    int env_rc = kvrt_layout_from_env(&is_set, &from_env);
    if (expect >= 0) {
        FUZZ_CHECK(env_rc == KVRT_OK && is_set && (int)from_env == expect,
                   "kvrt_layout_from_env with \"%s\": rc %d, is_set %d, layout %d", name, env_rc, is_set,
                   (int)from_env);
    } else {
        FUZZ_CHECK(env_rc == KVRT_ERR_INVALID, "kvrt_layout_from_env accepted \"%s\" (rc %d)", name, env_rc);
        fuzz_check_error(env_rc, "kvrt_layout_from_env");
        check_one_line("kvrt_layout_from_env");
        FUZZ_CHECK(fuzz_contains(kvrt_error_message(), KVRT_LAYOUT_ENV),
                   "kvrt_layout_from_env: message does not name %s", KVRT_LAYOUT_ENV);
        check_quotes("kvrt_layout_from_env", "unknown layout ", name);
    }
    unsetenv(KVRT_LAYOUT_ENV);
}

static void fuzz_dtype(const char *name)
{
    enum kvrt_dtype t = (enum kvrt_dtype) - 1;
    int expect = -1;
    for (size_t i = 0; i < sizeof(dtype_names) / sizeof(dtype_names[0]); i++)
        if (strcmp(name, dtype_names[i].name) == 0)
            expect = (int)dtype_names[i].dtype;

    int rc = kvrt_dtype_parse(name, &t);
    if (rc == KVRT_OK) {
        FUZZ_CHECK(expect >= 0, "kvrt_dtype_parse accepted \"%s\", which is not a valid spelling", name);
        FUZZ_CHECK((int)t == expect, "kvrt_dtype_parse(\"%s\") gave %d, want %d", name, (int)t, expect);
        const char *canon = kvrt_dtype_name(t);
        FUZZ_CHECK(canon != NULL && kvrt_dtype_size(t) > 0, "no name or size for parsed dtype %d", (int)t);
        enum kvrt_dtype again;
        FUZZ_CHECK(kvrt_dtype_parse(canon, &again) == KVRT_OK && again == t,
                   "canonical name \"%s\" does not parse back to %d", canon, (int)t);
    } else {
        FUZZ_CHECK(expect < 0, "kvrt_dtype_parse refused valid spelling \"%s\"", name);
        FUZZ_CHECK(rc == KVRT_ERR_INVALID, "kvrt_dtype_parse returned %d", rc);
        fuzz_check_error(rc, "kvrt_dtype_parse");
        check_one_line("kvrt_dtype_parse");
        check_quotes("kvrt_dtype_parse", "unknown dtype ", name);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        /* The empty input also stands for the absent value. */
        enum kvrt_layout l;
        enum kvrt_dtype t;
        bool is_set = true;
        FUZZ_CHECK(kvrt_layout_parse(NULL, &l) == KVRT_ERR_INVALID, "kvrt_layout_parse(NULL) not refused");
        fuzz_check_error(KVRT_ERR_INVALID, "kvrt_layout_parse(NULL)");
        FUZZ_CHECK(kvrt_dtype_parse(NULL, &t) == KVRT_ERR_INVALID, "kvrt_dtype_parse(NULL) not refused");
        fuzz_check_error(KVRT_ERR_INVALID, "kvrt_dtype_parse(NULL)");
        unsetenv(KVRT_LAYOUT_ENV);
        FUZZ_CHECK(kvrt_layout_from_env(&is_set, &l) == KVRT_OK && !is_set,
                   "kvrt_layout_from_env with the variable unset");
    }
    /* Names are C strings: the value is the input up to its first NUL. */
    char *name = malloc(size + 1);
    if (!name)
        return 0;
    memcpy(name, data, size);
    name[size] = '\0';
    fuzz_layout(name);
    fuzz_dtype(name);
    free(name);
    return 0;
}
