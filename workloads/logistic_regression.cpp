#include "workloads/logistic_regression.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::workloads {

namespace {

at::Generator generator(std::uint64_t seed) { return at::detail::createCPUGenerator(seed); }

class LogisticRegression final : public Workload {
 public:
  LogisticRegression(const LogisticRegressionSpec& spec, std::shared_ptr<const SyntheticDataset> data,
                     std::uint64_t seed, int rank, int ranks)
      : spec_(spec), data_(std::move(data)), gen_(generator(seed * 1000003ULL + 7919ULL * (rank + 1))) {
    const std::int64_t n = spec.samples;
    if (n < ranks)
      throw std::invalid_argument(fmt::format("logistic regression: {} samples for {} ranks", n, ranks));
    at::Tensor order;
    if (spec.partition == "iid") {
      order = at::randperm(n, generator(seed ^ 0x5eed5eedULL), at::kLong);
    } else if (spec.partition == "sorted") {
      order = std::get<1>(data_->y.sort(/*stable=*/true, 0, false));
    } else {
      throw std::invalid_argument(fmt::format("unknown partition \"{}\" (expected iid or sorted)", spec.partition));
    }
    const std::int64_t base = n / ranks, extra = n % ranks;
    const std::int64_t begin = rank * base + std::min<std::int64_t>(rank, extra);
    const std::int64_t count = base + (rank < extra ? 1 : 0);
    shard_ = order.narrow(0, begin, count).clone();
    batch_ = std::min(spec.batch_size, count);
  }

  std::vector<at::Tensor> initial_parameters() const override {
    return {at::zeros({spec_.features}, at::kFloat), at::zeros({1}, at::kFloat)};
  }
  std::vector<std::string> parameter_names() const override { return {"weight", "bias"}; }

  double forward(const std::vector<at::Tensor>& params) override {
    if (cursor_ + batch_ > shard_.numel() || epoch_order_.numel() == 0) {
      epoch_order_ = shard_.index_select(0, at::randperm(shard_.numel(), gen_, at::kLong));
      cursor_ = 0;
    }
    auto idx = epoch_order_.narrow(0, cursor_, batch_);
    cursor_ += batch_;
    xb_ = data_->x.index_select(0, idx);
    yb_ = data_->y.index_select(0, idx);
    z_ = at::addmv(params[1].expand({batch_}), xb_, params[0]);
    return (at::softplus(z_) - yb_ * z_).mean().item<double>();
  }

  void backward(const std::vector<at::Tensor>&, std::vector<at::Tensor>& grads) override {
    auto residual = at::sigmoid(z_) - yb_;  // d loss_i / d z_i
    at::mv_out(grads[0], xb_.t(), residual).div_(static_cast<double>(batch_));
    grads[1].fill_(residual.mean());
  }

  // A forward pass reads the batch and weights (B d + d floats), does 2 B d flops for
  // X w and about 20 B for softplus; backward re-reads the batch for X^T r.
  sim::ComputeCost forward_cost() const override {
    const double b = static_cast<double>(batch_), d = static_cast<double>(spec_.features);
    return {2.0 * b * d + 20.0 * b, 4.0 * (b * d + d + 3.0 * b)};
  }
  sim::ComputeCost backward_cost() const override {
    const double b = static_cast<double>(batch_), d = static_cast<double>(spec_.features);
    return {2.0 * b * d + 10.0 * b + d, 4.0 * (b * d + 2.0 * d + 3.0 * b)};
  }

  Evaluation evaluate(const std::vector<at::Tensor>& params) const override {
    auto z = at::addmv(params[1].expand({data_->x.size(0)}), data_->x, params[0]);
    Evaluation e;
    e.loss = (at::softplus(z) - data_->y * z).mean().item<double>();
    e.accuracy = (z.gt(0).to(at::kFloat) == data_->y).to(at::kFloat).mean().item<double>();
    return e;
  }

 private:
  LogisticRegressionSpec spec_;
  std::shared_ptr<const SyntheticDataset> data_;
  at::Generator gen_;
  at::Tensor shard_, epoch_order_, xb_, yb_, z_;
  std::int64_t cursor_ = 0, batch_ = 0;
};

}  // namespace

std::shared_ptr<const SyntheticDataset> SyntheticDataset::generate(const LogisticRegressionSpec& spec,
                                                                   std::uint64_t seed) {
  auto gen = generator(seed);
  auto data = std::make_shared<SyntheticDataset>();
  const double d = static_cast<double>(spec.features);
  data->x = at::randn({spec.samples, spec.features}, gen, at::kFloat);
  auto w_star = at::randn({spec.features}, gen, at::kFloat) * (3.0 / std::sqrt(d));
  auto p = at::sigmoid(at::mv(data->x, w_star) + 0.1);
  data->y = at::bernoulli(p, gen).to(at::kFloat);
  return data;
}

std::unique_ptr<Workload> make_logistic_regression(const LogisticRegressionSpec& spec,
                                                   std::shared_ptr<const SyntheticDataset> data, std::uint64_t seed,
                                                   int rank, int ranks) {
  return std::make_unique<LogisticRegression>(spec, std::move(data), seed, rank, ranks);
}

}  // namespace dtsim::workloads
