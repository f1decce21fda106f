"""Model files through libkvrt (kvrt/model.h): a Hugging Face config.json,
a folder holding one, or a kvrt model file, sized as vLLM sizes it.  The
keywords are the tool's options: kv_cache_dtype, block_size,
attention_backend, max_model_len, max_num_batched_tokens."""
import ctypes as C
import os

from . import _lib
from ._errors import InvalidArgumentError
from ._lib import lib, check, json_answer


def whole(name, value, low=1, high=(1 << 63) - 1):
    """`value` as an int from low to high, else InvalidArgumentError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgumentError("%s %r is not a whole number from %d to %d" % (name, value, low, high))
    return value


class Model:
    """An open model file (use as a context manager): its libkvrt handle and
    description."""

    def __init__(self, path, kv_cache_dtype=None, block_size=None, attention_backend=None):
        self._h = C.c_void_p()
        if not isinstance(path, (str, bytes, os.PathLike)):
            raise InvalidArgumentError("model: a path to a config.json, a model folder or a kvrt model file; got %s"
                                       % type(path).__name__)
        opts = _lib.ModelOptions()
        lib.kvrt_model_options_default(C.byref(opts))
        if kv_cache_dtype is not None:
            out = C.c_int()
            check(lib.kvrt_kv_cache_dtype_parse(str(kv_cache_dtype).encode(), C.byref(out)))
            opts.kv_cache_dtype = out.value
        if attention_backend is not None:
            out = C.c_int()
            check(lib.kvrt_attention_backend_parse(str(attention_backend).encode(), C.byref(out)))
            opts.attention_backend = out.value
        if block_size is not None:
            opts.block_size = whole("block_size", block_size)
        check(lib.kvrt_model_open(os.fsencode(path), C.byref(opts), C.byref(self._h)))
        self.info = lib.kvrt_model_get_info(self._h).contents

    def close(self):
        if self._h:
            h, self._h = self._h, C.c_void_p()
            lib.kvrt_model_destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    @property
    def mixed_shapes(self):
        return bool(lib.kvrt_model_mixed_shapes(self._h))

    def layers(self):
        """[(name, Spec)] of every layer, group by group; the specs are copies."""
        out = []
        for g in range(self.info.num_groups):
            grp = self.info.groups[g]
            for i in range(grp.num_layers):
                entry = grp.layers[i]
                out.append((entry.name, _lib.Spec.from_buffer_copy(entry.spec)))
        return out

    def plan(self, layout, layout_source, blocks=None, memory=None, kernel_block_size=0, max_model_len=None,
             max_num_batched_tokens=None):
        """libkvrt's plan as a dict: ``kvrt plan --model FILE --json``."""
        req = _lib.ModelPlanRequest()
        lib.kvrt_model_plan_request_default(C.byref(req))
        req.layout, req.layout_source = layout, layout_source.encode()
        req.num_blocks = 1 if blocks is None else whole("blocks", blocks)
        req.budget_bytes = 0 if memory is None else whole("memory", memory)
        req.kernel_block_size = whole("kernel_block_size", kernel_block_size, low=0)
        # Named as the tool's options, so the result equals its JSON.
        if max_model_len is not None:
            req.max_model_len = whole("max_model_len", max_model_len, high=(1 << 32) - 1)
            req.max_model_len_source = b"--max-model-len"
        if max_num_batched_tokens is not None:
            req.batched_tokens = whole("max_num_batched_tokens", max_num_batched_tokens, high=(1 << 32) - 1)
            req.batched_tokens_source = b"--max-num-batched-tokens"
        return json_answer(lib.kvrt_model_plan_json, self._h, C.byref(req))
