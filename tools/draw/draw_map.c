/*
 * The memory map: walk every cell (head, state) of every page through the
 * placement's views, sort them by offset and merge neighbours into pieces.
 * Nothing here assumes a layout: the pieces are what the geometry says.
 */
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>

#include "draw.h"

struct cell {
    uint64_t offset, head;
};

static int cmp_cell(const void *a, const void *b)
{
    const struct cell *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

static int cmp_piece(const void *a, const void *b)
{
    const struct draw_piece *x = a, *y = b;
    if (x->group != y->group)
        return (x->group > y->group) - (x->group < y->group);
    return (x->offset > y->offset) - (x->offset < y->offset);
}

static int grow(void **array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return KVRT_OK;
    size_t n = *cap ? 2 * *cap : 1024;
    while (n < need)
        n *= 2;
    void *p = realloc(*array, n * elem);
    if (!p)
        return KVRT_ERR_NOMEM;
    *array = p;
    *cap = n;
    return KVRT_OK;
}

/* One page: its cells in memory order, merged into pieces and head spans. */
static int add_page(struct draw_map *m, size_t *piece_cap, size_t *span_cap, const struct kvrt_view *v,
                    const struct kvrt_placement_set *set, uint64_t l, uint32_t global, uint64_t b, struct cell *cells)
{
    const uint64_t H = v->shape_bytes[1], N = v->shape_bytes[2], C = v->shape_bytes[3];
    size_t k = 0;
    for (uint64_t h = 0; h < H; h++)
        for (uint64_t n = 0; n < N; n++, k++) {
            cells[k].offset =
                v->offset_bytes + b * v->strides_bytes[0] + h * v->strides_bytes[1] + n * v->strides_bytes[2];
            cells[k].head = h;
        }
    qsort(cells, k, sizeof(*cells), cmp_cell);
    for (size_t i = 0; i < k; i++) {
        bool new_piece = i == 0 || cells[i].offset != cells[i - 1].offset + C;
        if (new_piece) {
            if (grow((void **)&m->pieces, piece_cap, m->num_pieces + 1, sizeof(*m->pieces)) != KVRT_OK)
                return KVRT_ERR_NOMEM;
            struct draw_piece *p = &m->pieces[m->num_pieces++];
            p->offset = cells[i].offset;
            p->length = 0;
            p->group = set->group;
            p->layer = global;
            p->name = set->layer_names[l];
            p->block = b;
            p->head = (int64_t)cells[i].head;
            p->state = set->spec->kind == KVRT_SPEC_STATE;
            p->first_span = m->num_spans;
            p->num_spans = 0;
        }
        struct draw_piece *p = &m->pieces[m->num_pieces - 1];
        if (p->head != (int64_t)cells[i].head)
            p->head = -1;
        p->length += C;
        if (new_piece || m->spans[m->num_spans - 1].head != cells[i].head) {
            if (grow((void **)&m->spans, span_cap, m->num_spans + 1, sizeof(*m->spans)) != KVRT_OK)
                return KVRT_ERR_NOMEM;
            m->spans[m->num_spans++] = (struct draw_span){cells[i].offset, 0, cells[i].head};
            p->num_spans++;
        }
        m->spans[m->num_spans - 1].length += C;
    }
    return KVRT_OK;
}

int draw_map_build(const kvrt_placement *p, struct draw_map *m)
{
    memset(m, 0, sizeof(*m));
    m->layout = kvrt_placement_layout(p);
    m->num_blocks = kvrt_placement_num_blocks(p);
    m->num_groups = kvrt_placement_num_groups(p);
    m->group_end = calloc(m->num_groups + 1, sizeof(*m->group_end));
    if (!m->group_end)
        return KVRT_ERR_NOMEM;
    size_t piece_cap = 0, span_cap = 0;
    uint32_t global = 0;
    int rc = KVRT_OK;
    for (size_t s = 0; rc == KVRT_OK && s < kvrt_placement_num_sets(p); s++) {
        struct kvrt_placement_set set;
        if ((rc = kvrt_placement_get_set(p, s, &set)) != KVRT_OK)
            break;
        const struct kvrt_spec_info *in = &set.geometry.info;
        if (in->page_size > m->row_bytes)
            m->row_bytes = in->page_size;
        if (in->head_slots > m->heads_max)
            m->heads_max = in->head_slots;
        struct cell *cells = malloc(in->head_slots * in->states_per_block * sizeof(*cells));
        if (!cells)
            rc = KVRT_ERR_NOMEM;
        for (uint64_t l = 0; rc == KVRT_OK && l < set.num_layers; l++, global++) {
            struct kvrt_view v;
            if ((rc = kvrt_placement_layer_view(p, s, l, &v)) != KVRT_OK)
                break;
            for (uint64_t b = 0; rc == KVRT_OK && b < m->num_blocks; b++)
                rc = add_page(m, &piece_cap, &span_cap, &v, &set, l, global, b, cells);
        }
        free(cells);
    }
    m->num_layers = global;
    if (rc == KVRT_OK) {
        /* Spans are indexed from their pieces, so sorting the pieces keeps them valid. */
        qsort(m->pieces, m->num_pieces, sizeof(*m->pieces), cmp_piece);
        for (size_t i = 0; i < m->num_pieces; i++) {
            uint64_t end = m->pieces[i].offset + m->pieces[i].length;
            size_t g = m->pieces[i].group;
            m->group_end[g] = end > m->group_end[g] ? end : m->group_end[g];
        }
        const uint64_t block0 = 0;
        rc = kvrt_transfer_regions(p, &block0, 1, &m->runs, &m->num_runs);
    }
    if (rc != KVRT_OK)
        draw_map_free(m);
    return rc;
}

void draw_map_free(struct draw_map *m)
{
    free(m->group_end);
    free(m->pieces);
    free(m->spans);
    kvrt_free(m->runs);
    memset(m, 0, sizeof(*m));
}

uint64_t draw_map_rows(const struct draw_map *m, size_t g)
{
    return m->row_bytes ? (m->group_end[g] + m->row_bytes - 1) / m->row_bytes : 0;
}
