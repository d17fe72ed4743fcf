"""The stores with torch's Python semantics: str or bytes in, bytes out, every method; queues;
TCPStore(master_listen_fd=...); stores written in Python (subclasses of tdist.Store)."""
import gc
import socket
import threading
import time
from datetime import timedelta

import pytest

import tdist as dist
from conftest import WAIT_S, run_ranks


def exercise(store):
    store.set("a", "text")
    store.set("b", b"\x00\xffbytes")
    assert store.get("a") == b"text" and store.get("b") == b"\x00\xffbytes"
    assert store.add("n", 5) == 5 and store.add("n", -2) == 3
    store.append("a", b"+more")
    assert store.get("a") == b"text+more"
    assert store.compare_set("a", "wrong", "x") == b"text+more"
    assert store.compare_set("a", "text+more", "new") == b"new"
    assert store.compare_set("fresh", "", "created") == b"created"
    assert store.check(["a", "b"]) and not store.check(["a", "missing"])
    store.wait(["a", "n"])
    store.wait(["a"], timedelta(seconds=1))
    with pytest.raises(dist.DistStoreError, match="missing"):
        store.wait(["missing"], timedelta(milliseconds=50))
    store.multi_set(["m1", "m2"], ["one", b"two"])
    assert store.multi_get(["m1", "m2", "a"]) == [b"one", b"two", b"new"]
    assert store.num_keys() >= 6
    store.set_timeout(timedelta(milliseconds=50))
    assert store.timeout == timedelta(milliseconds=50)
    with pytest.raises(dist.DistStoreError):
        store.get("never set")
    store.set_timeout(timedelta(seconds=WAIT_S))


def test_hash_store():
    s = dist.HashStore()
    exercise(s)
    n = s.num_keys()
    assert s.delete_key("m1") and not s.delete_key("m1") and s.num_keys() == n - 1


def test_file_store(tmp_path):
    s = dist.FileStore(str(tmp_path / "fs"), 1)
    exercise(s)
    assert s.path == str(tmp_path / "fs")


def test_tcp_store_and_prefix_store():
    master = dist.TCPStore("127.0.0.1", 0, 2, True, timedelta(seconds=WAIT_S), wait_for_workers=False)
    assert master.port > 0 and master.host == "127.0.0.1"
    client = dist.TCPStore(host_name="127.0.0.1", port=master.port, world_size=2, is_master=False,
                           timeout=timedelta(seconds=WAIT_S))
    exercise(client)
    assert master.get("a") == b"new"
    assert client.delete_key("m2") and not master.check(["m2"])
    p = dist.PrefixStore("job", master)
    exercise(p)
    assert master.get("job/a") == b"new" and p.underlying_store is master and p.prefix == "job"
    nested = dist.PrefixStore("inner", p)
    nested.set("k", "v")
    assert client.get("job/inner/k") == b"v"


def test_store_wait_releases_the_gil():
    """A thread sets the key the main thread waits for: possible only if wait releases the GIL."""
    master = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=WAIT_S), wait_for_workers=False)
    started = threading.Event()

    def setter():
        started.wait()
        master.set("late", "1")

    t = threading.Thread(target=setter)
    t.start()
    started.set()
    master.wait(["late"], timedelta(seconds=WAIT_S))
    assert master.get("late") == b"1"
    t.join()


def tcp_store_workers(rank, size):
    import os
    import time

    # spawn picked a free MASTER_PORT; the master waits for every worker (wait_for_workers).
    port = int(os.environ["MASTER_PORT"])
    store = dist.TCPStore("127.0.0.1", port, size, rank == 0, timedelta(seconds=WAIT_S))
    assert store.add("count", 1) <= size
    store.set(f"rank{rank}", str(rank))
    store.wait([f"rank{r}" for r in range(size)])
    assert [store.get(f"rank{r}") for r in range(size)] == [str(r).encode() for r in range(size)]
    store.add("done", 1)
    if rank == 0:  # the server outlives its clients' last requests
        deadline = time.monotonic() + WAIT_S
        while store.add("done", 0) < size:
            assert time.monotonic() < deadline
            time.sleep(0.01)


def test_tcp_store_across_processes():
    run_ranks(tcp_store_workers, 3)


# ---------------------------------------------------------------- queues


def every_store(tmp_path):
    master = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=WAIT_S), wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", master.port, None, False, timedelta(seconds=WAIT_S))
    hash_store = dist.HashStore()
    hash_store.set_timeout(timedelta(seconds=WAIT_S))
    files = str(tmp_path / "fs")
    return [
        ("HashStore", hash_store, hash_store),
        ("FileStore", dist.FileStore(files, -1), dist.FileStore(files, -1)),
        ("TCPStore", master, client),
        ("PrefixStore", dist.PrefixStore("p", master), dist.PrefixStore("p", client)),
        ("DictStore", DictStore(), None),
    ]


