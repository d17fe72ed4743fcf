// DeviceMesh and init_device_mesh: ranks as an n-D array, one group per
// dimension (torch.distributed.device_mesh).
#include "tdist/device_mesh.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>
#include <utility>

#include "tdist/errors.h"

namespace tdist {

namespace {

// Python's tuple spelling, as torch prints shapes: (4,), (2, 3).
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string names_text(const std::vector<std::string>& names) {
  std::string s = "(";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + (names.size() == 1 ? ",)" : ")");
}

void check_device_type(const std::string& device_type, const std::string& op) {
  if (device_type.find(':') != std::string::npos)
    throw DistValueError(op + ": a device type with an index is not supported, got '" + device_type +
                         "' (pass the type alone, e.g. '" + device_type.substr(0, device_type.find(':')) + "')");
  if (auto type = parse_device_type(device_type)) {
    const char* backend = default_backend_of(*type);
    if (is_backend_available(backend)) return;
    throw DistValueError(op + ": device type '" + device_type + "' needs the '" + backend +
                         "' backend, and none is registered in this build (use 'cpu')");
  }
  throw DistValueError(op + ": unsupported device type '" + device_type + "' (supported: 'cpu'" +
                       (is_backend_available("nccl") ? ", 'cuda'" : "") + ")");
}

// Positive dimensions; returns their product (DistValueError on overflow).
int64_t check_shape(const std::vector<int64_t>& shape, const std::string& op) {
  if (shape.empty()) throw DistValueError(op + ": the mesh shape is empty; a mesh has at least one dimension");
  int64_t product = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1)
      throw DistValueError(op + ": mesh shape " + shape_text(shape) + " has dimension " + std::to_string(d) +
                           " of size " + std::to_string(shape[d]) + "; every dimension needs at least one rank");
    if (product > std::numeric_limits<int64_t>::max() / shape[d])
      throw DistValueError(op + ": mesh shape " + shape_text(shape) + " holds more ranks than an int64 counts");
    product *= shape[d];
  }
  return product;
}

void check_names(const std::vector<std::string>& names, const std::vector<int64_t>& shape, const std::string& op) {
  if (names.empty()) return;
  if (names.size() != shape.size())
    throw DistValueError(op + ": mesh_dim_names " + names_text(names) + " has " + std::to_string(names.size()) +
                         " name" + (names.size() == 1 ? "" : "s") + " for the " + std::to_string(shape.size()) +
                         "-D mesh shape " + shape_text(shape) + "; give one name per dimension");
  std::set<std::string> seen;
  for (const auto& n : names)
    if (!seen.insert(n).second)
      throw DistValueError(op + ": mesh_dim_names " + names_text(names) + " names '" + n +
                           "' more than once; every name must be unique");
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// The global ranks along `dim` through the point `at` (its own coordinate along `dim` ignored).
std::vector<int> ranks_along(const std::vector<int64_t>& mesh, const std::vector<int64_t>& shape,
                             const std::vector<int64_t>& strides, std::vector<int64_t> at, int dim) {
  std::vector<int> ranks;
  ranks.reserve(static_cast<size_t>(shape[dim]));
  for (int64_t i = 0; i < shape[dim]; ++i) {
    at[dim] = i;
    int64_t flat = 0;
    for (size_t k = 0; k < at.size(); ++k) flat += at[k] * strides[k];
    ranks.push_back(static_cast<int>(mesh[static_cast<size_t>(flat)]));
  }
  return ranks;
}

}  // namespace

