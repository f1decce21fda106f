/*
 * A dying peer never takes the survivor with it.  This program only
 * orchestrates (it holds no agent): a survivor process serves, a healthy
 * peer keeps transferring with it the whole time, and victims are SIGKILLed
 * at random moments -- while starting, connecting, in the middle of 64 MiB
 * transfers, between them.
 *
 *   test-xfer-faults sender|receiver [TRIALS]
 *     sender    the victims push into the survivor
 *     receiver  the survivor pushes into the victims
 *
 * Counted, and all must be zero: aborts (the survivor died), hangs (a
 * failure not seen within the timeout, a command not answered, a stop that
 * did not end), wrong completions (a notification whose blocks do not hold
 * what it announces, checked by the survivor the moment it arrives; a push
 * the survivor completed that the dead receiver had not checked as good),
 * leaks (streams, UCX requests or staging chunks left in the survivor once
 * the healthy peer has closed; under ASan, its exit).  The healthy peer's
 * transfers complete and verify throughout.  KVRT_FAULT_SEED repeats a run.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "xfer_side.h"

/* 4 layers x 8 KV heads x head size 128, bf16, 16-token blocks: 256 KiB per
 * block, 64 MiB per transfer of 256 blocks. */
#define MODEL "--layers", "4", "--heads", "8", "--head-size", "128", "--chunk", "1048576", "--staging", "8388608"
enum { PER = 256, REGION = 2 * PER };

static const char *self;
static char port_text[16];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

struct status {
    int connected;
    unsigned long long notes, bad, out, in, ucx, busy;
};

static bool status(struct child *c, struct status *st)
{
    char reply[512] = "";
    bool ok = child_cmd(c, "status", reply, sizeof(reply), 20) &&
              sscanf(reply, "status connected=%d peers=%*d notes=%llu bad=%llu out=%llu in=%llu ucx=%llu busy=%llu",
                     &st->connected, &st->notes, &st->bad, &st->out, &st->in, &st->ucx, &st->busy) == 7;
    if (!ok)
        tap_diag("the survivor's status: \"%s\"", reply);
    return ok;
}

/* The survivor: serves (sender side) or pushes (receiver side); blocks
 * [0, REGION) are the healthy peer's, [REGION, 2 * REGION) the victims'. */
static bool start_survivor(struct child *s)
{
    const char *args[] = {MODEL, "--blocks", "1024", "--listen", "--check-notes", "--timeout", "5", NULL};
    return child_start(s, self, args);
}

struct tally {
    int aborts, hangs, wrong, trials, early, late;
    double worst_detect;
    unsigned long long victim_pushes_ok;
};

/* ---- the victims push ----------------------------------------------------- */

static bool sender_trial(struct child *s, unsigned t, struct tally *n)
{
    /* Half the victims convert (staged, chunk by chunk), half do not. */
    const char *layout = t % 2 ? "LBNHC" : "LBHNC";
    char push[64];
    snprintf(push, sizeof(push), "%d:%d:%d", REGION, REGION, PER);
    snprintf(port_text, sizeof(port_text), "%u", s->port);
    const char *args[] = {MODEL,     "--blocks", "256", "--layout", layout, "--push-to",
                          port_text, "--push",   push,  "--seed",   "7",    NULL};
    struct child v;
    /* Some victims die while starting (no ready line waited for), the
     * rest at a random moment after they are ready: connecting, in the
     * middle of a transfer, between two. */
    bool early = rand() % 5 == 0;
    double delay = early ? (rand() % 100) * 1e-3 : (rand() % 800) * 1e-3;
    if (early) {
        memset(&v, 0, sizeof(v));
        v.pid = fork();
        if (v.pid == 0) {
            const char *argv[24] = {self, "--child"};
            int k = 2;
            for (int i = 0; args[i]; i++)
                argv[k++] = args[i];
            argv[k] = NULL;
            if (!freopen("/dev/null", "w", stdout))
                _exit(127);
            execv(self, (char *const *)argv);
            _exit(127);
        }
        n->early++;
    } else if (!child_start(&v, self, args)) {
        tap_diag("trial %u: a victim did not start", t);
        return false;
    } else {
        n->late++;
    }
    nap(delay);
    child_kill(&v);
    double killed = now();
    /* The survivor must see it gone (only the healthy peer left
     * connected) within its timeout, and keep answering. */
    struct status st;
    bool gone = false;
    while (now() - killed < 12) {
        if (!status(s, &st))
            break;
        if (st.connected <= 1) {
            gone = true;
            break;
        }
        nap(0.01);
    }
    double took = now() - killed;
    if (!gone && !status(s, &st)) {
        n->aborts++;
        tap_diag("trial %u: the survivor died (victim killed %.0f ms after start)", t, delay * 1e3);
        return false;
    }
    if (!gone) {
        n->hangs++;
        tap_diag("trial %u: the survivor still counts the victim connected %.1f s after the kill", t, took);
    }
    if (took > n->worst_detect)
        n->worst_detect = took;
    return true;
}