def test_queues_on_every_store(tmp_path):
    assert issubclass(dist.QueueEmptyError, dist.DistStoreError)
    for name, store, other in every_store(tmp_path):
        other = other or store
        assert store.queue_len("q") == 0, name
        store.queue_push("q", "one")
        other.queue_push("q", b"\x00two")
        assert store.queue_len("q") == 2 and other.queue_len("q") == 2, name
        assert other.queue_pop("q") == b"one", name
        assert store.queue_pop("q", block=False) == b"\x00two", name
        with pytest.raises(dist.QueueEmptyError, match="'(p/)?q'.*empty"):
            store.queue_pop("q", block=False)
        start = time.monotonic()
        with pytest.raises(dist.DistStoreError, match="'(p/)?q'.*timed out") as e:
            store.queue_pop("q", timeout=timedelta(milliseconds=200))
        assert not isinstance(e.value, dist.QueueEmptyError), name
        # It waited (a lower bound only: a coarse clock may end it a few ms early).
        assert time.monotonic() - start >= 0.15, name
        # The pop that timed out took nothing: the next value goes to the next pop.
        other.queue_push("q", "after")
        assert store.queue_pop("q", True) == b"after" and store.queue_len("q") == 0, name


def test_blocked_queue_pop_gets_a_later_push_from_another_thread():
    master = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=WAIT_S), wait_for_workers=False)

    def pusher():
        time.sleep(0.1)  # usually after the pop blocks (which must release the GIL); either order is valid
        master.queue_push("later", "v")

    t = threading.Thread(target=pusher)
    t.start()
    assert master.queue_pop("later", timeout=timedelta(seconds=WAIT_S)) == b"v"
    t.join()


def queue_ranks(rank, size):
    """Ranks 1-2 push 50 values each, ranks 3-4 pop with short timeouts (retried) until a stop."""
    import os

    port = int(os.environ["MASTER_PORT"])
    store = dist.TCPStore("127.0.0.1", port, size, rank == 0, timedelta(seconds=WAIT_S))
    pushers, poppers, items = [1, 2], [3, 4], 50
    if rank in pushers:
        for i in range(items):
            store.queue_push("jobs", f"{rank}:{i}")
        store.set(f"pushed/{rank}", "1")
    elif rank in poppers:
        got = []
        while True:
            try:
                v = store.queue_pop("jobs", timeout=timedelta(milliseconds=30))
            except dist.DistStoreError:
                continue  # timed out: took nothing
            if v == b"stop":
                break
            got.append(v.decode())
        store.set(f"popped/{rank}", "\n".join(got))
    else:
        store.wait([f"pushed/{r}" for r in pushers])
        for _ in poppers:
            store.queue_push("jobs", "stop")  # behind every value
        seen = []
        for r in poppers:
            got = [v for v in store.get(f"popped/{r}").decode().split("\n") if v]
            for who in pushers:  # each popper sees each pusher's values in order
                mine = [int(v.split(":")[1]) for v in got if v.startswith(f"{who}:")]
                assert mine == sorted(mine), (r, who, mine)
            seen += got
        assert sorted(seen) == sorted(f"{w}:{i}" for w in pushers for i in range(items)), "lost or doubled"
        assert store.queue_len("jobs") == 0


def test_queue_across_processes():
    run_ranks(queue_ranks, 5)


# ---------------------------------------------------------------- master_listen_fd


def test_tcp_store_master_listen_fd():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    master = dist.TCPStore("127.0.0.1", port, 1, True, timedelta(seconds=WAIT_S), master_listen_fd=sock.detach())
    assert master.port == port
    client = dist.TCPStore("127.0.0.1", port, None, False, timedelta(seconds=WAIT_S))
    client.set("k", "v")
    assert master.get("k") == b"v"
    del client, master
    gc.collect()
    again = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # the store closed the socket it took over
    again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    again.bind(("127.0.0.1", port))
    again.listen()
    again.close()
    # Bound to another port than the one given.
    other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    other.bind(("127.0.0.1", 0))
    wrong = other.getsockname()[1] + 1
    with pytest.raises(ValueError, match="expected to be bound to port"):
        dist.TCPStore("127.0.0.1", wrong, 1, True, timedelta(seconds=5), master_listen_fd=other.detach())


# ---------------------------------------------------------------- stores written in Python


def _b(v):
    return v if isinstance(v, bytes) else v.encode()


class DictStore(dist.Store):
    """A store in a dict, as a user would write one (torch allows subclassing Store). Called from
    C++ its values are bytes; called from Python, whatever the caller passed."""

    def __init__(self):
        super().__init__()
        self.data = {}
        self.cv = threading.Condition()

    def _present(self, keys):
        return all(k in self.data for k in keys)

    def set(self, key, value):
        with self.cv:
            self.data[key] = _b(value)
            self.cv.notify_all()

    def get(self, key):
        self.wait([key])
        with self.cv:
            return self.data[key]

    def add(self, key, amount):
        with self.cv:
            n = int(self.data.get(key, b"0")) + amount
            self.data[key] = str(n).encode()
            self.cv.notify_all()
            return n

    def compare_set(self, key, expected, desired):
        with self.cv:
            cur, expected, desired = self.data.get(key), _b(expected), _b(desired)
            if (cur is None and expected == b"") or cur == expected:
                self.data[key] = desired
                self.cv.notify_all()
                return desired
            return expected if cur is None else cur

    def check(self, keys):
        with self.cv:
            return self._present(keys)

    def wait(self, keys, timeout=None):
        t = (self.timeout if timeout is None else timeout).total_seconds()
        with self.cv:
            if not self.cv.wait_for(lambda: self._present(keys), t):
                raise dist.DistStoreError(f"DictStore: wait({keys}) timed out")

    def delete_key(self, key):
        with self.cv:
            return self.data.pop(key, None) is not None

    def num_keys(self):
        with self.cv:
            return len(self.data)


