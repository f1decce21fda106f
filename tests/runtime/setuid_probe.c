/* Prints how many plugins a default runtime finds; run setuid by the
 * setuid test, where KVRT_PLUGIN_PATH must be ignored. */
#include <stdio.h>

#include <kvrt/kvrt.h>

/* LeakSanitizer cannot run in a setuid process (it needs ptrace), and a
 * setuid process cannot read its own /proc/self/environ to learn
 * ASAN_OPTIONS: switch it off here.  Unused without ASan. */
const char *__asan_default_options(void); // NOLINT(bugprone-reserved-identifier): the name ASan looks up
const char *__asan_default_options(void)  // NOLINT(bugprone-reserved-identifier): the name ASan looks up
{
    return "detect_leaks=0";
}

int main(void)
{
    kvrt_runtime *rt = NULL;
    if (kvrt_runtime_open(NULL, &rt) != KVRT_OK) {
        printf("error %s\n", kvrt_error_message());
        return 1;
    }
    /* Names, not a count: an installed kvrt may add its own plugins. */
    printf("plugins:");
    for (size_t i = 0; i < kvrt_runtime_num_plugins(rt); i++) {
        struct kvrt_plugin_info info;
        kvrt_runtime_plugin_info(rt, i, &info);
        printf(" %s", info.name);
    }
    printf("\n");
    kvrt_runtime_close(rt);
    return 0;
}
