"""torch.utils.hooks' RemovableHandle: what the register_*hook functions return."""


class RemovableHandle:
    """remove() takes the hook away (also on leaving a `with` block); `id` names it. `remove_hook(id)` is
    what removing means where the hook is kept (a module's dict of hooks, a tensor's graph)."""

    _next_id = 0

    def __init__(self, remove_hook, id=None):
        if id is None:
            id, RemovableHandle._next_id = RemovableHandle._next_id, RemovableHandle._next_id + 1
        self.id = id
        self._remove_hook = remove_hook

    def remove(self):
        if self._remove_hook is not None:
            self._remove_hook(self.id)
            self._remove_hook = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
