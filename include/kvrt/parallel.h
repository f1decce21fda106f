/*
 * kvrt — which KV heads and which layers a tensor- or pipeline-parallel
 * rank holds, and who sends what between two engines that split a model
 * differently.
 *
 *   kvrt_tp_heads()     the KV heads rank r of a tensor-parallel group holds
 *   kvrt_tp_map()       the head runs that move exactly one rank's heads
 *                       between a group of local_tp and one of remote_tp
 *   kvrt_pp_layers()    the layers a pipeline stage holds, as vLLM splits them
 *                       (VLLM_PP_LAYER_PARTITION, or its even split)
 *
 * The rules are vLLM's, written once here (docs/parallel.md names their
 * source); libkvrt-xfer (kvrt_xfer_tp_map, kvrt_xfer_pp_layers) and the
 * Python package call these and never restate them.  Every
 * combination that cannot be mapped is refused with one line that names
 * the values and what is valid.
 */
#ifndef KVRT_PARALLEL_H
#define KVRT_PARALLEL_H

#include <kvrt/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest tensor-parallel size kvrt maps.  Far above any real group,
 * and it bounds the work of a map to a few thousand steps per rank. */
#define KVRT_TP_MAX_SIZE 65536u

/* The variable vLLM reads for an uneven pipeline split (kvrt_pp_layers). */
#define KVRT_PP_PARTITION_ENV "VLLM_PP_LAYER_PARTITION"

/*
 * The KV heads one rank holds.  vLLM's rule (QKVParallelLinear): with
 * tp_size <= heads, tp_size divides the heads and rank r holds heads
 * [r * heads / tp_size, + heads / tp_size), each on one rank; with
 * tp_size > heads, tp_size is a multiple of the heads, every rank holds
 * one head and rank r holds head r / (tp_size / heads), which
 * tp_size / heads ranks hold alike.
 */
struct kvrt_tp_heads {
    uint64_t head_start; /* the first of the model's KV heads this rank holds */
    uint64_t num_heads;  /* how many, consecutive (vLLM's get_num_kv_heads) */
    uint64_t replicas;   /* how many ranks hold each of them: 1 when heads are split */
    uint64_t replica;    /* this rank's index among those ranks, 0 .. replicas - 1 */
    uint8_t reserved[32];
};

/**
 * The heads rank `rank` of a tensor-parallel group of `tp_size` holds, of
 * a layer with `total_kv_heads` KV heads (MLA and state layers: 1).
 * @return KVRT_OK; KVRT_ERR_INVALID for 0 heads, tp_size 0 or over
 *   KVRT_TP_MAX_SIZE, rank >= tp_size, or a size that neither divides the
 *   heads nor is a multiple of them (the message lists what would be).
 */
KVRT_API int kvrt_tp_heads(uint64_t total_kv_heads, uint64_t tp_size, uint64_t rank, struct kvrt_tp_heads *out);

/*
 * Which side of a transfer a map is for.  The values are those of enum
 * kvrt_xfer_direction (<kvrt/xfer.h>), so a request's direction converts
 * unchanged (kvrt_xfer_tp_map takes it as it is).
 */
enum kvrt_tp_direction {
    /* The source view: the runs this rank must send so that every remote
     * rank gets each of its heads exactly once under the destination rule. */
    KVRT_TP_PUSH = 0,
    /* The destination view: where each head this rank holds is read from. */
    KVRT_TP_PULL = 1,
};

/** "push" or "pull" (what Python's direction= takes), or NULL. */
KVRT_API const char *kvrt_tp_direction_name(enum kvrt_tp_direction direction);

/**
 * Parse "push" or "pull", exact and case-sensitive.
 * @return KVRT_OK, or KVRT_ERR_INVALID quoting the value and listing the
 *   valid names.
 */
KVRT_API int kvrt_tp_direction_parse(const char *name, enum kvrt_tp_direction *out);

/** The direction names in enum order, comma-separated, for messages. */
KVRT_API const char *kvrt_tp_direction_valid_names(void);

/*
 * One run of heads that moves between this rank and one remote rank.
 * Head starts are indices into each rank's own cache, i.e. counted from
 * the first head that rank holds (kvrt_tp_heads' head_start), as
 * struct kvrt_xfer_request's local_head_start and remote_head_start are.
 */
