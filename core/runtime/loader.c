/* Finding and loading plugin modules: the search path, modules refused
 * (writable by others, found twice), each admitted once.
 *
 * Layer 5 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kvrt/runtime.h>

#include "error.h"
#include "loader.h"
#include "settings_internal.h"

/*
 * Discovery, in the manner of the Vulkan and OpenCL ICD loaders: an explicit
 * path (option or KVRT_PLUGIN_PATH, ignored for setuid programs), then the
 * build tree when libkvrt runs uninstalled, else <libdir>/kvrt/plugins.
 * Every file passed over is recorded with its reason; nothing a plugin does
 * while being read can take the others down.
 *
 * Accepted plugins are never dlclose'd: GPU runtimes register exit handlers
 * and thread-local state that outlive an unload, and a cache in use must
 * never lose its code.
 */

/* One search: the client, and the real path and name of every module it
 * accepted, to recognise the same file reached by two paths. */
struct search {
    const struct kvrt_loader_client *client;
    struct accepted {
        char *real;
        char *path;
        char *name;
    } * accepted;
    size_t num_accepted;
};

static int skip(struct search *s, const char *path, const char *reason)
{
    return s->client->skip(s->client->ctx, path, reason);
}

static bool insecure_allowed(void)
{
    const char *v = kvrt_setting_value(KVRT_SETTING_ALLOW_INSECURE_PLUGINS, NULL, NULL);
    return v && strcmp(v, "1") == 0;
}

/* A file or folder that another user can write lets that user run code in
 * every process that loads kvrt. */
static bool writable_by_others(const char *path, char *why, size_t why_size, const char *what)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return false; /* dlopen will report the real problem */
    uid_t me = geteuid();
    if (st.st_mode & S_IWOTH) {
        snprintf(why, why_size,
                 "%s %s is writable by other users (mode %04o); refusing to load plugins from it "
                 "(fix the permissions, or set %s=1 to accept the risk)",
                 what, path, (unsigned)(st.st_mode & 07777), KVRT_ALLOW_INSECURE_PLUGINS_ENV);
        return true;
    }
    if (st.st_uid != me && st.st_uid != 0) {
        snprintf(why, why_size,
                 "%s %s is owned by uid %u, neither root nor this process (uid %u); refusing to load "
                 "plugins from it (set %s=1 to accept the risk)",
                 what, path, (unsigned)st.st_uid, (unsigned)me, KVRT_ALLOW_INSECURE_PLUGINS_ENV);
        return true;
    }
    return false;
}

static const struct accepted *find_by_realpath(const struct search *s, const char *real)
{
    for (size_t i = 0; i < s->num_accepted; i++)
        if (strcmp(s->accepted[i].real, real) == 0)
            return &s->accepted[i];
    return NULL;
}

static int remember(struct search *s, const char *real, const char *path, const char *name)
{
    struct accepted *a = realloc(s->accepted, (s->num_accepted + 1) * sizeof(*a));
    if (!a)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory loading plugin %s", path);
    s->accepted = a;
    a = &a[s->num_accepted];
    a->real = strdup(real);
    a->path = strdup(path);
    a->name = strdup(name);
    if (!a->real || !a->path || !a->name) {
        free(a->real);
        free(a->path);
        free(a->name);
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory loading plugin %s", path);
    }
    s->num_accepted++;
    return KVRT_OK;
}

/*
 * Find an opened module's entry and hand its descriptor to the client.
 * Either way the module stays loaded (`handle` is never dlclose'd, also not
 * when skipped): its constructors have already run and may have started a
 * device runtime whose exit handlers must outlive it, as for accepted
 * plugins.
 */
