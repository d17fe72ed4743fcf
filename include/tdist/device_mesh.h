// DeviceMesh: the ranks of the default group laid out as an n-dimensional
// array, with one process group per dimension, as torch.distributed.device_mesh.
//
//   auto mesh = tdist::init_device_mesh("cpu", {2, 4}, {"dp", "tp"});
//   tdist::all_reduce(grads, tdist::ReduceOp::SUM, mesh->get_group("dp"));
//   tdist::DeviceMesh tp = (*mesh)["tp"];          // the 1-D row of this rank
//
// The mesh holds global ranks in row-major order: shape {2, 4} over ranks 0..7
// is [[0, 1, 2, 3], [4, 5, 6, 7]]; the group of dimension 1 ("tp") on rank 5 is
// {4, 5, 6, 7}, the group of dimension 0 ("dp") is {1, 5}.
//
// SPMD: every rank of the default group constructs the same mesh (same ranks,
// same shape) in the same order relative to its other new_group calls, since
// the constructor creates every dimension's groups through new_group. A
// different mesh on some rank makes the groups disagree and their creation
// time out.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "tdist/distributed.h"

namespace tdist {

class DeviceMesh {
 public:
  // `mesh`: the global ranks of the layout, flattened row-major; `shape`: its
  // dimensions (product == mesh.size()). Ranks are distinct members of the
  // default group, which must be initialized; the mesh may leave ranks out
  // (they get no groups and no coordinate). `mesh_dim_names`: none, or one
  // distinct name per dimension. device_type: "cpu", or "cuda" when a CUDA
  // backend ("nccl") is registered. Creates the groups of every dimension
  // (a dimension whose groups span the whole default group uses it).
  // DistValueError for any inconsistent argument, before any group is made.
  DeviceMesh(std::string device_type, std::vector<int64_t> mesh, std::vector<int64_t> shape,
             std::vector<std::string> mesh_dim_names = {});

  // A 1-D mesh over the members of `group` (in group-rank order); no group is created.
  static DeviceMesh from_group(const Group& group, const std::string& device_type,
                               std::vector<std::string> mesh_dim_names = {});
  // An n-D mesh from one existing group per dimension: on every member rank,
  // groups[d] must hold exactly the ranks along dimension d through this
  // rank (DistValueError otherwise). No group is created.
  static DeviceMesh from_group(const std::vector<Group>& groups, const std::string& device_type,
                               std::vector<int64_t> mesh, std::vector<int64_t> shape,
                               std::vector<std::string> mesh_dim_names = {});

  const std::string& device_type() const { return device_type_; }
  // The global ranks, flattened row-major (torch's `mesh.flatten().tolist()`).
  const std::vector<int64_t>& mesh() const { return mesh_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  // The number of ranks in the mesh, or along dimension `dim` (negative counts from the end).
  int64_t size() const { return static_cast<int64_t>(mesh_.size()); }
  int64_t size(int dim) const;
  // Empty when the mesh has no names.
  const std::vector<std::string>& mesh_dim_names() const { return mesh_dim_names_; }

  // The group of dimension `dim` (negative counts from the end) or of the
  // dimension named `dim_name` that this rank belongs to. DistError when this
  // rank is not in the mesh; DistValueError for an unknown dimension.
  // get_group() only for a 1-D mesh.
  Group get_group(int dim) const;
  Group get_group(const std::string& dim_name) const;
  Group get_group() const;
  // One group per dimension, in dimension order (empty when this rank is not in the mesh).
  std::vector<Group> get_all_groups() const { return groups_; }

  // This process's global rank.
  int get_rank() const { return rank_; }
  // This rank's rank in the group of dimension `dim` (as torch: get_rank of
  // that group). Equal to its coordinate along `dim` whenever the mesh
  // increases along `dim`, which it always does for init_device_mesh.
  // get_local_rank() only for a 1-D mesh.
  int get_local_rank(int dim) const;
  int get_local_rank(const std::string& dim_name) const;
  int get_local_rank() const;
  // This rank's index along every dimension; empty when it is not in the mesh.
  const std::vector<int64_t>& get_coordinate() const { return coordinate_; }

  // The sub-mesh of the named dimensions (in mesh order) that contains this
  // rank: the other coordinates fixed at this rank's. It reuses this mesh's
  // groups (no communication, no new group). DistValueError for a mesh
  // without names, unknown, repeated or out-of-order names; DistError when
  // this rank is not in the mesh.
  DeviceMesh operator[](const std::string& mesh_dim_name) const;
  DeviceMesh operator[](const std::vector<std::string>& mesh_dim_names) const;
  // So that mesh[{"dp", "tp"}] picks the list form.
  DeviceMesh operator[](std::initializer_list<std::string> mesh_dim_names) const {
    return (*this)[std::vector<std::string>(mesh_dim_names)];
  }

  // As torch's repr: DeviceMesh('cpu', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))
  std::string str() const;

  // Same device type, ranks, shape and names.
  friend bool operator==(const DeviceMesh& a, const DeviceMesh& b);

 private:
  struct Parts {
    std::string device_type;
    std::vector<int64_t> mesh;
    std::vector<int64_t> shape;
    std::vector<std::string> mesh_dim_names;
  };
  struct NoGroups {};
  // Validated layout, no groups yet.
  DeviceMesh(NoGroups, Parts parts, const char* op);
  int dim_index(int dim, const char* op) const;
  int dim_index(const std::string& dim_name, const char* op) const;
  void require_member(const char* op) const;

  std::string device_type_;
  std::vector<int64_t> mesh_;
  std::vector<int64_t> shape_;
  std::vector<std::string> mesh_dim_names_;
  int rank_ = -1;
  std::vector<int64_t> coordinate_;  // empty: not in the mesh
  std::vector<Group> groups_;        // one per dimension; empty: not in the mesh
};

std::ostream& operator<<(std::ostream& os, const DeviceMesh& mesh);

// Lays ranks 0..prod(mesh_shape)-1 out row-major and creates the groups of
// every dimension. Initializes the default group from the environment
// (env://) when it is not initialized yet. DistValueError when the shape does
// not cover exactly the world, the device type is not served, or the names
// are repeated or not one per dimension.
std::shared_ptr<DeviceMesh> init_device_mesh(const std::string& device_type, const std::vector<int64_t>& mesh_shape,
                                             const std::vector<std::string>& mesh_dim_names = {});

}  // namespace tdist
