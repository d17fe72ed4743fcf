"""The stores with torch's Python semantics: str or bytes in, bytes out, every method."""
import threading
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