static int admit_module(struct search *s, const char *path, const char *real, void *handle)
{
    char why[1024];

    dlerror();
    void *sym = dlsym(handle, KVRT_PLUGIN_ENTRY_SYMBOL);
    if (!sym) {
        const char *e = dlerror();
        snprintf(why, sizeof(why), "no entry symbol %s: %s", KVRT_PLUGIN_ENTRY_SYMBOL, e ? e : "symbol is NULL");
        return skip(s, path, why);
    }
    kvrt_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof(entry));
    const struct kvrt_plugin_descriptor *d = entry();
    int status = s->client->module(s->client->ctx, path, handle, d);
    if (status == KVRT_ERR_PLUGIN)
        return KVRT_OK; /* passed over, with the client's reason */
    /* Accepted, so its descriptor has a valid name. */
    if (status == KVRT_OK && real[0])
        status = remember(s, real, path, d->name);
    return status;
}

static const char *file_kind(mode_t mode)
{
    return S_ISDIR(mode)    ? "a folder"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
                            : "not a regular file";
}

static int load_file(struct search *s, const char *path, bool check_dir)
{
    char why[1024];
    char real[PATH_MAX];

    /* dlopen of a FIFO blocks forever and a device file is never a
     * plugin: only regular files are opened.  The file can still be
     * swapped between this stat and dlopen (docs/security.md). */
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(why, sizeof(why), "cannot stat it: %s", strerror(errno));
        return skip(s, path, why);
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, sizeof(why), "it is %s; plugins must be regular files", file_kind(st.st_mode));
        return skip(s, path, why);
    }

    if (!insecure_allowed()) {
        if (writable_by_others(path, why, sizeof(why), "plugin file"))
            return skip(s, path, why);
        if (check_dir) {
            char dir[PATH_MAX];
            /* path fits PATH_MAX: search_entry refused longer ones. */
            snprintf(dir, sizeof(dir), "%s", path);
            char *slash = strrchr(dir, '/');
            if (slash && slash != dir)
                *slash = '\0';
            if (writable_by_others(dir, why, sizeof(why), "plugin folder"))
                return skip(s, path, why);
        }
    }
    if (realpath(path, real)) {
        const struct accepted *same = find_by_realpath(s, real);
        if (same) {
            snprintf(why, sizeof(why), "the same file as plugin \"%s\", already loaded from %s", same->name,
                     same->path);
            return skip(s, path, why);
        }
    } else {
        real[0] = '\0';
    }

    dlerror();
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *e = dlerror();
        snprintf(why, sizeof(why), "dlopen failed: %s", e ? e : "unknown error");
        return skip(s, path, why);
    }
    return admit_module(s, path, real, handle);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_plugin_name(const char *name)
{
    size_t n = strlen(name);
    return n > 8 && strncmp(name, "kvrt-", 5) == 0 && strcmp(name + n - 3, ".so") == 0;
}

/* A shared object that is not named as a plugin: never loaded from a folder
 * (a folder may hold helper libraries), but reported, since a plugin built
 * under the wrong name would otherwise vanish without a word. */
static bool is_misnamed_module(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, ".so") == 0 && !is_plugin_name(name);
}

static int scan_dir(struct search *s, const char *dir)
{
    char why[1024];
    if (!insecure_allowed() && writable_by_others(dir, why, sizeof(why), "plugin folder"))
        return skip(s, dir, why);

    DIR *d = opendir(dir);
    if (!d) {
        /* A missing default folder is normal; a missing explicit one is worth a debug line. */
        char line[PATH_MAX + 256];
        snprintf(line, sizeof(line), "plugin folder %s not searched: %s", dir, strerror(errno));
        s->client->note(s->client->ctx, line);
        return KVRT_OK;
    }
    char **names = NULL;
    size_t n = 0;
    int status = KVRT_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (is_misnamed_module(e->d_name)) {
            char path[PATH_MAX];
            int len = snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            if (len < 0 || (size_t)len >= sizeof(path))
                continue; /* a name that long is no plugin of ours either */
            status = skip(s, path,
                          "not loaded: a folder's plugins are the files named "
                          "kvrt-<name>.so; rename it, or list the file itself in " KVRT_PLUGIN_PATH_ENV);
            if (status != KVRT_OK)
                break;
            continue;
        }
        if (!is_plugin_name(e->d_name))
            continue;
        char **grown = realloc(names, (n + 1) * sizeof(*names));
        if (!grown || !(grown[n] = strdup(e->d_name))) {
            names = grown ? grown : names;
            status = kvrt_fail(KVRT_ERR_NOMEM, "out of memory scanning %s", dir);
            break;
        }
        names = grown;
        n++;
    }
    closedir(d);
    /* readdir order is arbitrary; sorted order makes duplicates deterministic. */
    if (names)
        qsort(names, n, sizeof(*names), name_cmp);
    for (size_t i = 0; i < n; i++) {
        if (status == KVRT_OK) {
            char path[PATH_MAX];
            int len = snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
            if (len < 0 || (size_t)len >= sizeof(path))
                status = skip(s, names[i], "path too long");
            else
                status = load_file(s, path, false);
        }
        free(names[i]);
    }
    free(names);
    return status;
}

