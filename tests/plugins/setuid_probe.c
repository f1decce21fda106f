/* Prints how many plugins a default runtime finds; run setuid by the
 * setuid test, where KVRT_PLUGIN_PATH must be ignored. */
#include <stdio.h>

#include <kvrt/kvrt.h>

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