/* ---- the survivor pushes -------------------------------------------------- */

static bool receiver_trial(struct child *s, unsigned t, struct tally *n)
{
    const char *layout = t % 2 ? "LBNHC" : "LBHNC";
    const char *args[] = {MODEL, "--blocks", "512", "--layout", layout, "--listen", "--report-notes", "--zero", NULL};
    struct child v;
    if (!child_start(&v, self, args)) {
        tap_diag("trial %u: a victim did not start", t);
        return false;
    }
    char cmd[64], reply[1024];
    int idx = -1;
    snprintf(cmd, sizeof(cmd), "connect %u", v.port);
    bool connected = child_cmd(s, cmd, reply, sizeof(reply), 20) && sscanf(reply, "peer %d", &idx) == 1;
    if (!connected) {
        child_kill(&v);
        if (!status(s, &(struct status){0})) {
            n->aborts++;
            return false;
        }
        tap_diag("trial %u: the survivor could not connect: %s", t, reply);
        return true;
    }
    snprintf(cmd, sizeof(cmd), "push %d 0 %d %d", idx, REGION, PER);
    child_cmd(s, cmd, reply, sizeof(reply), 20);
    double delay = (rand() % 600) * 1e-3;
    nap(delay);
    kill(v.pid, SIGKILL);
    double killed = now();
    /* The in-flight push must end (failed, naming the victim) in time. */
    unsigned long long ok = 0, failed = 0;
    snprintf(cmd, sizeof(cmd), "stop %d", idx);
    bool stopped = child_cmd(s, cmd, reply, sizeof(reply), 20) && sscanf(reply, "stopped %llu %llu", &ok, &failed) == 2;
    double took = now() - killed;
    if (!stopped) {
        struct status st;
        if (!status(s, &st)) {
            n->aborts++;
            tap_diag("trial %u: the survivor died", t);
            child_kill(&v);
            return false;
        }
        n->hangs++;
        tap_diag("trial %u: stopping the pushes to the killed victim did not end: %s", t, reply);
    } else {
        char name[32];
        snprintf(name, sizeof(name), "127.0.0.1:%u", v.port);
        if (failed == 0 || !strstr(reply, name)) {
            n->hangs += failed == 0;
            tap_diag("trial %u: after the kill: %s (expected a failure naming %s)", t, reply, name);
        }
    }
    if (took > n->worst_detect)
        n->worst_detect = took;
    /* What the victim checked before it died: no push completed at the
     * survivor that the victim found bad; every push the survivor counts
     * complete was acknowledged by the victim, which checks it right
     * after (at most the last one can be acknowledged, not yet printed). */
    unsigned long long good = 0, bad = 0;
    char line[256];
    while (fgets(line, sizeof(line), v.from)) {
        unsigned long long k;
        char what[8];
        if (sscanf(line, "note %llu %7s", &k, what) == 2) {
            good += strcmp(what, "ok") == 0;
            bad += strcmp(what, "ok") != 0;
        }
    }
    child_kill(&v);
    if (bad || ok > good + 1) {
        n->wrong++;
        tap_diag("trial %u: the survivor completed %llu pushes; the victim checked %llu good, %llu bad", t, ok, good,
                 bad);
    }
    n->victim_pushes_ok += ok;
    return true;
}

