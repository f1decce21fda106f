"""The lifetime protocol shared by every object that owns a libkvrt handle or
a borrowed DLPack tensor: close() is idempotent, ``with`` closes on exit, and
the garbage collector closes what the user forgot (quietly: during interpreter
shutdown the library may already be gone, and __del__ must not raise)."""


class Closeable:
    def close(self):
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