DeviceMesh::DeviceMesh(NoGroups, Parts parts, const char* op)
    : device_type_(std::move(parts.device_type)),
      mesh_(std::move(parts.mesh)),
      shape_(std::move(parts.shape)),
      mesh_dim_names_(std::move(parts.mesh_dim_names)) {
  check_device_type(device_type_, op);
  const int64_t count = check_shape(shape_, op);
  check_names(mesh_dim_names_, shape_, op);
  if (count != static_cast<int64_t>(mesh_.size()))
    throw DistValueError(std::string(op) + ": mesh shape " + shape_text(shape_) + " holds " + std::to_string(count) +
                         " ranks but the mesh lists " + std::to_string(mesh_.size()));
  if (!is_initialized())
    throw DistError(std::string(op) +
                    ": the default process group is not initialized (call init_process_group or init_device_mesh)");
  const int world_size = tdist::get_world_size();
  rank_ = tdist::get_rank();
  std::vector<bool> seen(static_cast<size_t>(world_size), false);
  int64_t position = -1;
  for (size_t i = 0; i < mesh_.size(); ++i) {
    int64_t r = mesh_[i];
    if (r < 0 || r >= world_size)
      throw DistValueError(std::string(op) + ": the mesh lists rank " + std::to_string(r) +
                           ", outside the default group (world size " + std::to_string(world_size) + ")");
    if (seen[static_cast<size_t>(r)])
      throw DistValueError(std::string(op) + ": the mesh lists rank " + std::to_string(r) + " more than once");
    seen[static_cast<size_t>(r)] = true;
    if (r == rank_) position = static_cast<int64_t>(i);
  }
  if (position >= 0) {
    coordinate_.resize(shape_.size());
    for (size_t d = shape_.size(); d-- > 0;) {
      coordinate_[d] = position % shape_[d];
      position /= shape_[d];
    }
  }
}

DeviceMesh::DeviceMesh(std::string device_type, std::vector<int64_t> mesh, std::vector<int64_t> shape,
                       std::vector<std::string> mesh_dim_names)
    : DeviceMesh(NoGroups{}, Parts{std::move(device_type), std::move(mesh), std::move(shape), std::move(mesh_dim_names)},
                 "DeviceMesh") {
  // Every rank of the default group makes every group of every dimension, in
  // the same order: dimensions in order, and for each the combinations of the
  // other coordinates in row-major order. Each rank keeps the ones it is in.
  Group world_group = group_world();
  const int world_size = world_group->size();
  const auto strides = strides_of(shape_);
  const int n = ndim();
  std::vector<Group> mine(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) {
    std::vector<int> others;
    for (int k = 0; k < n; ++k)
      if (k != d) others.push_back(k);
    const int64_t rows = size() / shape_[d];
    std::vector<int64_t> at(static_cast<size_t>(n), 0);
    for (int64_t row = 0; row < rows; ++row) {
      int64_t rest = row;
      for (size_t j = others.size(); j-- > 0;) {
        at[others[j]] = rest % shape_[others[j]];
        rest /= shape_[others[j]];
      }
      std::vector<int> ranks = ranks_along(mesh_, shape_, strides, at, d);
      // Ranks are distinct and in the world, so as many as the world is all of it.
      Group g = static_cast<int>(ranks.size()) == world_size
                    ? world_group
                    : new_group(ranks, world_group->timeout());
      bool contains_me = !coordinate_.empty();
      for (int k : others) contains_me = contains_me && coordinate_[k] == at[k];
      if (contains_me) mine[d] = std::move(g);
    }
  }
  if (!coordinate_.empty()) groups_ = std::move(mine);
}

DeviceMesh DeviceMesh::from_group(const Group& group, const std::string& device_type,
                                  std::vector<std::string> mesh_dim_names) {
  if (!group) throw DistValueError("DeviceMesh::from_group: no group given");
  std::vector<int64_t> mesh(group->global_ranks().begin(), group->global_ranks().end());
  std::vector<int64_t> shape{static_cast<int64_t>(mesh.size())};
  DeviceMesh m(NoGroups{}, Parts{device_type, std::move(mesh), std::move(shape), std::move(mesh_dim_names)},
               "DeviceMesh::from_group");
  if (!m.coordinate_.empty()) m.groups_ = {group};
  return m;
}

