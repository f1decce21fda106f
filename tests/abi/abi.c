/*
 * Locks the plugin ABI and the public enum values: a change here is an ABI
 * break and must come with a new KVRT_PLUGIN_ABI_MAJOR (or, for appended
 * fields, a new minor).  Offsets are for LP64 targets.
 */
#include <stddef.h>
#include <string.h>

#include <kvrt/kvrt.h>
#include <kvrt/plugin.h>

#include "tap.h"

#define OFF(type, field, want) TAP_EQ_U64(offsetof(struct type, field), want, "offsetof(" #type ", " #field ") == " #want)
#define SIZE(type, want) TAP_EQ_U64(sizeof(struct type), want, "sizeof(struct " #type ") == " #want)
#define VAL(name, want) TAP_EQ_U64((unsigned long long)(long long)(name), (unsigned long long)(long long)(want), #name " == " #want)

int main(void)
{
    tap_plan_dynamic();
    if (sizeof(void *) != 8) {
        tap_skip("offsets are locked for LP64 only");
        return tap_done();
    }
    VAL(KVRT_PLUGIN_ABI_MAJOR, 1);
    VAL(KVRT_PLUGIN_ABI_MINOR, 1);
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
    SIZE(kvrt_plugin_descriptor, 200);
    VAL(KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE, 168);
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
