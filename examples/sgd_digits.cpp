// 分布式同步SGD (the tutorial's distributed synchronous SGD) on real data: the
// 8x8 handwritten digits that scikit-learn ships (python3-sklearn on Debian).
// Every rank trains the same small network on its own part of the training
// set; after each backward pass average_gradients() all-reduces the gradients
// and divides them by the world size, so every rank takes the same step and
// the replicas stay identical (what DistributedDataParallel does).
//
//   tdist-example-sgd_digits [world_size] [--data digits.csv.gz]   (spawns itself)
//   tdistrun --nproc-per-node 4 --no-python tdist-example-sgd_digits
//
// The data file is found at run time: --data, $TDIST_DIGITS_CSV, or where
// python3-sklearn / pip install scikit-learn (see digits_data.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "digits_data.h"
#include "example_main.h"

namespace {

// Deterministic on every rank: the same generator, the same seed, and the
// shuffle written out (std::shuffle's algorithm is not specified).
float uniform01(std::mt19937& rng) { return float(rng() >> 8) * (1.0f / 16777216.0f); }

void fisher_yates_shuffle(std::vector<size_t>& v, std::mt19937& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    size_t j = rng() % i;  // 0 <= j <= i - 1
    std::swap(v[i - 1], v[j]);
  }
}

// ---------------------------------------------------------------------------
// 数据集划分助手: the tutorial's Partition / DataPartitioner.
struct Partition {
  const digits::DataSet* data;
  std::vector<size_t> index;
  size_t size() const { return index.size(); }
};

class DataPartitioner {
 public:
  DataPartitioner(const digits::DataSet& data, const std::vector<size_t>& rows, const std::vector<double>& sizes,
                  uint32_t seed = 1234)
      : data_(&data) {
    std::mt19937 rng(seed);
    std::vector<size_t> indexes = rows;
    fisher_yates_shuffle(indexes, rng);
    size_t data_len = indexes.size(), start = 0;
    for (double frac : sizes) {
      size_t part_len = size_t(frac * double(data_len));
      partitions_.emplace_back(indexes.begin() + start, indexes.begin() + start + part_len);
      start += part_len;
    }
  }
  Partition use(int partition) const { return {data_, partitions_.at(partition)}; }

 private:
  const digits::DataSet* data_;
  std::vector<std::vector<size_t>> partitions_;
};

// ---------------------------------------------------------------------------
// The model: 64 pixels -> 32 hidden units (ReLU) -> 10 classes (softmax).
struct Param {
  std::vector<float> data, grad, momentum;
  explicit Param(size_t n) : data(n), grad(n), momentum(n) {}
};

class Net {
 public:
  static constexpr int kIn = digits::kPixels, kHidden = 32, kOut = digits::kClasses;

  // Like torch.nn.Linear: uniform in +-1/sqrt(fan_in), from the seeded generator.
  explicit Net(std::mt19937& rng) : w1_(kHidden * kIn), b1_(kHidden), w2_(kOut * kHidden), b2_(kOut) {
    auto init = [&](Param& p, int fan_in) {
      float bound = 1.0f / std::sqrt(float(fan_in));
      for (float& x : p.data) x = (2.0f * uniform01(rng) - 1.0f) * bound;
    };
    init(w1_, kIn), init(b1_, kIn), init(w2_, kHidden), init(b2_, kHidden);
  }

  std::vector<Param*> parameters() { return {&w1_, &b1_, &w2_, &b2_}; }

  void zero_grad() {
    for (Param* p : parameters()) std::fill(p->grad.begin(), p->grad.end(), 0.0f);
  }

  // Forward pass of one image: hidden activations and class probabilities.
  void forward(const float* x, float* hidden, float* prob) const {
    for (int h = 0; h < kHidden; ++h) {
      float s = b1_.data[h];
      const float* w = &w1_.data[h * kIn];
      for (int i = 0; i < kIn; ++i) s += w[i] * x[i];
      hidden[h] = s > 0.0f ? s : 0.0f;
    }
    float max_logit = -INFINITY;
    for (int o = 0; o < kOut; ++o) {
      float s = b2_.data[o];
      const float* w = &w2_.data[o * kHidden];
      for (int h = 0; h < kHidden; ++h) s += w[h] * hidden[h];
      prob[o] = s;
      max_logit = std::max(max_logit, s);
    }
    float sum = 0.0f;
    for (int o = 0; o < kOut; ++o) sum += (prob[o] = std::exp(prob[o] - max_logit));
    for (int o = 0; o < kOut; ++o) prob[o] /= sum;
  }

  // Mean cross-entropy (nll_loss of log_softmax) over the batch; adds its
  // gradient to the parameters' grad.
  float forward_backward(const digits::DataSet& data, const size_t* rows, size_t n) {
    float hidden[kHidden], prob[kOut], dhidden[kHidden];
    double loss = 0.0;
    const float scale = 1.0f / float(n);
    for (size_t b = 0; b < n; ++b) {
      const float* x = data.image(rows[b]);
      const int y = data.labels[rows[b]];
      forward(x, hidden, prob);
      loss -= std::log(std::max(prob[y], 1e-30f));
      // d loss / d logits = (softmax - onehot) / n
      for (int o = 0; o < kOut; ++o) prob[o] = (prob[o] - (o == y ? 1.0f : 0.0f)) * scale;
      std::fill(dhidden, dhidden + kHidden, 0.0f);
      for (int o = 0; o < kOut; ++o) {
        float* gw = &w2_.grad[o * kHidden];
        const float* w = &w2_.data[o * kHidden];
        for (int h = 0; h < kHidden; ++h) {
          gw[h] += prob[o] * hidden[h];
          dhidden[h] += prob[o] * w[h];
        }
        b2_.grad[o] += prob[o];
      }
      for (int h = 0; h < kHidden; ++h) {
        if (hidden[h] <= 0.0f) continue;  // ReLU
        float* gw = &w1_.grad[h * kIn];
        for (int i = 0; i < kIn; ++i) gw[i] += dhidden[h] * x[i];
        b1_.grad[h] += dhidden[h];
      }
    }
    return float(loss / double(n));
  }

