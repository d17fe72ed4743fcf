"""A store that hands every call to another store: the base of the adapters between tdist's and
torch's stores (tdist.torch serves tdistrun's store to torch). Listed first among the bases, its methods are the overrides the other
base's C++ side calls."""


class ForwardingStore:
    def __init__(self, store):
        super().__init__()
        self._store = store

    def set(self, key, value):
        self._store.set(key, value)

    def get(self, key):
        return self._store.get(key)

    def add(self, key, amount):
        return self._store.add(key, amount)

    def compare_set(self, key, expected, desired):
        return self._store.compare_set(key, expected, desired)

    def check(self, keys):
        return self._store.check(keys)

    def wait(self, keys, timeout=None):
        if timeout is None:
            self._store.wait(keys)
        else:
            self._store.wait(keys, timeout)

    def delete_key(self, key):
        return self._store.delete_key(key)

    def num_keys(self):
        return self._store.num_keys()

    def set_timeout(self, timeout):
        self._store.set_timeout(timeout)
