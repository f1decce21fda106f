/* kvrt xfer in a build without UCX: the command exists and says why it cannot run. */
#include <stdio.h>

#include "commands.h"
#include "cli.h"

static void xfer_help(FILE *out)
{
    fprintf(out, "Usage: kvrt xfer serve|send ...\n"
                 "\n"
                 "Move KV blocks between two processes over UCX.  This kvrt was built without\n"
                 "UCX (meson option ucx; install libucx-dev and reconfigure), so the command\n"
                 "only reports that (exit 4).\n"
                 "\n"
                 "Options:\n"
                 "  none in this build\n"
                 "\n"
                 "Environment:\n"
                 "  UCX_TLS, UCX_NET_DEVICES  (read by UCX in builds that have it)\n"
                 "\n"
                 "Example:\n"
                 "  apt-get install libucx-dev && meson setup --reconfigure build -Ducx=enabled\n");
}

static int xfer_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_error(CLI_EXIT_NODEV, "xfer: this kvrt was built without UCX (install libucx-dev and "
                                     "reconfigure with -Ducx=enabled)");
}

const struct cli_command cli_xfer_command = {
    .name = "xfer",
    .summary = "move KV blocks between two processes over UCX (serve / send)",
    .run = xfer_run,
    .help = xfer_help,
};
