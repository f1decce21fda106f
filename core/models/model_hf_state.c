/*
 * The state a Mamba, gated-delta-net or KDA layer keeps per sequence, in
 * bytes, as vLLM's MambaStateShapeCalculator and MambaStateDtypeCalculator
 * shape it (vllm/model_executor/layers/mamba/mamba_utils.py): a causal-conv
 * state in the model's type and a temporal (recurrent) state in the SSM
 * type, float32 for KDA.
 *
 * Layer 4 of libkvrt (core/models/; CONTRIBUTING.md, "Where things live").
 */
#include <stdio.h>

#include <kvrt/common.h>

#include "model_internal.h"

#define MAX_HEADS (1u << 20)
/* State tensor sizes multiply three of these: they stay far below 2^64. */
#define MAX_STATE_DIM (1u << 16)

struct state {
    uint64_t conv_dim, conv_len; /* conv state elements: conv_dim x conv_len */
    uint64_t temporal;           /* temporal state elements */
    enum kvrt_dtype temporal_dtype;
};

static int gated_delta_net(struct hf *h, struct state *s, char *what, size_t size)
{
    const struct model_ctx *c = h->c;
    const json_t *r = h->cfg;
    const char *w = h->where;
    uint64_t nk, nv, dk, dv, kernel;
    int rc;
    if ((rc = model_get_u64(c, r, w, "linear_num_key_heads", 1, MAX_HEADS, &nk)) ||
        (rc = model_get_u64(c, r, w, "linear_num_value_heads", 1, MAX_HEADS, &nv)) ||
        (rc = model_get_u64(c, r, w, "linear_key_head_dim", 1, MAX_STATE_DIM, &dk)) ||
        (rc = model_get_u64(c, r, w, "linear_value_head_dim", 1, MAX_STATE_DIM, &dv)) ||
        (rc = model_get_u64(c, r, w, "linear_conv_kernel_dim", 2, 64, &kernel)))
        return rc;
    /* gated_delta_net_state_shape: conv over q, k and v; one
     * [head_v_dim, head_k_dim] state per value head. */
    s->conv_dim = 2 * nk * dk + nv * dv;
    s->conv_len = kernel - 1;
    s->temporal = nv * dk * dv;
    s->temporal_dtype = h->ssm_dtype;
    snprintf(what, size, "linear attention state (conv %llu x %llu + recurrent %llu x %llu x %llu)",
             (unsigned long long)s->conv_dim, (unsigned long long)s->conv_len, (unsigned long long)nv,
             (unsigned long long)dk, (unsigned long long)dv);
    return KVRT_OK;
}

static int mamba(struct hf *h, struct state *s, char *what, size_t size)
{
    const struct model_ctx *c = h->c;
    const json_t *r = h->cfg;
    const char *w = h->where;
    uint64_t hidden, expand, d_state, kernel, heads, d_head, groups;
    bool mamba2;
    int rc;
    if ((rc = model_get_u64(c, r, w, "hidden_size", 1, (uint64_t)MAX_STATE_DIM * 16, &hidden)) ||
        (rc = model_get_u64(c, r, w, "mamba_d_state", 1, MAX_STATE_DIM, &d_state)) ||
        (rc = model_get_u64(c, r, w, "mamba_d_conv", 2, 64, &kernel)) ||
        (rc = model_get_u64(c, r, w, "mamba_expand", 1, 64, &expand)) ||
        (rc = model_get_u64_opt(c, r, w, "mamba_n_heads", 1, MAX_HEADS, &heads, &mamba2)))
        return rc;
    const uint64_t d_inner = expand * hidden;
    s->conv_len = kernel - 1;
    s->temporal_dtype = h->ssm_dtype;
    if (mamba2) {
        /* mamba2_state_shape: conv over x, B and C; [d_head, d_state] per head. */
        if ((rc = model_get_u64(c, r, w, "mamba_d_head", 1, MAX_STATE_DIM, &d_head)) ||
            (rc = model_get_u64(c, r, w, "mamba_n_groups", 1, MAX_HEADS, &groups)))
            return rc;
        s->conv_dim = d_inner + 2 * groups * d_state;
        s->temporal = heads * d_head * d_state;
    } else {
        s->conv_dim = d_inner;
        s->temporal = d_inner * d_state;
    }
    snprintf(what, size, "Mamba%s state (conv %llu x %llu + SSM %llu)", mamba2 ? "-2" : "",
             (unsigned long long)s->conv_dim, (unsigned long long)s->conv_len, (unsigned long long)s->temporal);
    return KVRT_OK;
}

/* Kimi-Linear's KDA layers (kda_state_shape, kda_state_dtype): conv states
 * over q, k and v, and a float32 [head_dim, head_dim] state per head. */
static int kda(struct hf *h, struct state *s, char *what, size_t size)
{
    const char *w = "linear_attn_config.";
    const json_t *lac = json_object_get(h->cfg, "linear_attn_config");
    uint64_t heads, dim, kernel = 4;
    bool found;
    int rc;
    if ((rc = model_get_u64(h->c, lac, w, "num_heads", 1, MAX_HEADS, &heads)) ||
        (rc = model_get_u64(h->c, lac, w, "head_dim", 1, MAX_STATE_DIM, &dim)) ||
        (rc = model_get_u64_opt(h->c, lac, w, "short_conv_kernel_size", 2, 64, &kernel, &found)))
        return rc;
    s->conv_dim = 3 * heads * dim;
    s->conv_len = kernel - 1;
    s->temporal = heads * dim * dim;
    s->temporal_dtype = KVRT_DTYPE_FP32;
    snprintf(what, size, "KDA state (conv %llu x %llu + float32 recurrent %llu x %llu x %llu)",
             (unsigned long long)s->conv_dim, (unsigned long long)s->conv_len, (unsigned long long)heads,
             (unsigned long long)dim, (unsigned long long)dim);
    return KVRT_OK;
}

int hf_state_bytes(struct hf *h, enum layer_kind kind, uint64_t *bytes, char *what, size_t size)
{
    struct state s = {0};
    int rc = kind == LK_LINEAR ? gated_delta_net(h, &s, what, size)
             : kind == LK_KDA  ? kda(h, &s, what, size)
                               : mamba(h, &s, what, size);
    if (rc != KVRT_OK)
        return rc;
    /* Every factor is bounded above, so these products fit in 64 bits.  The
     * conv state keeps the model's type (mamba_cache_dtype auto). */
    *bytes = s.conv_dim * s.conv_len * kvrt_dtype_size(h->model_dtype) + s.temporal * kvrt_dtype_size(s.temporal_dtype);
    if (kind != LK_KDA)
        model_setting(h->m, "mamba_ssm_dtype", kvrt_dtype_name(h->ssm_dtype), "%s",
                      h->ssm_dtype == h->model_dtype && !json_object_get(h->cfg, "mamba_ssm_dtype")
                          ? "default: the model dtype (mamba_ssm_cache_dtype auto)"
                          : "config mamba_ssm_dtype (vLLM's mamba_ssm_cache_dtype follows it)");
    return KVRT_OK;
}