static int search_entry(struct search *s, const char *entry)
{
    struct stat st;
    char path[PATH_MAX];
    /* dlopen searches LD_LIBRARY_PATH for a name without '/'; an explicit
     * relative entry means a path, so make it one. */
    int len = snprintf(path, sizeof(path), "%s%s", strchr(entry, '/') ? "" : "./", entry);
    if (len < 0 || (size_t)len >= sizeof(path)) {
        /* Truncated, it would name another file, which might then load. */
        char why[128];
        snprintf(why, sizeof(why), "the search path entry is %zu bytes; at most %d fit a file name", strlen(entry),
                 PATH_MAX - 1 - (strchr(entry, '/') ? 0 : 2));
        char shown[96];
        snprintf(shown, sizeof(shown), "%.64s...", entry);
        return skip(s, shown, why);
    }
    /* A plugin file named directly; anything else not a folder is refused
     * by load_file with its kind. */
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode))
        return load_file(s, path, true);
    return scan_dir(s, path);
}

/* Colon-separated; empty elements are ignored so that "a::b" or a trailing
 * colon never means the current directory. */
static int search_list(struct search *s, const char *list)
{
    char *copy = strdup(list);
    if (!copy)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory");
    int status = KVRT_OK;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ":", &save); tok && status == KVRT_OK; tok = strtok_r(NULL, ":", &save))
        status = search_entry(s, tok);
    free(copy);
    return status;
}

/* libkvrt knows where it was built; when the running library is that very
 * file, the build tree's plugins are the ones that match it. */
static bool running_uninstalled(void)
{
#ifdef KVRT_BUILD_CORE_DIR
    static const char anchor = 0;
    Dl_info info;
    char here[PATH_MAX], built[PATH_MAX];
    if (!dladdr(&anchor, &info) || !info.dli_fname)
        return false;
    if (!realpath(info.dli_fname, here) || !realpath(KVRT_BUILD_CORE_DIR, built))
        return false;
    char *slash = strrchr(here, '/');
    if (!slash)
        return false;
    *slash = '\0';
    return strcmp(here, built) == 0;
#else
    return false;
#endif
}

static int search_all(struct search *s, const char *explicit_path, bool search_default_paths)
{
    explicit_path = kvrt_setting_value(KVRT_SETTING_PLUGIN_PATH, explicit_path, NULL);
    int status = KVRT_OK;
    if (explicit_path && *explicit_path)
        status = search_list(s, explicit_path);
    if (status == KVRT_OK && search_default_paths) {
#ifdef KVRT_BUILD_PLUGIN_DIRS
        if (running_uninstalled())
            return search_list(s, KVRT_BUILD_PLUGIN_DIRS);
#endif
        status = search_list(s, KVRT_INSTALL_PLUGIN_DIR);
    }
    return status;
}

int kvrt_loader_search(const char *explicit_path, bool search_default_paths, const struct kvrt_loader_client *client)
{
    struct search s = {.client = client};
    int status = search_all(&s, explicit_path, search_default_paths);
    for (size_t i = 0; i < s.num_accepted; i++) {
        free(s.accepted[i].real);
        free(s.accepted[i].path);
        free(s.accepted[i].name);
    }
    free(s.accepted);
    return status;
}
