// The key-value stores with torch's Python semantics: keys are str, values
// are bytes (get returns bytes; set accepts str or bytes), timeouts are
// datetime.timedelta (or seconds). Every call may block on the network or a
// file lock, so each one releases the GIL. tdist.Store may be subclassed in
// Python (PyStore, py_store.h).
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include <tdist/errors.h>
#include <tdist/store.h>

#include "args.h"
#include "common.h"
#include "errors.h"

namespace tdist_py {
namespace {

using ms = std::chrono::milliseconds;

// str -> UTF-8, bytes/bytearray/memoryview -> their bytes.
std::string to_bytes(py::handle v, const char* what) {
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<py::bytes>(v)) return v.cast<std::string>();
  if (PyObject_CheckBuffer(v.ptr())) {
    auto b = py::reinterpret_steal<py::object>(PyBytes_FromObject(v.ptr()));
    if (!b) throw py::error_already_set();
    return b.cast<std::string>();
  }
  throw py::type_error(std::string(what) + ": expected str or bytes, got " + py::str(py::type::of(v)).cast<std::string>());
}

std::vector<std::string> to_bytes_list(const py::sequence& values, const char* what) {
  std::vector<std::string> out;
  for (py::handle v : values) out.push_back(to_bytes(v, what));
  return out;
}

// The Python override `name` of a PyStore, or none. The GIL must be held.
py::function override_of(const tdist::Store* self, const char* name) { return py::get_override(self, name); }

[[noreturn]] void not_implemented(const char* name) {
  PyErr_SetString(PyExc_NotImplementedError,
                  (std::string("this tdist.Store subclass does not implement ") + name + "()").c_str());
  throw py::error_already_set();
}

// Calls the Python override `name` with args, the GIL held; a tdist error it
// raises comes back as its C++ type (see errors.h).
template <typename... Args>
py::object call_python(const py::function& f, Args&&... args) {
  try {
    return f(std::forward<Args>(args)...);
  } catch (py::error_already_set& e) {
    throw_as_cpp_if_dist_error(e);
    throw;
  }
}

template <typename... Args>
py::object call_required(const tdist::Store* self, const char* name, Args&&... args) {
  py::gil_scoped_acquire gil;
  py::function f = override_of(self, name);
  if (!f) not_implemented(name);
  return call_python(f, std::forward<Args>(args)...);
}

}  // namespace

// ---------------------------------------------------------------- PyStore

// Each method holds the GIL from before it makes its Python arguments until
// its Python results are gone.
void PyStore::set(const std::string& key, const std::string& value) {
  py::gil_scoped_acquire gil;
  call_required(this, "set", key, py::bytes(value));
}

std::string PyStore::get(const std::string& key) {
  py::gil_scoped_acquire gil;
  return to_bytes(call_required(this, "get", key), "Store.get's result");
}

int64_t PyStore::add(const std::string& key, int64_t amount) {
  py::gil_scoped_acquire gil;
  return call_required(this, "add", key, amount).cast<int64_t>();
}

void PyStore::append(const std::string& key, const std::string& value) {
  {
    py::gil_scoped_acquire gil;
    if (py::function f = override_of(this, "append")) {
      call_python(f, key, py::bytes(value));
      return;
    }
  }
  // As torch's Store::append: compare_set from what the key holds (nothing
  // at first) to that plus value, until no one came in between.
  std::string expected = value;
  std::string current = compare_set(key, "", expected);
  while (current != expected) {
    expected = current + value;
    current = compare_set(key, current, expected);
  }
}

std::string PyStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  py::gil_scoped_acquire gil;
  return to_bytes(call_required(this, "compare_set", key, py::bytes(expected), py::bytes(desired)),
                  "Store.compare_set's result");
}

bool PyStore::check(const std::vector<std::string>& keys) {
  py::gil_scoped_acquire gil;
  return call_required(this, "check", keys).cast<bool>();
}

void PyStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  py::gil_scoped_acquire gil;
  call_required(this, "wait", keys, timeout);
}

bool PyStore::delete_key(const std::string& key) {
  py::gil_scoped_acquire gil;
  py::object r = call_required(this, "delete_key", key);
  return r.is_none() || r.cast<bool>();
}

int64_t PyStore::num_keys() {
  py::gil_scoped_acquire gil;
  return call_required(this, "num_keys").cast<int64_t>();
}

