/* Tensor and pipeline parallelism for transfers: libkvrt's rules under
 * libkvrt-xfer's names (kvrt/xfer.h), nothing restated. */
#include <kvrt/parallel.h>
#include <kvrt/xfer.h>

int kvrt_xfer_tp_map(uint64_t kv_heads, uint64_t local_tp, uint64_t local_rank, uint64_t remote_tp, uint64_t spread,
                     enum kvrt_xfer_direction direction, struct kvrt_tp_entry *entries, size_t capacity, size_t *count)
{
    /* The two enums share their values (tests/abi/parallel.c locks them). */
    return kvrt_tp_map(kv_heads, local_tp, local_rank, remote_tp, spread, (enum kvrt_tp_direction)direction, entries,
                       capacity, count);
}

int kvrt_xfer_pp_layers(uint64_t num_layers, uint64_t pp_size, uint64_t rank, uint64_t *start, uint64_t *count)
{
    return kvrt_pp_layers(num_layers, pp_size, rank, start, count);
}
