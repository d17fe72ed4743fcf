// ViewList (tensor/view_list.h): the same views give the same list, other
// views, counts or splits a new cut or copy with the right parts, and
// release() lets go of views that keep memory alive.
#include "tensor/view_list.h"

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <vector>

namespace tdist {
namespace {

// Element offsets of each part from base, and their counts.
std::vector<std::pair<int64_t, int64_t>> layout(const std::vector<Tensor>& parts, const float* base) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const Tensor& p : parts) out.emplace_back(static_cast<const float*>(p.data()) - base, p.numel());
  return out;
}

using Layout = std::vector<std::pair<int64_t, int64_t>>;

TEST(ViewList, TheSameBufferCutTheSameWayKeepsItsPartsAndAnyOtherIsCutAnew) {
  std::vector<float> a(12), b(12);
  ViewList list;
  const std::vector<Tensor>* first = &list.blocks(Tensor(a), 3);
  EXPECT_EQ(layout(*first, a.data()), (Layout{{0, 4}, {4, 4}, {8, 4}}));
  const Tensor* part = first->data();
  EXPECT_EQ(list.blocks(Tensor(a), 3).data(), part) << "the same view and count: the very same parts";
  EXPECT_EQ(layout(list.blocks(Tensor(a), 4), a.data()), (Layout{{0, 3}, {3, 3}, {6, 3}, {9, 3}}));
  EXPECT_EQ(layout(list.blocks(Tensor(b), 4), b.data()), (Layout{{0, 3}, {3, 3}, {6, 3}, {9, 3}}));
  EXPECT_EQ(layout(list.blocks(Tensor(a.data(), 8), 4), a.data()), (Layout{{0, 2}, {2, 2}, {4, 2}, {6, 2}}))
      << "another shape of the same memory";
  const std::vector<int64_t> rows1 = {1, 2, 0, 9}, rows2 = {3, 3, 3, 3};
  EXPECT_EQ(layout(list.rows(Tensor(a), rows1, 4), a.data()), (Layout{{0, 1}, {1, 2}, {3, 0}, {3, 9}}));
  EXPECT_EQ(layout(list.rows(Tensor(a), rows2, 4), a.data()), (Layout{{0, 3}, {3, 3}, {6, 3}, {9, 3}}));
  EXPECT_EQ(layout(list.rows(Tensor(a), rows1, 4), a.data()), (Layout{{0, 1}, {1, 2}, {3, 0}, {3, 9}}))
      << "other splits of the same buffer";
  EXPECT_EQ(layout(list.rows(Tensor(a), {}, 4), a.data()), (Layout{{0, 3}, {3, 3}, {6, 3}, {9, 3}}));
  EXPECT_EQ(layout(list.blocks(Tensor(a), 4), a.data()), (Layout{{0, 3}, {3, 3}, {6, 3}, {9, 3}}))
      << "blocks after rows of the same count";
}

TEST(ViewList, ACopyIsOfTheViewsGiven) {
  std::vector<float> a(6), b(6);
  ViewList list;
  std::vector<Tensor> views = {Tensor(a.data(), 2), Tensor(a.data() + 2, 4)};
  EXPECT_EQ(layout(list.copy(views), a.data()), (Layout{{0, 2}, {2, 4}}));
  views[1] = Tensor(a.data() + 3, 3);
  EXPECT_EQ(layout(list.copy(views), a.data()), (Layout{{0, 2}, {3, 3}}));
  views.push_back(Tensor(b.data(), 1));
  const std::vector<Tensor>& three = list.copy(views);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[2].data(), b.data());
  EXPECT_EQ(layout(list.copy(std::vector<Tensor>{}), a.data()), Layout{});
  EXPECT_EQ(layout(list.blocks(Tensor(a), 2), a.data()), (Layout{{0, 3}, {3, 3}})) << "a cut after a copy";
  EXPECT_EQ(layout(list.copy(views), a.data()).size(), 3u) << "a copy after a cut";
}

// A DLPack tensor whose deleter says when it ran.
struct Adopted {
  DLManagedTensor managed{};
  std::vector<float> buffer = std::vector<float>(8);
  int64_t shape[1] = {8};
  bool* deleted;
  static void deleter(DLManagedTensor* self) {
    auto* a = static_cast<Adopted*>(self->manager_ctx);
    *a->deleted = true;
    delete a;
  }
};

Tensor adopt(bool* deleted) {
  auto* a = new Adopted;
  a->deleted = deleted;
  DLTensor& t = a->managed.dl_tensor;
  t.data = a->buffer.data();
  t.device = {kDLCPU, 0};
  t.ndim = 1;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = a->shape;
  a->managed.manager_ctx = a;
  a->managed.deleter = &Adopted::deleter;
  return Tensor::from_dlpack(&a->managed);
}

TEST(ViewList, ReleaseLetsGoOfViewsThatKeepMemoryAliveAndKeepsOthers) {
  for (bool cut : {true, false}) {
    bool deleted = false;
    ViewList list;
    {
      Tensor t = adopt(&deleted);
      if (cut)
        list.blocks(t, 2);
      else
        list.copy(std::vector<Tensor>{t});
    }
    EXPECT_FALSE(deleted) << "the list still holds the views (cut " << cut << ")";
    list.release();
    EXPECT_TRUE(deleted) << "released (cut " << cut << ")";
  }
  std::vector<float> plain(4);
  ViewList list;
  const Tensor* kept = list.blocks(Tensor(plain), 2).data();
  list.release();
  EXPECT_EQ(list.blocks(Tensor(plain), 2).data(), kept) << "views that own nothing stay";
}

}  // namespace
}  // namespace tdist
