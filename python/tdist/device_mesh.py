"""torch.distributed.device_mesh: `from tdist.device_mesh import DeviceMesh, init_device_mesh`.

DeviceMesh is the C++ one (tdist._tdist); what is written here in Python: init_device_mesh's
backend_override (a backend per dimension), DeviceMesh._flatten and the flattened dimensions a root
mesh keeps (mesh["dp_tp"], mesh.get_group("dp_tp")).
"""
import math
from itertools import product

import numpy as np

from . import _tdist
from ._tdist import DeviceMesh  # noqa: F401


def _normalize_backend_override(backend_override, ndim, mesh_dim_names):
    """torch's rules: one entry per dimension, by index or by name (not both); a value is a backend
    name, (name, options) or options. Returns one backend name (or None) per dimension."""
    left = dict(backend_override)
    names = tuple(mesh_dim_names or ())
    out = []
    for dim in range(ndim):
        name = names[dim] if dim < len(names) else None
        if name is not None and name in left:
            if dim in left:
                raise RuntimeError(f"Found redundant dim index {dim} and name {name} in backend_override")
            value = left.pop(name)
        elif dim in left:
            value = left.pop(dim)
        else:
            out.append(None)
            continue
        if isinstance(value, tuple):
            if len(value) != 2:
                raise RuntimeError(f"backend_override[{dim}]: expected (backend, options), got {value!r}")
            value = value[0]
        out.append(value if isinstance(value, str) else None)  # options alone: the default backend
    if left:
        raise RuntimeError(f"Found invalid keys in backend_override: got {list(left.keys())}, "
                           f"expected integers in range [0, {ndim}) or one of {names}")
    return out


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    """torch's init_device_mesh: ranks 0..prod(mesh_shape)-1 laid out row-major, one group per
    dimension (initializes the default group from the environment if needed). backend_override
    ({dim index or name: backend, (backend, options) or options}) makes that dimension's groups
    with the backend named (options are not used: tdist has no per-group options)."""
    if not backend_override:
        return _tdist.init_device_mesh(device_type, list(mesh_shape), mesh_dim_names=mesh_dim_names)
    shape = [int(s) for s in mesh_shape]
    backends = _normalize_backend_override(backend_override, len(shape), mesh_dim_names)
    if not _tdist.is_initialized():
        _tdist.init_process_group("gloo" if device_type == "cpu" else f"cpu:tdist,{device_type}:nccl")
    world = _tdist.get_world_size()
    if math.prod(shape) != world:
        raise _tdist.DistValueError(f"init_device_mesh: mesh_shape {tuple(shape)} holds {math.prod(shape)} ranks but "
                                    f"the world size is {world} (the product of mesh_shape must equal the world size)")
    me = _tdist.get_rank()
    coordinate = []
    rest = me
    for size in reversed(shape):
        coordinate.insert(0, rest % size)
        rest //= size
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    mine = []
    # As the C++ DeviceMesh: dimensions in order; for each, the rows along it in row-major order of
    # the other coordinates. Every rank makes every group, in the same order.
    for dim, backend in enumerate(backends):
        others = [k for k in range(len(shape)) if k != dim]
        for at in product(*(range(shape[k]) for k in others)):
            base = sum(strides[k] * c for k, c in zip(others, at))
            ranks = [base + strides[dim] * i for i in range(shape[dim])]
            if backend is None and len(ranks) == world:
                g = _tdist._get_default_group()
            else:
                g = _tdist.new_group(ranks, backend=backend)
            if all(coordinate[k] == c for k, c in zip(others, at)):
                mine.append(g)
    mesh = np.arange(world, dtype=np.int64).reshape(shape)
    return DeviceMesh.from_group(mine, device_type, mesh, mesh_dim_names=mesh_dim_names)


# torch keeps a mesh's flattened dimensions on its root mesh (the one init_device_mesh or
# DeviceMesh() made: _flatten_mapping), and every mesh sliced or flattened from it knows that root
# (_root_mesh); so do these, as attributes of the Python objects.