DeviceMesh DeviceMesh::from_group(const std::vector<Group>& groups, const std::string& device_type,
                                  std::vector<int64_t> mesh, std::vector<int64_t> shape,
                                  std::vector<std::string> mesh_dim_names) {
  const std::string op = "DeviceMesh::from_group";
  if (groups.size() != shape.size())
    throw DistValueError(op + ": " + std::to_string(groups.size()) + " groups for the " +
                         std::to_string(shape.size()) + "-D mesh shape " + shape_text(shape) +
                         "; give one group per dimension");
  for (size_t d = 0; d < groups.size(); ++d)
    if (!groups[d]) throw DistValueError(op + ": the group of dimension " + std::to_string(d) + " is null");
  DeviceMesh m(NoGroups{}, Parts{device_type, std::move(mesh), std::move(shape), std::move(mesh_dim_names)},
               op.c_str());
  if (m.coordinate_.empty()) return m;
  const auto strides = strides_of(m.shape_);
  for (int d = 0; d < m.ndim(); ++d) {
    std::vector<int> expected = ranks_along(m.mesh_, m.shape_, strides, m.coordinate_, d);
    std::sort(expected.begin(), expected.end());
    std::vector<int> got = groups[d]->global_ranks();
    std::sort(got.begin(), got.end());
    if (got != expected) {
      auto list = [](const std::vector<int>& v) {
        std::string s = "[";
        for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
        return s + "]";
      };
      throw DistValueError(op + ": on rank " + std::to_string(m.rank_) + " the group of dimension " +
                           std::to_string(d) + " (" + groups[d]->group_name() + ") holds ranks " + list(got) +
                           " but the mesh has " + list(expected) + " along that dimension");
    }
  }
  m.groups_ = groups;
  return m;
}

int DeviceMesh::dim_index(int dim, const char* op) const {
  const int n = ndim();
  if (dim < -n || dim >= n)
    throw DistValueError(std::string(op) + ": dimension " + std::to_string(dim) + " is out of range for the " +
                         std::to_string(n) + "-D mesh " + str());
  return dim < 0 ? dim + n : dim;
}

int DeviceMesh::dim_index(const std::string& dim_name, const char* op) const {
  if (mesh_dim_names_.empty())
    throw DistValueError(std::string(op) + ": mesh dimension '" + dim_name + "' does not exist; the mesh " + str() +
                         " has no mesh_dim_names");
  auto it = std::find(mesh_dim_names_.begin(), mesh_dim_names_.end(), dim_name);
  if (it == mesh_dim_names_.end())
    throw DistValueError(std::string(op) + ": mesh dimension '" + dim_name +
                         "' does not exist; available: mesh_dim_names=" + names_text(mesh_dim_names_));
  return static_cast<int>(it - mesh_dim_names_.begin());
}

void DeviceMesh::require_member(const char* op) const {
  if (coordinate_.empty())
    throw DistError(std::string(op) + ": rank " + std::to_string(rank_) + " is not in the mesh " + str());
}

int64_t DeviceMesh::size(int dim) const { return shape_[static_cast<size_t>(dim_index(dim, "DeviceMesh::size"))]; }

Group DeviceMesh::get_group(int dim) const {
  int d = dim_index(dim, "DeviceMesh::get_group");
  require_member("DeviceMesh::get_group");
  return groups_[static_cast<size_t>(d)];
}

Group DeviceMesh::get_group(const std::string& dim_name) const {
  int d = dim_index(dim_name, "DeviceMesh::get_group");
  require_member("DeviceMesh::get_group");
  return groups_[static_cast<size_t>(d)];
}

Group DeviceMesh::get_group() const {
  if (ndim() != 1)
    throw DistValueError("DeviceMesh::get_group: the mesh has " + std::to_string(ndim()) +
                         " dimensions; name one (get_group(dim) or get_group(name))");
  return get_group(0);
}

int DeviceMesh::get_local_rank(int dim) const { return get_group(dim)->rank(); }
int DeviceMesh::get_local_rank(const std::string& dim_name) const { return get_group(dim_name)->rank(); }

int DeviceMesh::get_local_rank() const {
  if (ndim() != 1)
    throw DistValueError("DeviceMesh::get_local_rank: the mesh has " + std::to_string(ndim()) +
                         " dimensions; name one (get_local_rank(dim) or get_local_rank(name))");
  return get_local_rank(0);
}

DeviceMesh DeviceMesh::operator[](const std::string& mesh_dim_name) const {
  return (*this)[std::vector<std::string>{mesh_dim_name}];
}

