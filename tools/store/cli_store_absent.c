/* kvrt store in a build without libkvrt-store: the command exists and says
 * why it cannot run. */
#include <stdio.h>

#include "commands.h"

static void store_help(FILE *out)
{
    fprintf(out, "Usage: kvrt store stat|ls|verify|gc DIR ...\n"
                 "\n"
                 "Describe, list, verify and trim a KV store folder.  This kvrt was built\n"
                 "without libkvrt-store (meson option store; install liblmdb-dev,\n"
                 "libhiredis-dev, libssl-dev, libxxhash-dev, libzmq3-dev and libmsgpack-dev\n"
                 "and reconfigure), so the command only reports that (exit 4).\n"
                 "\n"
                 "Options:\n"
                 "  none in this build\n"
                 "\n"
                 "Example:\n"
                 "  apt-get install liblmdb-dev libhiredis-dev libssl-dev libxxhash-dev libzmq3-dev "
                 "libmsgpack-dev\n");
}

static int store_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_error(CLI_EXIT_NODEV, "store: this kvrt was built without libkvrt-store (install liblmdb-dev, "
                                     "libhiredis-dev, libssl-dev, libxxhash-dev, libzmq3-dev and libmsgpack-dev "
                                     "and reconfigure)");
}

const struct cli_command cli_store_command = {
    .name = "store",
    .summary = "describe, list, verify and trim a KV store folder",
    .run = store_run,
    .help = store_help,
};
