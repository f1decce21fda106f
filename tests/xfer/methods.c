/*
 * Transfer methods are named once, in libkvrt-xfer: every name of the
 * valid-names list parses back in enum order, anything else is refused with
 * the value and the list, and kvrt_xfer_request_default asks for "auto".
 */
#include <stdio.h>
#include <string.h>

#include <kvrt/xfer.h>

#include "tap.h"

int main(void)
{
    tap_plan_dynamic();
    char list[128];
    snprintf(list, sizeof(list), "%s", kvrt_xfer_method_valid_names());
    int i = 0;
    bool ok = true;
    for (char *save = NULL, *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save), i++) {
        enum kvrt_xfer_method m;
        ok = ok && kvrt_xfer_method_parse(tok, &m) == KVRT_OK && (int)m == i &&
             strcmp(kvrt_xfer_method_name(m), tok) == 0;
    }
    tap_ok(ok && i == KVRT_XFER_STAGING + 1 && kvrt_xfer_method_name((enum kvrt_xfer_method)i) == NULL,
           "the %d names of \"%s\" parse back in enum order, and no value past them has one", i,
           kvrt_xfer_method_valid_names());
    enum kvrt_xfer_method m;
    int rc = kvrt_xfer_method_parse("Direct", &m);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "\"Direct\"") &&
               strstr(kvrt_error_message(), kvrt_xfer_method_valid_names()),
           "\"Direct\" is refused with the value and the valid names: %s", kvrt_error_message());
    tap_ok(kvrt_xfer_method_parse(NULL, &m) == KVRT_ERR_INVALID &&
               kvrt_xfer_method_parse("auto", NULL) == KVRT_ERR_INVALID,
           "NULL name or output: KVRT_ERR_INVALID");
    struct kvrt_xfer_request r;
    kvrt_xfer_request_default(&r);
    tap_ok(strcmp(kvrt_xfer_method_name(r.method), "auto") == 0, "the default request asks for \"auto\"");
    return tap_done();
}