DeviceMesh DeviceMesh::operator[](const std::vector<std::string>& names) const {
  const char* op = "DeviceMesh[]";
  if (mesh_dim_names_.empty())
    throw DistValueError(std::string(op) + ": cannot slice the mesh " + str() + ", which has no mesh_dim_names");
  if (names.empty()) throw DistValueError(std::string(op) + ": no mesh dimension names given");
  std::vector<int> dims;
  for (const auto& name : names) {
    int d = dim_index(name, op);
    if (!dims.empty() && d <= dims.back())
      throw DistValueError(std::string(op) + ": cannot slice " + names_text(names) + " from mesh_dim_names=" +
                           names_text(mesh_dim_names_) +
                           (d == dims.back() ? ": '" + name + "' is named twice" : ": the names must be in mesh order"));
    dims.push_back(d);
  }
  if (static_cast<int>(dims.size()) == ndim()) return *this;
  require_member(op);
  Parts parts{device_type_, {}, {}, names};
  for (int d : dims) parts.shape.push_back(shape_[static_cast<size_t>(d)]);
  const auto strides = strides_of(shape_);
  const auto sub_strides = strides_of(parts.shape);
  int64_t count = 1;
  for (int64_t s : parts.shape) count *= s;
  for (int64_t i = 0; i < count; ++i) {
    int64_t flat = 0;
    for (size_t k = 0; k < static_cast<size_t>(ndim()); ++k) {
      auto it = std::find(dims.begin(), dims.end(), static_cast<int>(k));
      int64_t c = coordinate_[k];
      if (it != dims.end()) {
        size_t j = static_cast<size_t>(it - dims.begin());
        c = (i / sub_strides[j]) % parts.shape[j];
      }
      flat += c * strides[k];
    }
    parts.mesh.push_back(mesh_[static_cast<size_t>(flat)]);
  }
  DeviceMesh sub(NoGroups{}, std::move(parts), op);
  for (int d : dims) sub.groups_.push_back(groups_[static_cast<size_t>(d)]);
  return sub;
}

std::string DeviceMesh::str() const {
  std::string s = "DeviceMesh('" + device_type_ + "', ";
  const auto strides = strides_of(shape_);
  // Nested lists, as numpy's tolist(): [[0, 1], [2, 3]].
  auto print = [&](auto& self, size_t dim, int64_t offset) -> void {
    s += "[";
    for (int64_t i = 0; i < shape_[dim]; ++i) {
      if (i) s += ", ";
      int64_t at = offset + i * strides[dim];
      if (dim + 1 == shape_.size())
        s += std::to_string(mesh_[static_cast<size_t>(at)]);
      else
        self(self, dim + 1, at);
    }
    s += "]";
  };
  if (!shape_.empty() && !mesh_.empty()) print(print, 0, 0);
  if (!mesh_dim_names_.empty()) s += ", mesh_dim_names=" + names_text(mesh_dim_names_);
  return s + ")";
}

bool operator==(const DeviceMesh& a, const DeviceMesh& b) {
  return a.device_type_ == b.device_type_ && a.mesh_ == b.mesh_ && a.shape_ == b.shape_ &&
         a.mesh_dim_names_ == b.mesh_dim_names_;
}

std::ostream& operator<<(std::ostream& os, const DeviceMesh& mesh) { return os << mesh.str(); }

std::shared_ptr<DeviceMesh> init_device_mesh(const std::string& device_type, const std::vector<int64_t>& mesh_shape,
                                             const std::vector<std::string>& mesh_dim_names) {
  const std::string op = "init_device_mesh";
  // Everything that needs no peer is checked before anyone waits for anyone.
  check_device_type(device_type, op);
  const int64_t count = check_shape(mesh_shape, op);
  check_names(mesh_dim_names, mesh_shape, op);
  if (!is_initialized()) {
    InitOptions options;  // env://
    // CPU tensors always go through tdist; another device adds its own backend.
    const DeviceType type = parse_device_type(device_type).value_or(DeviceType::CPU);
    options.backend = type == DeviceType::CPU ? std::string(default_backend_of(type))
                                              : std::string("cpu:tdist,") + device_type_name(type) + ":" +
                                                    default_backend_of(type);
    init_process_group(options);
  }
  const int world_size = get_world_size();
  if (count != world_size)
    throw DistValueError(op + ": mesh_shape " + shape_text(mesh_shape) + " holds " + std::to_string(count) +
                         " ranks but the world size is " + std::to_string(world_size) +
                         " (the product of mesh_shape must equal the world size)");
  std::vector<int64_t> mesh(static_cast<size_t>(count));
  std::iota(mesh.begin(), mesh.end(), int64_t{0});
  return std::make_shared<DeviceMesh>(device_type, std::move(mesh), mesh_shape, mesh_dim_names);
}

}  // namespace tdist