std::vector<std::string> PyStore::multi_get(const std::vector<std::string>& keys) {
  {
    py::gil_scoped_acquire gil;
    if (py::function f = override_of(this, "multi_get")) {
      std::vector<std::string> out;
      for (py::handle v : call_python(f, keys)) out.push_back(to_bytes(v, "Store.multi_get's result"));
      return out;
    }
  }
  return Store::multi_get(keys);
}

void PyStore::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  {
    py::gil_scoped_acquire gil;
    if (py::function f = override_of(this, "multi_set")) {
      py::list vs;
      for (const auto& v : values) vs.append(py::bytes(v));
      call_python(f, keys, vs);
      return;
    }
  }
  Store::multi_set(keys, values);
}

void PyStore::queue_push(const std::string& key, const std::string& value) {
  {
    py::gil_scoped_acquire gil;
    if (py::function f = override_of(this, "queue_push")) {
      call_python(f, key, py::bytes(value));
      return;
    }
  }
  Store::queue_push(key, value);
}

std::string PyStore::queue_pop(const std::string& key, bool block, std::chrono::milliseconds timeout) {
  {
    py::gil_scoped_acquire gil;
    if (py::function f = override_of(this, "queue_pop")) {
      // torch's signature is queue_pop(key, block); a timeout of its own is passed by name.
      py::object r = timeout == this->timeout() ? call_python(f, key, block)
                                                : call_python(f, key, block, py::arg("timeout") = timeout);
      return to_bytes(r, "Store.queue_pop's result");
    }
  }
  return Store::queue_pop(key, block, timeout);
}

int64_t PyStore::queue_len(const std::string& key) {
  {
    py::gil_scoped_acquire gil;
    if (py::function f = override_of(this, "queue_len")) return call_python(f, key).cast<int64_t>();
  }
  return Store::queue_len(key);
}

std::vector<std::string> PyStore::list_keys() {
  {
    py::gil_scoped_acquire gil;
    if (py::function f = override_of(this, "list_keys")) {
      std::vector<std::string> out;
      for (py::handle k : call_python(f)) out.push_back(to_bytes(k, "Store.list_keys's result"));
      return out;
    }
  }
  return Store::list_keys();
}

std::shared_ptr<tdist::Store> PyStore::clone() {
  {
    py::gil_scoped_acquire gil;
    if (py::function f = override_of(this, "clone")) return call_python(f).cast<std::shared_ptr<tdist::Store>>();
  }
  return Store::clone();
}

std::shared_ptr<tdist::Store> keep_python_alive(std::shared_ptr<tdist::Store> held, py::handle self) {
  PyObject* obj = self.ptr();
  Py_INCREF(obj);
  // The last C++ holder may let go on any thread, with or without the GIL;
  // at interpreter exit the reference is left (the process is ending).
  std::shared_ptr<void> life(obj, [](void* p) {
#if PY_VERSION_HEX >= 0x030D0000
    if (!Py_IsInitialized() || Py_IsFinalizing()) return;
#else
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
#endif
    py::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(p));
  });
  // The alias keeps the object (which keeps `held`) and points at the store.
  return std::shared_ptr<tdist::Store>(std::move(life), held.get());
}

