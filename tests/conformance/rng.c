/* splitmix64: tiny, fast, and the same sequence on every platform. */
#include <stdlib.h>

#include "conformance.h"

void conf_rng_seed(struct conf_rng *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t conf_rng_next(struct conf_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t conf_rng_below(struct conf_rng *r, uint64_t n)
{
    return n ? conf_rng_next(r) % n : 0;
}

void conf_rng_shuffle(struct conf_rng *r, int64_t *a, uint64_t n)
{
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = conf_rng_below(r, i);
        int64_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

int64_t *conf_rng_permutation(struct conf_rng *r, uint64_t n)
{
    int64_t *a = malloc((n ? n : 1) * sizeof(*a));
    if (!a)
        return NULL;
    for (uint64_t i = 0; i < n; i++)
        a[i] = (int64_t)i;
    conf_rng_shuffle(r, a, n);
    return a;
}