def test_python_store_methods():
    s = DictStore()
    s.set_timeout(timedelta(seconds=WAIT_S))
    exercise(s)  # its own methods, and the ones derived from them (append, multi_get, multi_set)
    # Through C++: a PrefixStore calls the Python methods; their errors come back as they were raised.
    p = dist.PrefixStore("job", s)
    p.set("k", "v")
    p.append("k", "+w")
    assert s.data["job/k"] == b"v+w" and p.get("k") == b"v+w"
    assert p.compare_set("k", "v+w", "x") == b"x" and p.add("n", 3) == 3 and p.check(["k", "n"])
    assert p.multi_get(["k", "n"]) == [b"x", b"3"] and p.delete_key("k") and not p.check(["k"])
    with pytest.raises(dist.DistStoreError, match="DictStore: wait"):
        p.wait(["never"], timedelta(milliseconds=50))

    class Broken(DictStore):
        def get(self, key):
            raise KeyError(key)

    with pytest.raises(KeyError):
        dist.PrefixStore("x", Broken()).get("k")

    class Partial(dist.Store):
        def set(self, key, value):
            pass

    with pytest.raises(NotImplementedError, match="get"):
        dist.PrefixStore("x", Partial()).get("k")


def test_python_store_kept_alive_while_cpp_holds_it():
    p = dist.PrefixStore("job", DictStore())  # the only reference to the DictStore is C++'s
    gc.collect()
    p.set("k", "v")
    assert p.get("k") == b"v" and p.underlying_store.data == {"job/k": b"v"}


def test_python_store_queue_on_threads():
    s = DictStore()
    s.set_timeout(timedelta(seconds=WAIT_S))
    pushers, poppers, items = 3, 3, 30
    got = [[] for _ in range(poppers)]

    def pop(p):
        while (v := s.queue_pop("q")) != b"stop":
            got[p].append(v.decode())

    threads = [threading.Thread(target=pop, args=(p,)) for p in range(poppers)]
    pushing = [threading.Thread(target=lambda w=w: [s.queue_push("q", f"{w}:{i}") for i in range(items)])
               for w in range(pushers)]
    for t in threads + pushing:
        t.start()
    for t in pushing:
        t.join()
    for _ in range(poppers):
        s.queue_push("q", "stop")
    for t in threads:
        t.join(WAIT_S)
        assert not t.is_alive()
    for p in range(poppers):
        for w in range(pushers):
            mine = [int(v.split(":")[1]) for v in got[p] if v.startswith(f"{w}:")]
            assert mine == sorted(mine)
    assert sorted(v for g in got for v in g) == sorted(f"{w}:{i}" for w in range(pushers) for i in range(items))


def test_python_store_runs_a_world_of_one():
    import numpy as np

    # The store passed here has no other reference: C++ keeps it alive.
    dist.init_process_group("gloo", store=DictStore(), rank=0, world_size=1, timeout=timedelta(seconds=WAIT_S))
    try:
        gc.collect()
        t = np.arange(4, dtype=np.float32)
        dist.all_reduce(t)
        assert t.tolist() == [0, 1, 2, 3] and dist.get_world_size() == 1 and dist.get_rank() == 0
        g = dist.new_group([0])
        dist.broadcast(t, src=0, group=g)
        dist.barrier()
    finally:
        dist.destroy_process_group()


class Delegating(dist.Store):
    """A Python store over a TCPStore: every call goes through Python."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def set(self, key, value):
        self.inner.set(key, value)

    def get(self, key):
        return self.inner.get(key)

    def add(self, key, amount):
        return self.inner.add(key, amount)

    def compare_set(self, key, expected, desired):
        return self.inner.compare_set(key, expected, desired)

    def check(self, keys):
        return self.inner.check(keys)

    def wait(self, keys, timeout=None):
        self.inner.wait(keys, timeout)

    def delete_key(self, key):
        return self.inner.delete_key(key)

    def num_keys(self):
        return self.inner.num_keys()


def python_store_world(rank, size):
    import os

    import numpy as np

    tcp = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), size, rank == 0, timedelta(seconds=WAIT_S))
    dist.init_process_group("gloo", store=Delegating(tcp), rank=rank, world_size=size,
                            timeout=timedelta(seconds=WAIT_S))
    t = np.full(3, rank + 1, dtype=np.int64)
    dist.all_reduce(t)
    assert t.tolist() == [size * (size + 1) // 2] * 3
    dist.barrier()
    dist.destroy_process_group()


def test_python_store_runs_a_world_of_processes():
    run_ranks(python_store_world, 2)