int main(int argc, char **argv)
{
    self = argv[0];
    int child = side_main(argc, argv);
    if (child >= 0)
        return child;
    bool sender = argc > 1 && strcmp(argv[1], "sender") == 0;
    if (argc < 2 || (!sender && strcmp(argv[1], "receiver") != 0)) {
        fprintf(stderr, "usage: test-xfer-faults sender|receiver [TRIALS]\n");
        return 2;
    }
    unsigned trials = argc > 2 ? (unsigned)atoi(argv[2]) : 20;
    const char *given = getenv("KVRT_FAULT_SEED"), *tls = getenv("UCX_TLS");
    unsigned seed = given ? (unsigned)atoi(given) : (unsigned)time(NULL);
    srand(seed);
    tap_diag("UCX_TLS=%s, victims %s, %u trials, KVRT_FAULT_SEED=%u", tls ? tls : "(all)",
             sender ? "push into the survivor" : "receive the survivor's pushes", trials, seed);
    struct child s, h;
    if (!tap_ok(start_survivor(&s), "the survivor is up"))
        return tap_done();
    /* The healthy peer: transfers with the survivor from first to last. */
    char push[64], port[16];
    snprintf(push, sizeof(push), "0:%d:%d", REGION, PER);
    snprintf(port, sizeof(port), "%u", s.port);
    const char *hs[] = {MODEL, "--blocks", "256", "--layout", "BLHNC", "--push-to", port, "--push", push, NULL};
    const char *hr[] = {MODEL, "--blocks", "512", "--layout", "BLHNC", "--listen", "--check-notes", NULL};
    int hidx = -1;
    bool up = child_start(&h, self, sender ? hs : hr);
    if (up && !sender) {
        char cmd[64], reply[512];
        snprintf(cmd, sizeof(cmd), "connect %u", h.port);
        up = child_cmd(&s, cmd, reply, sizeof(reply), 20) && sscanf(reply, "peer %d", &hidx) == 1;
        snprintf(cmd, sizeof(cmd), "push %d 0 %d %d", hidx, REGION, PER);
        up = up && child_cmd(&s, cmd, reply, sizeof(reply), 20);
    }
    if (!tap_ok(up, "the survivor and a healthy peer are up and transferring"))
        return tap_done();
    struct tally n = {0};
    double t0 = now();
    for (unsigned t = 0; t < trials; t++) {
        n.trials++;
        if (!(sender ? sender_trial(&s, t, &n) : receiver_trial(&s, t, &n)))
            break;
    }
    tap_ok(n.trials == (int)trials && n.aborts == 0 && n.hangs == 0 && n.wrong == 0,
           "%d victims killed (%s): aborts %d, hangs %d, wrong completions %d", n.trials,
           sender ? "senders" : "receivers", n.aborts, n.hangs, n.wrong);
    if (sender)
        tap_diag("%d killed while starting, %d at a random moment after (%.0f s in all)", n.early, n.late, now() - t0);
    else
        tap_diag("%llu pushes to victims completed before their deaths (%.0f s in all)", n.victim_pushes_ok,
                 now() - t0);
    tap_ok(n.worst_detect < 10, "each failure seen within the timeout (worst %.2f s)", n.worst_detect);
    /* The healthy peer stops; then nothing may be left. */
    struct status st = {0};
    char reply[512];
    bool healthy;
    if (sender) {
        /* A short run (one trial) can end before the healthy peer's first
         * push has landed: give it that long, so that "throughout" holds
         * for any number of trials. */
        double first = now() + 20;
        while (status(&s, &st) && st.notes == 0 && now() < first)
            nap(0.01);
        healthy = child_stop(&h) == 0;
        double deadline = now() + 10;
        while (status(&s, &st) && st.connected > 0 && now() < deadline)
            nap(0.01);
        healthy = healthy && st.notes > 0 && st.bad == 0;
        tap_ok(healthy, "the healthy peer pushed throughout: %llu notified transfers, %llu not as announced", st.notes,
               st.bad);
    } else {
        char cmd[32];
        unsigned long long ok = 0, failed = 1, bad = 1, notes = 0;
        snprintf(cmd, sizeof(cmd), "stop %d", hidx);
        healthy = child_cmd(&s, cmd, reply, sizeof(reply), 30) &&
                  sscanf(reply, "stopped %llu %llu", &ok, &failed) == 2 && failed == 0 && ok > 0;
        healthy = healthy && child_cmd(&h, "verify", reply, sizeof(reply), 60) &&
                  sscanf(reply, "verify %llu %llu", &bad, &notes) == 2 && bad == 0 && notes == ok;
        tap_ok(healthy, "the survivor pushed to the healthy peer throughout: %llu complete, all verified there (%s)",
               ok, reply);
        child_stop(&h);
    }
    double deadline = now() + 10;
    bool clean = false;
    while (!clean && now() < deadline) {
        clean = status(&s, &st) && st.out == 0 && st.in == 0 && st.ucx == 0 && st.busy == 0;
        if (!clean)
            nap(0.05);
    }
    tap_ok(clean, "nothing left in the survivor: streams out %llu, in %llu, UCX requests %llu, busy chunks %llu",
           st.out, st.in, st.ucx, st.busy);
    int rc = child_stop(&s);
    tap_ok(rc == 0, "the survivor exits cleanly (status %d)", rc);
    return tap_done();
}
