/* A progress line for long runs.  Only a person at a terminal sees it:
 * JSON output, pipes and log files stay free of carriage returns. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Redraw at most this often, so progress never costs measurable time. */
#define REDRAW_SECONDS 0.1

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_begin(struct cli_progress *p, const char *what, bool json)
{
    p->on = !json && isatty(fileno(stderr));
    p->what = what;
    p->started = cli_now();
    p->last_drawn = 0;
}

void cli_progress_update(struct cli_progress *p, uint64_t done, uint64_t total, const char *detail)
{
    if (!p->on)
        return;
    double now = cli_now();
    if (done < total && now - p->last_drawn < REDRAW_SECONDS)
        return;
    p->last_drawn = now;
    fprintf(stderr, "\r\033[K%s: %llu/%llu %s (%.1f s)", p->what, (unsigned long long)done, (unsigned long long)total,
            detail ? detail : "", now - p->started);
    fflush(stderr);
}

void cli_progress_end(struct cli_progress *p)
{
    if (!p->on)
        return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->on = false;
}