struct kvrt_tp_entry {
    uint64_t remote_rank;       /* the rank of the remote group */
    uint64_t local_head_start;  /* into this rank's heads */
    uint64_t remote_head_start; /* into the remote rank's heads */
    uint64_t num_heads;
    uint8_t reserved[32];
};

/**
 * The runs that move this rank's share of a layer with `kv_heads` KV heads
 * between a local tensor-parallel group of `local_tp` (this is rank
 * `local_rank`) and a remote one of `remote_tp`.
 *
 * KVRT_TP_PULL, the destination view: every head this rank holds appears
 * exactly once, read from a remote rank that holds it.  Where the remote
 * group replicates a head (remote_tp > kv_heads), the source replica is
 * (local_rank + spread) mod replicas: the local ranks that hold one head
 * read it from different replicas, and a `spread` key the caller varies
 * (a sequence id) spreads the load further -- with MLA (kv_heads 1) every
 * remote rank holds the one latent head, and sequences are spread across
 * them all.  Contiguous heads from one remote rank merge into one entry;
 * entries are in ascending local head order.
 *
 * KVRT_TP_PUSH, the source view: the destination rule applied for every
 * remote rank (as the local side, with this group as its remote one and
 * the same spread), keeping the runs it reads from this rank; entries in
 * ascending remote rank, then remote head order.  Both sides of a transfer
 * agree by construction.
 *
 * `entries` receives at most `capacity` entries and *count how many there
 * are.  With entries NULL (capacity must then be 0) only *count is set;
 * when capacity is too small nothing is written but *count, and the call
 * is refused naming both numbers.  A map has at most remote_tp entries
 * (and a destination view at most the heads this rank holds).
 * @return KVRT_OK; KVRT_ERR_INVALID for a rank or group kvrt_tp_heads
 *   refuses (the message says which side), a direction that is not one of
 *   the two, or an array that is too small.
 */
KVRT_API int kvrt_tp_map(uint64_t kv_heads, uint64_t local_tp, uint64_t local_rank, uint64_t remote_tp, uint64_t spread,
                         enum kvrt_tp_direction direction, struct kvrt_tp_entry *entries, size_t capacity,
                         size_t *count);

/**
 * VLLM_PP_LAYER_PARTITION as this process has it, read here and nowhere
 * else: *value is its text (NULL when unset; valid until the environment
 * changes) and *source "environment", or "default" when it is unset (or
 * the process is setuid).  source may be NULL.
 */
KVRT_API int kvrt_pp_partition_env(const char **value, const char **source);

/**
 * Layers [*start, *start + *count) of pipeline stage `rank` of `pp_size`,
 * as vLLM's get_pp_indices splits `num_layers`: the partition in
 * VLLM_PP_LAYER_PARTITION when it is set (kvrt_pp_partition_env), else
 * kvrt_pp_layers_partition's even split.
 * @return as kvrt_pp_layers_partition; a bad variable is named as such.
 */
KVRT_API int kvrt_pp_layers(uint64_t num_layers, uint64_t pp_size, uint64_t rank, uint64_t *start, uint64_t *count);

/**
 * The same with the partition given (the environment is not read).
 * partition NULL: vLLM's even split, num_layers / pp_size each, and the
 * num_layers % pp_size layers left over one each to the stages just before
 * the last (the last holds the final norm; the first the embedding, which
 * is left out too while there are fewer extras than pp_size - 1).
 * Otherwise pp_size comma-separated layer counts, decimal, optionally
 * surrounded by spaces, each at least 1, adding up to num_layers
 * ("10,10,12").
 * @return KVRT_OK; KVRT_ERR_INVALID for pp_size 0, rank >= pp_size,
 *   num_layers < pp_size (a stage would hold none), and a partition with
 *   the wrong number of entries, the wrong sum, an entry that is not a
 *   count or is 0; KVRT_ERR_OVERFLOW for an entry or a sum past 64 bits.
 */
KVRT_API int kvrt_pp_layers_partition(uint64_t num_layers, uint64_t pp_size, uint64_t rank, const char *partition,
                                      uint64_t *start, uint64_t *count);

#ifdef __cplusplus
}
#endif
#endif
