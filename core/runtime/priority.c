/*
 * The order automatic selection tries backends in (docs/runtime.md).  The
 * table is the one place it is written; the text every message, help page
 * and doc gives is rendered from it.
 *
 * Built-in device backends win over the CPU fallback; a third-party backend
 * the user dropped in is preferred to the CPU too, since installing it says
 * the user wants it.  A backend whose device is the host CPU itself (PoCL's
 * OpenCL CPU device) comes last: it emulates on the same cores what "cpu"
 * runs natively, and is typically tens of times slower.
 *
 * Layer 8 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <kvrt/runtime.h>

#include "priority.h"

enum rank_class {
    NAMED,    /* the backend of that name */
    OTHERS,   /* any backend the table does not name */
    HOST_CPU, /* a backend (not "cpu") whose device is the host CPU */
};

static const struct {
    enum rank_class what;
    const char *name; /* NAMED: the backend; else how the text says it */
} ranks[] = {
    {NAMED, "cuda"},   {NAMED, "rocm"},
    {NAMED, "opencl"}, {OTHERS, "other plugins (in search order)"},
    {NAMED, "cpu"},    {HOST_CPU, "then backends whose device is the host CPU"},
};
#define NUM_RANKS (sizeof(ranks) / sizeof(ranks[0]))

static size_t rank_of_class(enum rank_class what)
{
    size_t i = 0;
    while (i < NUM_RANKS && ranks[i].what != what)
        i++;
    return i;
}

size_t kvrt_priority_rank(const char *name, bool emulates_cpu)
{
    if (emulates_cpu)
        return rank_of_class(HOST_CPU);
    for (size_t i = 0; i < NUM_RANKS; i++)
        if (ranks[i].what == NAMED && strcmp(ranks[i].name, name) == 0)
            return i;
    return rank_of_class(OTHERS);
}

size_t kvrt_priority_num_ranks(void)
{
    return NUM_RANKS;
}

static char text[160];
static pthread_once_t text_once = PTHREAD_ONCE_INIT;

static void write_text(void)
{
    size_t n = 0;
    for (size_t i = 0; i < NUM_RANKS; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%s", i ? ", " : "", ranks[i].name);
}

const char *kvrt_runtime_backend_priority(void)
{
    pthread_once(&text_once, write_text);
    return text;
}
