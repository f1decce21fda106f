/*
 * Internal, the loader layer (loader.c), the bottom of the runtime: finding
 * plugin files (an explicit path, then the build tree or the install
 * folder), refusing unsafe ones, opening them and calling their entry.
 * It knows files, modules and entry symbols; what a descriptor means is
 * the plugin layer's (plugin.h), told through a client.
 *
 * Layer 5 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_LOADER_H
#define KVRT_CORE_LOADER_H

#include <stdbool.h>

#include <kvrt/plugin.h>

struct kvrt_loader_client {
    void *ctx;
    /* An opened module and the descriptor its entry returned, not yet
     * checked.  KVRT_OK: accepted; KVRT_ERR_PLUGIN: passed over (the client
     * recorded why); any other status stops the search.  The module is
     * never dlclose'd, either way. */
    int (*module)(void *ctx, const char *path, void *handle, const struct kvrt_plugin_descriptor *desc);
    /* A file passed over before it was opened, or without an entry; a
     * status other than KVRT_OK stops the search. */
    int (*skip)(void *ctx, const char *path, const char *reason);
    /* Worth a debug line (a folder that does not exist, say). */
    void (*note)(void *ctx, const char *message);
};

/* Search `explicit_path` (colon-separated folders and files; NULL:
 * KVRT_PLUGIN_PATH), then the default folders when asked, reporting every
 * module and every file passed over to the client. */
int kvrt_loader_search(const char *explicit_path, bool search_default_paths, const struct kvrt_loader_client *client);

#endif
