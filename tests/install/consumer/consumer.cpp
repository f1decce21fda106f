// A tiny C++ engine against the installed kvrt: plan a layout, open a
// runtime, write K/V of a few tokens on the CPU backend, read them back,
// and look at one through a DLPack view.  Exit status 0 only when all agree.
#include <kvrt/dlpack.h>
#include <kvrt/kvrt.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace
{

int fail(const char *what)
{
    std::fprintf(stderr, "consumer: %s: %s\n", what, kvrt_error_message());
    return 1;
}

} // namespace

int main()
{
    kvrt_spec spec;
    kvrt_spec_default(&spec);
    spec.dtype = KVRT_DTYPE_FP32;
    spec.block_size = 16;
    spec.num_kv_heads = 2;
    spec.head_size = 64;

    kvrt_geometry_params params;
    kvrt_geometry_params_default(&params);
    if (kvrt_layout_parse("HND", &params.layout) != KVRT_OK)
        return fail("layout");
    params.spec = &spec;
    params.num_layers = 2;
    params.num_blocks = 8;
    kvrt_geometry geom;
    if (kvrt_geometry_compute(&params, &geom) != KVRT_OK)
        return fail("plan");
    std::printf("plan: %s, %llu bytes\n", kvrt_layout_name(geom.layout), (unsigned long long)geom.total_bytes);

    kvrt_runtime *rt = nullptr;
    if (kvrt_runtime_open(nullptr, &rt) != KVRT_OK)
        return fail("runtime");
    std::unique_ptr<kvrt_runtime, void (*)(kvrt_runtime *)> rt_guard(rt, kvrt_runtime_close);
    kvrt_backend *b = nullptr;
    if (kvrt_runtime_bind(rt, "cpu", "HND", &b) != KVRT_OK)
        return fail("bind cpu");
    kvrt_layer_entry layers[2] = {{"layer.0", spec}, {"layer.1", spec}};
    kvrt_group group = {layers, 2};
    kvrt_placement *p = nullptr;
    if (kvrt_placement_create(geom.layout, &group, 1, 8, 0, &p) != KVRT_OK)
        return fail("placement");
    kvrt_cache *c = nullptr;
    int rc = kvrt_cache_create(b, p, &c);
    kvrt_placement_destroy(p);
    if (rc != KVRT_OK)
        return fail("cache");

    const uint64_t tokens = 3, row = 2 * 64;
    std::vector<float> k(tokens * row), v(tokens * row), k2(k.size()), v2(v.size());
    for (size_t i = 0; i < k.size(); i++) {
        k[i] = float(i) * 0.5f;
        v[i] = -float(i);
    }
    const int64_t slots[tokens] = {5, 17, 40};
    kvrt_buffer *kb = nullptr, *vb = nullptr;
    if (kvrt_buffer_create(b, k.size() * 4, &kb) != KVRT_OK || kvrt_buffer_create(b, v.size() * 4, &vb) != KVRT_OK ||
        kvrt_buffer_upload(kb, 0, k.data(), k.size() * 4) != KVRT_OK ||
        kvrt_buffer_upload(vb, 0, v.data(), v.size() * 4) != KVRT_OK)
        return fail("buffers");
    if (kvrt_cache_write(c, 1, tokens, slots, kb, 0, vb, 0) != KVRT_OK)
        return fail("write");
    kvrt_buffer_zero(kb, 0, k.size() * 4);
    kvrt_buffer_zero(vb, 0, v.size() * 4);
    if (kvrt_cache_read(c, 1, tokens, slots, kb, 0, vb, 0) != KVRT_OK ||
        kvrt_buffer_download(kb, 0, k2.data(), k2.size() * 4) != KVRT_OK ||
        kvrt_buffer_download(vb, 0, v2.data(), v2.size() * 4) != KVRT_OK)
        return fail("read");
    if (k != k2 || v != v2) {
        std::fprintf(stderr, "consumer: the round trip changed the data\n");
        return 1;
    }
    // Token 1 (slot 17: block 1, offset 1), head 1, element 3 of K through DLPack.
    DLManagedTensor *t = nullptr;
    if (kvrt_cache_export_layer(c, 1, KVRT_VIEW_K, &t) != KVRT_OK)
        return fail("export");
    const DLTensor &d = t->dl_tensor;
    const float *x = static_cast<const float *>(d.data);
    float seen = x[1 * d.strides[0] + 1 * d.strides[1] + 1 * d.strides[2] + 3];
    t->deleter(t);
    if (seen != k[1 * row + 64 + 3]) {
        std::fprintf(stderr, "consumer: the DLPack view shows %g, not %g\n", seen, k[1 * row + 64 + 3]);
        return 1;
    }
    kvrt_buffer_destroy(kb);
    kvrt_buffer_destroy(vb);
    kvrt_cache_destroy(c);
    std::printf("round trip of %llu tokens on cpu: ok (kvrt %s)\n", (unsigned long long)tokens, kvrt_version());
    return 0;
}
