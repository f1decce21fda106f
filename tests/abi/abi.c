/*
 * Locks the plugin ABI, the structs an engine shares with libkvrt and the
 * public enum values.  A change to the plugin structs is a plugin ABI break
 * and must come with a new KVRT_PLUGIN_ABI_MAJOR (or, for appended fields,
 * a new minor).  A change to an engine-facing struct's size or offsets must
 * come with a new KVRT_API_VERSION_MAJOR (and so a new soname); a field
 * carved from its reserved bytes keeps the size and is a new minor.
 * Offsets are for LP64 targets.
 */
#include <stddef.h>
#include <string.h>

#include <kvrt/dlpack.h>
#include <kvrt/kvrt.h>
#include <kvrt/plugin.h>

#include "tap.h"

#define OFF(type, field, want)                                                                                         \
    TAP_EQ_U64(offsetof(struct type, field), want, "offsetof(" #type ", " #field ") == " #want)
#define SIZE(type, want) TAP_EQ_U64(sizeof(struct type), want, "sizeof(struct " #type ") == " #want)
#define VAL(name, want)                                                                                                \
    TAP_EQ_U64((unsigned long long)(long long)(name), (unsigned long long)(long long)(want), #name " == " #want)

int main(void)
{
    tap_plan_dynamic();
    if (sizeof(void *) != 8) {
        tap_skip("offsets are locked for LP64 only");
        return tap_done();
    }
    VAL(KVRT_PLUGIN_ABI_MAJOR, 1);
    VAL(KVRT_PLUGIN_ABI_MINOR, 2);
    tap_ok(strcmp(KVRT_PLUGIN_ENTRY_SYMBOL, "kvrt_plugin_entry") == 0, "entry symbol name");

    OFF(kvrt_plugin_descriptor, size, 0);
    OFF(kvrt_plugin_descriptor, abi_major, 4);
    OFF(kvrt_plugin_descriptor, abi_minor, 6);
    OFF(kvrt_plugin_descriptor, name, 8);
    OFF(kvrt_plugin_descriptor, version, 16);
    OFF(kvrt_plugin_descriptor, description, 24);
    OFF(kvrt_plugin_descriptor, flags, 32);
    OFF(kvrt_plugin_descriptor, num_layouts, 36);
    OFF(kvrt_plugin_descriptor, layouts, 40);
    OFF(kvrt_plugin_descriptor, dtypes, 48);
    OFF(kvrt_plugin_descriptor, ops, 52);
    OFF(kvrt_plugin_descriptor, probe, 56);
    OFF(kvrt_plugin_descriptor, bind, 64);
    OFF(kvrt_plugin_descriptor, unbind, 72);
    OFF(kvrt_plugin_descriptor, buffer_alloc, 80);
    OFF(kvrt_plugin_descriptor, buffer_free, 88);
    OFF(kvrt_plugin_descriptor, buffer_zero, 96);
    OFF(kvrt_plugin_descriptor, buffer_upload, 104);
    OFF(kvrt_plugin_descriptor, buffer_download, 112);
    OFF(kvrt_plugin_descriptor, write, 120);
    OFF(kvrt_plugin_descriptor, read, 128);
    OFF(kvrt_plugin_descriptor, copy_blocks, 136);
    OFF(kvrt_plugin_descriptor, gather, 144);
    OFF(kvrt_plugin_descriptor, scatter, 152);
    OFF(kvrt_plugin_descriptor, decode, 160);
    /* ABI 1.1, appended. */
    OFF(kvrt_plugin_descriptor, decode_dtypes, 168);
    OFF(kvrt_plugin_descriptor, reserved0, 172);
    OFF(kvrt_plugin_descriptor, describe, 176);
    OFF(kvrt_plugin_descriptor, buffer_address, 184);
    OFF(kvrt_plugin_descriptor, measure_copy, 192);
    /* ABI 1.2, appended. */
    OFF(kvrt_plugin_descriptor, import_alignment, 200);
    OFF(kvrt_plugin_descriptor, buffer_import, 208);
    SIZE(kvrt_plugin_descriptor, 216);
    OFF(kvrt_plugin_import, size, 0);
    OFF(kvrt_plugin_import, memory, 4);
    OFF(kvrt_plugin_import, device_id, 8);
    OFF(kvrt_plugin_import, reserved, 12);
    OFF(kvrt_plugin_import, address, 16);
    OFF(kvrt_plugin_import, bytes, 24);
    SIZE(kvrt_plugin_import, 32);
    VAL(KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE, 168);

    VAL(KVRT_SETTING_LAYOUT, 0);
    VAL(KVRT_SETTING_BACKEND, 1);
    VAL(KVRT_SETTING_PLUGIN_PATH, 2);
    VAL(KVRT_SETTING_ALLOW_INSECURE_PLUGINS, 3);
    VAL(KVRT_SETTING_DEBUG, 4);
    VAL(KVRT_SETTING_PP_PARTITION, 5);
    VAL(KVRT_NUM_SETTINGS, 6);
    VAL(KVRT_SOURCE_DEFAULT, 0);
    VAL(KVRT_SOURCE_ENVIRONMENT, 1);
    VAL(KVRT_SOURCE_ARGUMENT, 2);
    OFF(kvrt_plugin_device_info, size, 0);
    OFF(kvrt_plugin_device_info, type, 4);
    OFF(kvrt_plugin_device_info, memory, 8);
    OFF(kvrt_plugin_device_info, device_id, 12);
    OFF(kvrt_plugin_device_info, name, 16);
    SIZE(kvrt_plugin_device_info, 16 + KVRT_DEVICE_NAME_MAX);
    VAL(KVRT_DEVICE_NAME_MAX, 256);
    VAL(KVRT_DEVICE_TYPE_UNKNOWN, 0);
    VAL(KVRT_DEVICE_TYPE_CPU, 1);
    VAL(KVRT_DEVICE_TYPE_GPU, 2);
    VAL(KVRT_DEVICE_TYPE_ACCELERATOR, 3);
    VAL(KVRT_MEMORY_OPAQUE, 0);
    VAL(KVRT_MEMORY_HOST, 1);
    VAL(KVRT_MEMORY_CUDA, 2);
    VAL(KVRT_MEMORY_ROCM, 3);
    VAL(KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE, 168);

    OFF(kvrt_plugin_layer, size, 0);
    OFF(kvrt_plugin_layer, kind, 4);
    OFF(kvrt_plugin_layer, dtype, 8);
    OFF(kvrt_plugin_layer, elem_size, 12);
    OFF(kvrt_plugin_layer, offset, 16);
    OFF(kvrt_plugin_layer, num_view_blocks, 24);
    OFF(kvrt_plugin_layer, blocks_per_block, 32);
    OFF(kvrt_plugin_layer, view_block_tokens, 40);
    OFF(kvrt_plugin_layer, head_slots, 48);
    OFF(kvrt_plugin_layer, states, 56);
    OFF(kvrt_plugin_layer, content_bytes, 64);
    OFF(kvrt_plugin_layer, head_size, 72);
    OFF(kvrt_plugin_layer, head_size_v, 80);
    OFF(kvrt_plugin_layer, stride_block, 88);
    OFF(kvrt_plugin_layer, stride_head, 96);
    OFF(kvrt_plugin_layer, stride_state, 104);
    SIZE(kvrt_plugin_layer, 112);

    OFF(kvrt_plugin_cache, size, 0);
    OFF(kvrt_plugin_cache, layout, 4);
    OFF(kvrt_plugin_cache, bytes, 8);
    OFF(kvrt_plugin_cache, num_blocks, 16);
    OFF(kvrt_plugin_cache, block_size, 24);
    OFF(kvrt_plugin_cache, num_layers, 32);
    OFF(kvrt_plugin_cache, layers, 40);
    SIZE(kvrt_plugin_cache, 48);

    OFF(kvrt_plugin_decode_args, size, 0);
    OFF(kvrt_plugin_decode_args, num_seqs, 4);
    OFF(kvrt_plugin_decode_args, num_q_heads, 8);
    OFF(kvrt_plugin_decode_args, max_blocks_per_seq, 12);
    OFF(kvrt_plugin_decode_args, q, 16);
    OFF(kvrt_plugin_decode_args, q_offset, 24);
    OFF(kvrt_plugin_decode_args, out, 32);
    OFF(kvrt_plugin_decode_args, out_offset, 40);
    OFF(kvrt_plugin_decode_args, block_tables, 48);
    OFF(kvrt_plugin_decode_args, seq_lens, 56);
    OFF(kvrt_plugin_decode_args, scale, 64);
    SIZE(kvrt_plugin_decode_args, 72);

    OFF(kvrt_plugin_bind_info, size, 0);
    OFF(kvrt_plugin_bind_info, layout, 4);
    OFF(kvrt_plugin_bind_info, host, 8);
    SIZE(kvrt_plugin_bind_info, 16);
    OFF(kvrt_plugin_host, size, 0);
    OFF(kvrt_plugin_host, user, 8);
    OFF(kvrt_plugin_host, log, 16);
    SIZE(kvrt_plugin_host, 24);
    TAP_EQ_U64(sizeof(kvrt_plugin_error), 512, "sizeof(kvrt_plugin_error) == 512");

    /* Engine-facing structs: fixed size, reserved bytes at the end. */
    VAL(KVRT_API_VERSION_MAJOR, 1);
    VAL(KVRT_API_VERSION_MINOR, 1);
    OFF(kvrt_spec, kind, 0);
    OFF(kvrt_spec, dtype, 4);
    OFF(kvrt_spec, block_size, 8);
    OFF(kvrt_spec, num_kv_heads, 16);
    OFF(kvrt_spec, head_size, 24);
    OFF(kvrt_spec, head_size_v, 32);
    OFF(kvrt_spec, num_head_slots, 40);
    OFF(kvrt_spec, state_content_bytes, 48);
    OFF(kvrt_spec, tokens_per_state_num, 56);
    OFF(kvrt_spec, tokens_per_state_den, 64);
    OFF(kvrt_spec, page_size_padded, 72);
    OFF(kvrt_spec, reserved, 80);
    SIZE(kvrt_spec, 112);
    OFF(kvrt_geometry_params, layout, 0);
    OFF(kvrt_geometry_params, spec, 8);
    OFF(kvrt_geometry_params, num_layers, 16);
    OFF(kvrt_geometry_params, num_blocks, 24);
    OFF(kvrt_geometry_params, kernel_block_size, 32);
    OFF(kvrt_geometry_params, fixed_strides, 40);
    OFF(kvrt_geometry_params, reserved, 80);
    SIZE(kvrt_geometry_params, 112);
    OFF(kvrt_runtime_options, plugin_path, 0);
    OFF(kvrt_runtime_options, search_default_paths, 8);
    OFF(kvrt_runtime_options, log, 16);
    OFF(kvrt_runtime_options, log_user, 24);
    OFF(kvrt_runtime_options, reserved, 32);
    SIZE(kvrt_runtime_options, 96);
    OFF(kvrt_decode_params, num_seqs, 0);
    OFF(kvrt_decode_params, num_q_heads, 4);
    OFF(kvrt_decode_params, q, 8);
    OFF(kvrt_decode_params, q_offset, 16);
    OFF(kvrt_decode_params, out, 24);
    OFF(kvrt_decode_params, out_offset, 32);
    OFF(kvrt_decode_params, block_tables, 40);
    OFF(kvrt_decode_params, max_blocks_per_seq, 48);
    OFF(kvrt_decode_params, seq_lens, 56);
    OFF(kvrt_decode_params, scale, 64);
    OFF(kvrt_decode_params, reserved, 68);
    SIZE(kvrt_decode_params, 104);
    OFF(kvrt_plugin_info, name, 0);
    OFF(kvrt_plugin_info, path, 8);
    OFF(kvrt_plugin_info, version, 16);
    OFF(kvrt_plugin_info, description, 24);
    OFF(kvrt_plugin_info, abi_major, 32);
    OFF(kvrt_plugin_info, abi_minor, 36);
    OFF(kvrt_plugin_info, any_layout, 40);
    OFF(kvrt_plugin_info, num_layouts, 48);
    OFF(kvrt_plugin_info, layouts, 56);
    OFF(kvrt_plugin_info, dtypes, 80);
    OFF(kvrt_plugin_info, ops, 84);
    OFF(kvrt_plugin_info, available, 88);
    OFF(kvrt_plugin_info, reason, 96);
    OFF(kvrt_plugin_info, device_type, 104);
    OFF(kvrt_plugin_info, memory, 108);
    OFF(kvrt_plugin_info, device_name, 112);
    OFF(kvrt_plugin_info, decode_dtypes, 120);
    /* API 1.1, carved from the reserved bytes. */
    OFF(kvrt_plugin_info, import_alignment, 124);
    OFF(kvrt_plugin_info, reserved, 128);
    SIZE(kvrt_plugin_info, 160);
    OFF(kvrt_memory, kind, 0);
    OFF(kvrt_memory, device_id, 4);
    OFF(kvrt_memory, address, 8);
    OFF(kvrt_memory, bytes, 16);
    OFF(kvrt_memory, release, 24);
    OFF(kvrt_memory, release_user, 32);
    OFF(kvrt_memory, reserved, 40);
    SIZE(kvrt_memory, 72);
    OFF(kvrt_trace_step, kind, 0);
    OFF(kvrt_trace_step, layout, 4);
    OFF(kvrt_trace_step, backend, 8);
    OFF(kvrt_trace_step, text, 16);
    OFF(kvrt_trace_step, reserved, 24);
    SIZE(kvrt_trace_step, 56);
    OFF(kvrt_model_options, kv_cache_dtype, 0);
    OFF(kvrt_model_options, attention_backend, 4);
    OFF(kvrt_model_options, block_size, 8);
    OFF(kvrt_model_options, dtype_given, 16);
    OFF(kvrt_model_options, dtype, 20);
    OFF(kvrt_model_options, dtype_option, 24);
    OFF(kvrt_model_options, reserved, 32);
    SIZE(kvrt_model_options, 64);
    OFF(kvrt_model_group, name, 0);
    OFF(kvrt_model_group, what, 8);
    OFF(kvrt_model_group, window, 16);
    OFF(kvrt_model_group, usage, 24);
    OFF(kvrt_model_group, num_layers, 32);
    OFF(kvrt_model_group, layers, 40);
    OFF(kvrt_model_group, reserved, 48);
    SIZE(kvrt_model_group, 80);
    OFF(kvrt_model_setting, name, 0);
    OFF(kvrt_model_setting, value, 8);
    OFF(kvrt_model_setting, source, 16);
    OFF(kvrt_model_setting, reserved, 24);
    SIZE(kvrt_model_setting, 40);
    OFF(kvrt_model_info, name, 0);
    OFF(kvrt_model_info, source, 8);
    OFF(kvrt_model_info, format, 16);
    OFF(kvrt_model_info, architecture, 24);
    OFF(kvrt_model_info, num_layers, 32);
    OFF(kvrt_model_info, num_q_heads, 40);
    OFF(kvrt_model_info, max_model_len, 48);
    OFF(kvrt_model_info, max_model_len_source, 56);
    OFF(kvrt_model_info, num_groups, 64);
    OFF(kvrt_model_info, groups, 72);
    OFF(kvrt_model_info, placement_groups, 80);
    OFF(kvrt_model_info, num_settings, 88);
    OFF(kvrt_model_info, settings, 96);
    OFF(kvrt_model_info, num_notes, 104);
    OFF(kvrt_model_info, notes, 112);
    OFF(kvrt_model_info, reserved, 120);
    SIZE(kvrt_model_info, 184);
    OFF(kvrt_model_capacity, num_blocks, 0);
    OFF(kvrt_model_capacity, bytes_per_block, 8);
    OFF(kvrt_model_capacity, tokens, 16);
    OFF(kvrt_model_capacity, max_model_len, 24);
    OFF(kvrt_model_capacity, blocks_per_request, 32);
    OFF(kvrt_model_capacity, max_concurrency, 40);
    OFF(kvrt_model_capacity, request_bytes, 48);
    OFF(kvrt_model_capacity, fits_one_request, 56);
    OFF(kvrt_model_capacity, reserved, 60);
    SIZE(kvrt_model_capacity, 96);
    OFF(kvrt_model_plan_request, layout, 0);
    OFF(kvrt_model_plan_request, layout_source, 8);
    OFF(kvrt_model_plan_request, num_blocks, 16);
    OFF(kvrt_model_plan_request, kernel_block_size, 24);
    OFF(kvrt_model_plan_request, budget_bytes, 32);
    OFF(kvrt_model_plan_request, max_model_len, 40);
    OFF(kvrt_model_plan_request, max_model_len_source, 48);
    OFF(kvrt_model_plan_request, batched_tokens, 56);
    OFF(kvrt_model_plan_request, batched_tokens_source, 64);
    OFF(kvrt_model_plan_request, reserved, 72);
    SIZE(kvrt_model_plan_request, 104);
    {
        /* A designated initialiser leaves the reserved bytes zero: the
         * growth rule depends on it. */
        struct kvrt_spec s = {.kind = KVRT_SPEC_ATTENTION, .block_size = 16};
        struct kvrt_geometry_params g = {.num_layers = 1};
        bool zero = true;
        for (size_t i = 0; i < sizeof(s.reserved); i++)
            zero = zero && s.reserved[i] == 0 && g.reserved[i] == 0;
        tap_ok(zero, "designated initialisers leave reserved bytes zero");
        struct kvrt_model_options mo = {.block_size = 16};
        struct kvrt_model_plan_request pr = {.num_blocks = 1};
        zero = true;
        for (size_t i = 0; i < sizeof(mo.reserved); i++)
            zero = zero && mo.reserved[i] == 0 && pr.reserved[i] == 0;
        tap_ok(zero, "model options and plan requests: designated initialisers leave reserved bytes zero");
    }

    VAL(KVRT_OP_WRITE, 1);
    VAL(KVRT_OP_READ, 2);
    VAL(KVRT_OP_COPY_BLOCKS, 4);
    VAL(KVRT_OP_GATHER, 8);
    VAL(KVRT_OP_SCATTER, 16);
    VAL(KVRT_OP_DECODE, 32);
    VAL(KVRT_OP_ALL, 63);
    VAL(KVRT_PLUGIN_ANY_LAYOUT, 1);

    VAL(KVRT_LAYOUT_LBHNC, 0);
    VAL(KVRT_LAYOUT_LBNHC, 1);
    VAL(KVRT_LAYOUT_LHBNC, 2);
    VAL(KVRT_LAYOUT_BLHNC, 3);
    VAL(KVRT_LAYOUT_BLNHC, 4);
    VAL(KVRT_LAYOUT_BHLNC, 5);
    VAL(KVRT_NUM_LAYOUTS, 6);
    VAL(KVRT_AXIS_L, 0);
    VAL(KVRT_AXIS_B, 1);
    VAL(KVRT_AXIS_H, 2);
    VAL(KVRT_AXIS_N, 3);
    VAL(KVRT_AXIS_C, 4);

    VAL(KVRT_DTYPE_FP32, 0);
    VAL(KVRT_DTYPE_FP16, 1);
    VAL(KVRT_DTYPE_BF16, 2);
    VAL(KVRT_DTYPE_FP8_E4M3, 3);
    VAL(KVRT_DTYPE_FP8_E5M2, 4);
    VAL(KVRT_DTYPE_INT8, 5);
    VAL(KVRT_DTYPE_UINT8, 6);
    VAL(KVRT_SPEC_ATTENTION, 0);
    VAL(KVRT_SPEC_MLA, 1);
    VAL(KVRT_SPEC_STATE, 2);
    VAL(KVRT_VIEW_ALL, 0);
    VAL(KVRT_VIEW_K, 1);
    VAL(KVRT_VIEW_V, 2);

    VAL(KVRT_TRACE_RESOLVE, 0);
    VAL(KVRT_TRACE_NO_DECLARATIONS, 1);
    VAL(KVRT_TRACE_DECLARATION, 2);
    VAL(KVRT_TRACE_DEFAULT, 3);
    VAL(KVRT_TRACE_FAST_PATH, 4);
    VAL(KVRT_TRACE_INTERSECTION, 5);
    VAL(KVRT_TRACE_VOTES, 6);
    VAL(KVRT_TRACE_RANKING, 7);
    VAL(KVRT_TRACE_SHAPES, 8);
    VAL(KVRT_TRACE_NARROWING, 9);
    VAL(KVRT_TRACE_CANDIDATES, 10);
    VAL(KVRT_TRACE_ENV, 11);
    VAL(KVRT_TRACE_PREFERENCE, 12);
    VAL(KVRT_TRACE_CHOICE, 13);
    VAL(KVRT_TRACE_RECORDED, 14);
    VAL(KVRT_TRACE_REFUSED, 15);
    VAL(KVRT_TRACE_PREFERRED, 16);
    VAL(KVRT_TRACE_BOUND, 17);
    VAL(KVRT_TRACE_PASSED_OVER, 18);
    VAL(KVRT_TRACE_NO_LAYOUT, -1);

    VAL(KVRT_KV_CACHE_AUTO, 0);
    VAL(KVRT_KV_CACHE_BF16, 1);
    VAL(KVRT_KV_CACHE_FP16, 2);
    VAL(KVRT_KV_CACHE_FP8, 3);
    VAL(KVRT_KV_CACHE_FP8_E4M3, 4);
    VAL(KVRT_KV_CACHE_FP8_E5M2, 5);
    VAL(KVRT_NUM_KV_CACHE_DTYPES, 6);
    VAL(KVRT_ATTENTION_DEFAULT, 0);
    VAL(KVRT_ATTENTION_FLASH_ATTN, 1);
    VAL(KVRT_ATTENTION_FLASHINFER, 2);
    VAL(KVRT_ATTENTION_TRITON_ATTN, 3);
    VAL(KVRT_ATTENTION_FLASHMLA, 4);
    VAL(KVRT_ATTENTION_FLASHMLA_SPARSE, 5);
    VAL(KVRT_ATTENTION_CUTLASS_MLA, 6);
    VAL(KVRT_ATTENTION_FLASHINFER_MLA, 7);
    VAL(KVRT_ATTENTION_TRITON_MLA, 8);
    VAL(KVRT_ATTENTION_FLASH_ATTN_MLA, 9);
    VAL(KVRT_ATTENTION_FLASH_ATTN_MLA_SPARSE, 10);
    VAL(KVRT_NUM_ATTENTION_BACKENDS, 11);
    VAL(KVRT_MODEL_USAGE_FULL, 0);
    VAL(KVRT_MODEL_USAGE_SLIDING, 1);
    VAL(KVRT_MODEL_USAGE_STATE, 2);

    VAL(KVRT_OK, 0);
    VAL(KVRT_ERR_INVALID, -1);
    VAL(KVRT_ERR_OVERFLOW, -2);
    VAL(KVRT_ERR_NOMEM, -3);
    VAL(KVRT_ERR_REFUSED, -4);
    VAL(KVRT_ERR_NODEV, -5);
    VAL(KVRT_ERR_STATE, -6);
    VAL(KVRT_ERR_DEVICE, -7);
    VAL(KVRT_ERR_UNSUPPORTED, -8);
    VAL(KVRT_ERR_PLUGIN, -9);
    VAL(KVRT_ERR_INTERNAL, -10);
    return tap_done();
}
