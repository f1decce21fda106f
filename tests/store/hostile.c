/*
 * The shared tier against servers that speak the protocol badly
 * (tests/store/hostile_redis.py, one per way): each costs at most the
 * deadline per call and a bounded amount of memory, and its one warning
 * says what was wrong.
 *
 *   test-store-hostile hostile_redis.py
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shared_seqs.h"
#include "tap.h"

/* ---- hostile servers ---------------------------------------------------- */

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

static void mode_hostile(const char *script)
{
    static const char *const modes[] = {"slow",      "endless",   "longline", "negative", "exists",
                                        "wrongtype", "truncated", "slotmap",  "garbage"};
    /* what the one warning must say */
    static const char *const says[] = {"no reply within the timeout",
                                       "a value of 1000000000000 bytes where at most",
                                       "a reply line longer than 4096 bytes",
                                       "a value length \"-5\" that is not a length",
                                       "a reply of type '$' where ':' was expected",
                                       "a reply of type ':' where '$' was expected",
                                       "the server closed the connection",
                                       "an array of 1000000000 elements: larger than its bound",
                                       "" /* whatever the bytes make of it */};
    const double timeout = 0.5;
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "exec /usr/bin/python3 %s %s", script, modes[m]);
        int fds[2];
        if (pipe(fds) != 0)
            break;
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], 1);
            close(fds[0]);
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
            _exit(127);
        }
        close(fds[1]);
        char port[16] = "";
        FILE *pf = fdopen(fds[0], "r");
        if (!pf || !fgets(port, sizeof(port), pf)) {
            tap_ok(false, "hostile server %s started", modes[m]);
            if (pf)
                fclose(pf);
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            continue;
        }
        char url[64];
        snprintf(url, sizeof(url), "redis://127.0.0.1:%d", atoi(port));
        struct st_log lg = {.n = 0};
        long rss0 = rss_kib();
        double t0 = sq_now();
        kvrt_store *s = sq_open(url, timeout, &lg, NULL);
        double open_s = sq_now() - t0, worst = 0;
        uint64_t loaded = 0, hit = 0, wrong = 0;
        for (int round = 0; s && round < 2; round++) {
            double t1 = sq_now(), slowest;
            loaded += sq_get_all(s, 1, &wrong, &slowest);
            hit += sq_lookup(s, 1);
            double took = sq_now() - t1;
            worst = took > worst ? took : worst;
            if (round == 0)
                sq_nap(1.05); /* past the back-off: the next round tries the server again */
        }
        long grew = rss_kib() - rss0;
        /* a server that answers some commands well is back each time it
         * does: a warning each way, at most once a back-off */
        for (int i = 1; i < lg.n; i++)
            tap_diag("then: %s", lg.lines[i]);
        tap_ok(s && open_s <= timeout + 0.3 && worst <= 2 * timeout + 0.3 && loaded == 0 && hit == 0 && wrong == 0 &&
                   grew < 32 * 1024 && lg.n >= 1 && lg.n <= 7 && strstr(lg.lines[0], says[m]),
               "a server that answers %s: open %.2f s, each get and lookup %.2f s at most, nothing loaded, memory +%ld "
               "KiB; %s",
               modes[m], open_s, worst, grew, lg.n ? lg.lines[0] : "no warning");
        kvrt_store_close(s);
        fclose(pf);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

int main(int argc, char **argv)
{
    tap_plan_dynamic();
    if (argc < 2)
        tap_skip_all("usage: test-store-hostile hostile_redis.py");
    sq_init();
    mode_hostile(argv[1]);
    kvrt_runtime_close(sq_rt);
    return tap_done();
}
