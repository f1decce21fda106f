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

/* Start hostile_redis.py in `mode`: its pid, *pf its stdout, url its
 * address; 0 when it did not start. */
static pid_t start_server(const char *script, const char *mode, FILE **pf, char *url, size_t url_size)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "exec /usr/bin/python3 %s %s", script, mode);
    int fds[2];
    if (pipe(fds) != 0)
        return 0;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char port[16] = "";
    *pf = fdopen(fds[0], "r");
    if (pid < 0 || !*pf || !fgets(port, sizeof(port), *pf)) {
        if (*pf)
            fclose(*pf);
        *pf = NULL;
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        return 0;
    }
    snprintf(url, url_size, "redis://127.0.0.1:%d", atoi(port));
    return pid;
}

static void stop_server(pid_t pid, FILE *pf)
{
    fclose(pf);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
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
        FILE *pf;
        char url[64];
        pid_t pid = start_server(script, modes[m], &pf, url, sizeof(url));
        if (!pid) {
            tap_ok(false, "hostile server %s started", modes[m]);
            continue;
        }
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
        stop_server(pid, pf);
    }
}

/* A server that stops reading in the middle of a SET: the writes fill the
 * socket and wait (or, when they fit in it, the replies never come), and
 * the put's flush still returns within the deadline, the entries counted
 * as failed writes. */
static void mode_deaf(const char *script)
{
    /* entries of 512 KiB (32 layers of 32 tokens): 8 sequences are 32 MiB,
     * more than the sockets between the two hold */
    st_model_init(&sq_model, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 32, 2, 128, 128);
    const double timeout = 0.5;
    FILE *pf;
    char url[64];
    pid_t pid = start_server(script, "deaf", &pf, url, sizeof(url));
    if (!pid) {
        tap_ok(false, "hostile server deaf started");
        return;
    }
    struct st_log lg = {.n = 0};
    kvrt_store *s = sq_open(url, timeout, &lg, NULL);
    double t0 = sq_now();
    sq_put(s, 0, 8);
    double took = sq_now() - t0;
    struct kvrt_store_stats st = s ? sq_stats(s) : (struct kvrt_store_stats){0};
    for (int i = 1; i < lg.n; i++)
        tap_diag("then: %s", lg.lines[i]);
    /* which wait runs out first, the writes' or the replies', depends on
     * how much the writer had queued when the server stopped reading */
    tap_ok(s && took <= 2 * timeout + 0.5 && st.write_failures > 0 && st.written_shared == 0 && lg.n >= 1 &&
               (strstr(lg.lines[0], "the server is not reading") || strstr(lg.lines[0], "no reply within the timeout")),
           "a server that stops reading in a SET: put + flush of 32 MiB in %.2f s (deadline %.1f s a round), %llu "
           "entries not written; %s",
           took, timeout, (unsigned long long)st.write_failures, lg.n ? lg.lines[0] : "no warning");
    kvrt_store_close(s);
    stop_server(pid, pf);
}

int main(int argc, char **argv)
{
    tap_plan_dynamic();
    if (argc < 2)
        tap_skip_all("usage: test-store-hostile hostile_redis.py");
    sq_init();
    mode_hostile(argv[1]);
    mode_deaf(argv[1]);
    kvrt_runtime_close(sq_rt);
    return tap_done();
}