def _get_root_mesh(self):
    """torch's DeviceMesh._get_root_mesh: the mesh this one was sliced or flattened from (itself
    for a mesh that init_device_mesh or DeviceMesh() made)."""
    root = getattr(self, "_root_mesh", None)
    return self if root is None else root


def _flatten_mapping(mesh):
    return getattr(mesh, "_flatten_mapping", {})


def _getitem(self, mesh_dim_names):
    """torch's mesh[names]: the sub-mesh of the named dimensions through this rank; on a root mesh
    a flattened dimension's name (mesh["dp_tp"] after mesh["dp", "tp"]._flatten()) gives the
    flattened mesh."""
    names = (mesh_dim_names,) if isinstance(mesh_dim_names, str) else tuple(mesh_dim_names)
    if self.mesh_dim_names and names == tuple(self.mesh_dim_names):
        return self
    flattened = _flatten_mapping(self)
    if len(names) == 1 and names[0] in flattened:
        return flattened[names[0]]
    if any(n in flattened for n in names):
        raise RuntimeError(f"Cannot slice {names}: a flattened dimension ({', '.join(n for n in names if n in flattened)}) "
                           f"is taken alone (mesh[name]), not with others")
    sub = _slice(self, list(names))
    sub._root_mesh = _get_root_mesh(self)
    return sub


def _get_group(self, mesh_dim=None):
    """torch's get_group: a dimension by index or name, a flattened one of the root mesh by name."""
    if isinstance(mesh_dim, str):
        flat = _flatten_mapping(_get_root_mesh(self)).get(mesh_dim)
        if flat is not None and mesh_dim not in (self.mesh_dim_names or ()):
            return flat.get_group()
    return _group_of(self, mesh_dim)


def _flatten(self, mesh_dim_name=None, backend_override=None):
    """torch's DeviceMesh._flatten: this (sub)mesh as a 1-D mesh named mesh_dim_name (default: the
    names joined by "_"), over one group of its ranks, registered on the root mesh: afterwards
    root[mesh_dim_name] and root.get_group(mesh_dim_name) give it, and flattening the same
    dimensions under that name again returns it (another layout under a name in use is a
    ValueError, as is a name of the root's dimensions). Every rank of the mesh calls it (each on
    its own sub-mesh: only the members of a flattened group meet to make it)."""
    names = self.mesh_dim_names
    if not names:
        raise RuntimeError("Cannot flatten a DeviceMesh without mesh_dim_names!")
    if not mesh_dim_name:
        mesh_dim_name = "_".join(names)
    if self.ndim == 1 and mesh_dim_name in names:
        return self
    root = _get_root_mesh(self)
    if mesh_dim_name in (root.mesh_dim_names or ()):
        raise ValueError(f"{mesh_dim_name} already exists for submesh of the {root}. The mesh_dim_names of submesh "
                         f"and flattened mesh are {root.mesh_dim_names}. Please specify another valid mesh_dim_name.")
    ranks = [int(r) for r in self.mesh.flatten()]
    if not hasattr(root, "_flatten_mapping"):
        root._flatten_mapping = {}
    flattened = root._flatten_mapping
    existing = flattened.get(mesh_dim_name)
    if existing is not None:
        if [int(r) for r in existing.mesh.flatten()] == ranks:
            return existing
        raise ValueError(f"Flatten mesh with mesh_dim_name {mesh_dim_name} has been created before, Please specify "
                         f"another valid mesh_dim_name.")
    backend = None
    if backend_override is not None:
        (backend,) = _normalize_backend_override({0: backend_override}, 1, None)
    group = _tdist.new_group(ranks, backend=backend, use_local_synchronization=True)
    flat = DeviceMesh.from_group([group], self.device_type, ranks, mesh_dim_names=[mesh_dim_name])
    flat._root_mesh = root
    flattened[mesh_dim_name] = flat
    return flat


_slice = DeviceMesh.__getitem__
_group_of = DeviceMesh.get_group
DeviceMesh.__getitem__ = _getitem
DeviceMesh.get_group = _get_group
DeviceMesh._flatten = _flatten
DeviceMesh._get_root_mesh = _get_root_mesh