void bind_stores(py::module_& m) {
  using tdist::Store;
  py::class_<Store, PyStore, std::shared_ptr<Store>>(m, "Store",
      "Base of the key-value stores (torch.distributed.Store). May be subclassed in Python: call "
      "super().__init__() and define set, get, add, compare_set, check, wait(keys, timeout), "
      "delete_key and num_keys (append, multi_get, multi_set and the queue methods are derived from "
      "them unless defined); such a store can be passed wherever a store is accepted.")
      .def(py::init<>())
      .def("set",
           [](Store& s, const std::string& key, py::handle value) {
             std::string v = to_bytes(value, "Store.set value");
             py::gil_scoped_release nogil;
             s.set(key, v);
           },
           py::arg("key"), py::arg("value"), "Writes key = value (str or bytes), replacing any old value.")
      .def("get",
           [](Store& s, const std::string& key) {
             std::string v;
             {
               py::gil_scoped_release nogil;
               v = s.get(key);
             }
             return py::bytes(v);
           },
           py::arg("key"), "Waits (up to the store's timeout) until key exists and returns its value as bytes.")
      .def("add",
           [](Store& s, const std::string& key, int64_t amount) {
             py::gil_scoped_release nogil;
             return s.add(key, amount);
           },
           py::arg("key"), py::arg("amount"), "Adds amount to the counter key (created at 0); returns the new value.")
      .def("append",
           [](Store& s, const std::string& key, py::handle value) {
             std::string v = to_bytes(value, "Store.append value");
             py::gil_scoped_release nogil;
             s.append(key, v);
           },
           py::arg("key"), py::arg("value"), "Appends value to key, creating it when missing.")
      .def("compare_set",
           [](Store& s, const std::string& key, py::handle expected, py::handle desired) {
             std::string e = to_bytes(expected, "Store.compare_set expected_value");
             std::string d = to_bytes(desired, "Store.compare_set desired_value");
             std::string out;
             {
               py::gil_scoped_release nogil;
               out = s.compare_set(key, e, d);
             }
             return py::bytes(out);
           },
           py::arg("key"), py::arg("expected_value"), py::arg("desired_value"),
           "Sets key to desired_value if it holds expected_value (or is missing and expected_value is "
           "empty); returns the value it holds afterwards.")
      .def("check",
           [](Store& s, const std::vector<std::string>& keys) {
             py::gil_scoped_release nogil;
             return s.check(keys);
           },
           py::arg("keys"), "True when every key exists; never waits.")
      .def("wait",
           [](Store& s, const std::vector<std::string>& keys, const py::object& timeout_arg) {
             auto timeout = to_timeout(timeout_arg, "Store.wait");
             py::gil_scoped_release nogil;
             if (timeout) {
               s.wait(keys, *timeout);
             } else {
               s.wait(keys);
             }
           },
           py::arg("keys"), py::arg("timeout") = py::none(),
           "Waits until every key exists; DistStoreError listing the missing keys after the timeout "
           "(default: the store's).")
      .def("delete_key",
           [](Store& s, const std::string& key) {
             py::gil_scoped_release nogil;
             return s.delete_key(key);
           },
           py::arg("key"), "Removes key; returns whether it existed (FileStore: DistStoreError, as in torch).")
      .def("num_keys",
           [](Store& s) {
             py::gil_scoped_release nogil;
             return s.num_keys();
           },
           "The number of keys in the store.")
      .def("multi_get",
           [](Store& s, const std::vector<std::string>& keys) {
             std::vector<std::string> values;
             {
               py::gil_scoped_release nogil;
               values = s.multi_get(keys);
             }
             py::list out;
             for (const auto& v : values) out.append(py::bytes(v));
             return out;
           },
           py::arg("keys"), "Waits for every key like get; returns their values (bytes) in order.")
      .def("multi_set",
           [](Store& s, const std::vector<std::string>& keys, const py::sequence& values) {
             std::vector<std::string> vs = to_bytes_list(values, "Store.multi_set values");
             py::gil_scoped_release nogil;
             s.multi_set(keys, vs);
           },
           py::arg("keys"), py::arg("values"), "Sets keys[i] = values[i] for every i.")
      .def("queue_push",
           [](Store& s, const std::string& key, py::handle value) {
             std::string v = to_bytes(value, "Store.queue_push value");
             py::gil_scoped_release nogil;
             s.queue_push(key, v);
           },
           py::arg("key"), py::arg("value"), "Appends value (str or bytes) to the queue under key.")
      .def("queue_pop",
           [](Store& s, const std::string& key, bool block, const py::object& timeout_arg) {
             auto timeout = to_timeout(timeout_arg, "Store.queue_pop");
             std::string v;
             {
               py::gil_scoped_release nogil;
               v = timeout ? s.queue_pop(key, block, *timeout) : s.queue_pop(key, block);
             }
             return py::bytes(v);
           },
           py::arg("key"), py::arg("block") = true, py::arg("timeout") = py::none(),
           "Removes and returns (bytes) the oldest value of the queue under key. block: waits up to timeout "
           "(default: the store's) for one, then DistStoreError; block=False: QueueEmptyError when empty.")
      .def("queue_len",
           [](Store& s, const std::string& key) {
             py::gil_scoped_release nogil;
             return s.queue_len(key);
           },
           py::arg("key"), "The number of values in the queue under key.")
      .def("list_keys",
           [](Store& s) {
             std::vector<std::string> keys;
             {
               py::gil_scoped_release nogil;
               keys = s.list_keys();
             }
             py::list out;  // str, as torch's; a key that is not UTF-8 keeps its bytes as surrogates
             for (const auto& k : keys) {
               PyObject* key = PyUnicode_DecodeUTF8(k.data(), static_cast<Py_ssize_t>(k.size()), "surrogateescape");
               if (key == nullptr) throw py::error_already_set();
               out.append(py::reinterpret_steal<py::object>(key));
             }
             return out;
           },
           "Every key the store holds, in no particular order (torch's list_keys); as num_keys, without "
           "the store's internal keys.")
      .def("clone",
           [](Store& s) {
             py::gil_scoped_release nogil;
             return s.clone();
           },
           "Another handle on the same data, for another thread (torch's clone): TCPStore connects again; "
           "PrefixStore clones its store; HashStore shares its table; FileStore opens the file again.")
      .def("has_extended_api", &Store::has_extended_api)
      .def("set_timeout", &Store::set_timeout, py::arg("timeout"), "The default timeout of get and wait.")
      .def_property_readonly("timeout", &Store::timeout, "The default timeout of get and wait (timedelta).");

  py::class_<tdist::HashStore, Store, std::shared_ptr<tdist::HashStore>>(m, "HashStore",
      "An in-memory store for the threads of one process.")
      .def(py::init<>());

  py::class_<tdist::FileStore, Store, std::shared_ptr<tdist::FileStore>>(m, "FileStore",
      "A store in a file shared by processes (fcntl locks). The last of world_size users to close it "
      "removes the file; world_size=-1 leaves it.")
      .def(py::init([](const std::string& file_name, int world_size) {
             py::gil_scoped_release nogil;
             return std::make_shared<tdist::FileStore>(file_name, world_size);
           }),
           py::arg("file_name"), py::arg("world_size") = -1)
      .def_property_readonly("path", &tdist::FileStore::path);

  py::class_<tdist::TCPStore, Store, std::shared_ptr<tdist::TCPStore>>(m, "TCPStore",
      "A store served over TCP by the instance with is_master=True (port 0 picks a free port: read it "
      "back from .port). world_size counts the users; with wait_for_workers the master waits for them. "
      "master_listen_fd: the master serves on this already bound socket (port 0 or its port) and takes "
      "it over (pass socket.detach()). protocol=\"torch\": a client of torch.distributed's TCPStore server "
      "(torchrun's agent store), in torch's protocol.")
      .def(py::init([](const std::string& host_name, int port, std::optional<int> world_size, bool is_master,
                       ms timeout, bool wait_for_workers, bool multi_tenant, std::optional<int> master_listen_fd,
                       bool /*use_libuv*/, const std::string& protocol) {
             if (port < 0 || port > 65535) throw py::value_error("TCPStore: port " + std::to_string(port) + " is out of range");
             if (protocol != "tdist" && protocol != "torch")
               throw tdist::DistValueError("TCPStore: protocol '" + protocol + "' is neither \"tdist\" nor \"torch\"");
             py::gil_scoped_release nogil;
             return std::make_shared<tdist::TCPStore>(
                 host_name, static_cast<uint16_t>(port),
                 tdist::TCPStoreOptions{.world_size = world_size,
                                        .is_master = is_master,
                                        .timeout = timeout,
                                        .wait_for_workers = wait_for_workers,
                                        .multi_tenant = multi_tenant,
                                        .master_listen_fd = master_listen_fd,
                                        .protocol = protocol == "torch" ? tdist::StoreProtocol::kTorch
                                                                        : tdist::StoreProtocol::kTdist});
           }),
           py::arg("host_name"), py::arg("port"), py::arg("world_size") = py::none(), py::arg("is_master") = false,
           py::arg("timeout") = tdist::kDefaultStoreTimeout, py::arg("wait_for_workers") = true,
           py::arg("multi_tenant") = false, py::arg("master_listen_fd") = py::none(),
           py::arg("use_libuv") = true,  // torch's choice of server loop: ours has one
           py::arg("protocol") = "tdist")
      .def_property_readonly("host", &tdist::TCPStore::host)
      .def_property_readonly("port", &tdist::TCPStore::port);

  py::class_<tdist::PrefixStore, Store, std::shared_ptr<tdist::PrefixStore>>(m, "PrefixStore",
      "Prepends \"prefix/\" to every key of another store.")
      .def(py::init<std::string, std::shared_ptr<Store>>(), py::arg("prefix"), py::arg("store"))
      .def_property_readonly("underlying_store", &tdist::PrefixStore::underlying_store)
      .def_property_readonly("prefix", &tdist::PrefixStore::prefix);
}

}  // namespace tdist_py