  int predict(const float* x) const {
    float hidden[kHidden], prob[kOut];
    forward(x, hidden, prob);
    return int(std::max_element(prob, prob + kOut) - prob);
  }

 private:
  Param w1_, b1_, w2_, b2_;
};

// torch.optim.SGD with momentum (dampening 0, no Nesterov).
void sgd_step(Net& model, float lr, float momentum) {
  for (Param* p : model.parameters()) {
    for (size_t i = 0; i < p->data.size(); ++i) {
      p->momentum[i] = momentum * p->momentum[i] + p->grad[i];
      p->data[i] -= lr * p->momentum[i];
    }
  }
}

// ---------------------------------------------------------------------------
// 梯度平均: the tutorial's average_gradients.
void average_gradients(Net& model) {
  const float size = float(tdist::get_world_size());
  for (Param* param : model.parameters()) {
    tdist::all_reduce(param->grad, tdist::ReduceOp::SUM);
    for (float& g : param->grad) g /= size;
  }
}

// True when every rank holds exactly these weights: their element-wise MAX
// and MIN over all ranks both equal ours.
bool weights_identical_on_all_ranks(Net& model) {
  std::vector<float> mine;
  for (Param* p : model.parameters()) mine.insert(mine.end(), p->data.begin(), p->data.end());
  std::vector<float> hi = mine, lo = mine;
  tdist::all_reduce(hi, tdist::ReduceOp::MAX);
  tdist::all_reduce(lo, tdist::ReduceOp::MIN);
  return hi == mine && lo == mine;
}

// Read in main, before the ranks start (spawn forks them from this process).
std::string g_data_path;
digits::DataSet g_data;

void run(int rank, int size) {
  const digits::DataSet& data = g_data;
  // Every fifth image (rows 4, 9, 14, ...) is held out for testing, 20% of the
  // set, the rest is the training set. (Not the last 20% of the file: trained
  // on the first 80%, a model this small, like scikit-learn's
  // LogisticRegression or MLPClassifier, reaches only about 0.90 on those.)
  std::vector<size_t> train_rows, test_rows;
  for (size_t i = 0; i < data.size(); ++i) (i % 5 == 4 ? test_rows : train_rows).push_back(i);
  const size_t n_train = train_rows.size();

  std::mt19937 rng(1234);  // torch.manual_seed(1234): the same on every rank
  // 划分数据集 (partition_dataset): equal parts, one per rank; the batch size
  // is divided by the number of ranks to keep the global batch at 128.
  const size_t bsz = std::max<size_t>(1, 128 / size_t(size));
  std::vector<double> partition_sizes(size, 1.0 / size);
  Partition train_set = DataPartitioner(data, train_rows, partition_sizes).use(rank);
  if (train_set.size() == 0) throw std::runtime_error("too many ranks for " + std::to_string(n_train) + " images");

  Net model(rng);
  const float lr = 0.1f, momentum = 0.9f;  // the tutorial: lr 0.01, momentum 0.5 for its MNIST CNN
  const int epochs = 10;
  const size_t num_batches = (train_set.size() + bsz - 1) / bsz;
  if (rank == 0) {
    std::printf("digits: %zu training images (%zu per rank, batch %zu per rank), %zu held out; %s\n", n_train,
                train_set.size(), bsz, test_rows.size(), g_data_path.c_str());
    std::fflush(stdout);
  }

  std::vector<size_t> order = train_set.index;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    fisher_yates_shuffle(order, rng);  // DataLoader(shuffle=True)
    double epoch_loss = 0.0;
    for (size_t start = 0; start < order.size(); start += bsz) {
      size_t n = std::min(bsz, order.size() - start);
      model.zero_grad();
      epoch_loss += model.forward_backward(data, order.data() + start, n);
      average_gradients(model);
      sgd_step(model, lr, momentum);
    }
    std::printf("Rank %d, epoch %d: loss %.4f\n", rank, epoch, epoch_loss / double(num_batches));
    std::fflush(stdout);
  }

  bool identical = weights_identical_on_all_ranks(model);
  size_t correct = 0;
  for (size_t row : test_rows) correct += model.predict(data.image(row)) == data.labels[row];
  std::printf("Rank %d: weights identical on all ranks: %s\n", rank, identical ? "yes" : "NO");
  std::printf("Rank %d: held-out accuracy %.3f (%zu of %zu)\n", rank, double(correct) / double(test_rows.size()),
              correct, test_rows.size());
  std::fflush(stdout);
  if (!identical) throw std::runtime_error("rank " + std::to_string(rank) + ": the replicas diverged");
}

}  // namespace

int main(int argc, char** argv) {
  // Take --data PATH (or --data=PATH) out; the rest goes to example::run.
  std::string data_arg;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
      data_arg = argv[++i];
    } else if (std::strncmp(argv[i], "--data=", 7) == 0) {
      data_arg = argv[i] + 7;
    } else {
      args.push_back(argv[i]);
    }
  }
  try {
    g_data_path = digits::locate(data_arg);
    g_data = digits::load(g_data_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 2;
  }
  args.push_back(nullptr);
  return example::run(int(args.size()) - 1, args.data(), run);
}
