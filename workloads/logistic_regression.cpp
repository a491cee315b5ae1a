#include "workloads/logistic_regression.hpp"
#include "workloads/workload_registry.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace dtsim::workloads {

namespace {

at::Generator generator(std::uint64_t seed) { return at::detail::createCPUGenerator(seed); }

class LogisticRegression final : public Workload {
 public:
  LogisticRegression(const LogisticRegressionSpec& spec, std::shared_ptr<const SyntheticDataset> data,
                     std::uint64_t seed, int rank, int ranks)
      : spec_(spec), data_(std::move(data)), gen_(generator(seed * 1000003ULL + 7919ULL * (rank + 1))) {
    const std::int64_t n = data_->x.size(0);
    if (n < ranks)
      throw std::invalid_argument(fmt::format("logistic regression: {} samples for {} ranks", n, ranks));
    // Sample indices stay on the CPU (drawn from CPU generators); a batch's indices go to
    // the data's device when it is gathered.
    at::Tensor order;
    if (spec.partition == "iid") {
      order = at::randperm(n, generator(seed ^ 0x5eed5eedULL), at::kLong);
    } else if (spec.partition == "sorted") {
      order = std::get<1>(data_->y.to(at::kCPU).sort(/*stable=*/true, 0, false));
    } else {
      throw std::invalid_argument(fmt::format("unknown partition \"{}\" (expected iid or sorted)", spec.partition));
    }
    const std::int64_t base = n / ranks, extra = n % ranks;
    const std::int64_t begin = rank * base + std::min<std::int64_t>(rank, extra);
    const std::int64_t count = base + (rank < extra ? 1 : 0);
    shard_ = order.narrow(0, begin, count).clone();
    full_batch_ = spec.batch_size == 0;
    batch_ = full_batch_ ? count : std::min(spec.batch_size, count);
  }

  std::vector<at::Tensor> initial_parameters() const override {
    return {at::zeros({data_->x.size(1)}, data_->x.options()), at::zeros({1}, data_->x.options())};
  }
  std::vector<std::string> parameter_names() const override { return {"weight", "bias"}; }
  DataShard data_shard() const override { return {shard_.numel(), batch_}; }

  double forward(const std::vector<at::Tensor>& params) override {
    if (full_batch_) {
      epoch_order_ = shard_;  // the whole shard, in shard order, every step
      cursor_ = 0;
    } else if (cursor_ + batch_ > shard_.numel() || epoch_order_.numel() == 0) {
      epoch_order_ = shard_.index_select(0, at::randperm(shard_.numel(), gen_, at::kLong));
      cursor_ = 0;
    }
    auto idx = epoch_order_.narrow(0, cursor_, batch_).to(data_->x.device());
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
    const double b = static_cast<double>(batch_), d = static_cast<double>(data_->x.size(1));
    return {2.0 * b * d + 20.0 * b, 4.0 * (b * d + d + 3.0 * b)};
  }
  sim::ComputeCost backward_cost() const override {
    const double b = static_cast<double>(batch_), d = static_cast<double>(data_->x.size(1));
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
  bool full_batch_ = false;
};

std::string token_text(std::string_view t) {
  return t.size() > 40 ? std::string(t.substr(0, 37)) + "..." : std::string(t);
}

// A whole token as a finite double, or nullopt.
std::optional<double> parse_double(std::string_view t) {
  if (t.empty()) return std::nullopt;
  std::string s(t);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

namespace {

// Reads every line of a LIBSVM text, calling on_sample(label, row) for each sample (row:
// (0-based index, value) pairs, ascending); returns the shape.
template <typename OnSample>
LibsvmShape read_libsvm(std::istream& in, const std::string& name, std::int64_t features, OnSample&& on_sample) {
  std::int64_t samples = 0, largest = 0;
  std::string line;
  std::vector<std::pair<std::int64_t, float>> row;
  for (std::int64_t number = 1; std::getline(in, line); ++number) {
    auto fail = [&](const std::string& what) {
      return std::invalid_argument(fmt::format("{}:{}: {}", name, number, what));
    };
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream tokens(line);
    std::string token;
    if (!(tokens >> token)) continue;  // blank or comment-only line
    const auto label = parse_double(token);
    if (!label || (*label != 1.0 && *label != -1.0 && *label != 0.0))
      throw fail(fmt::format("expected a label +1, -1, 1 or 0, got \"{}\"", token_text(token)));
    row.clear();
    std::int64_t previous = 0;
    while (tokens >> token) {
      const auto colon = token.find(':');
      std::int64_t index = 0;
      const std::string_view index_text = std::string_view(token).substr(0, colon);
      const auto [ptr, ec] = std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
      const auto value = colon == std::string::npos ? std::nullopt : parse_double(std::string_view(token).substr(colon + 1));
      if (colon == std::string::npos || ec != std::errc() || ptr != index_text.data() + index_text.size() || index < 1 ||
          !value)
        throw fail(fmt::format("expected index:value (an integer index >= 1 and a finite number), got \"{}\"",
                               token_text(token)));
      if (index <= previous)
        throw fail(fmt::format("expected ascending indices, got {} after {}", index, previous));
      if (features > 0 && index > features)
        throw fail(fmt::format("expected indices <= features ({}), got {}", features, index));
      previous = index;
      largest = std::max(largest, index);
      row.emplace_back(index - 1, static_cast<float>(*value));
    }
    ++samples;
    on_sample(*label == 1.0 ? 1.0f : 0.0f, row);
  }
  if (in.bad()) throw std::invalid_argument(fmt::format("{}: read error", name));
  if (samples == 0) throw std::invalid_argument(fmt::format("{}: expected at least one sample, got none", name));
  const std::int64_t d = features > 0 ? features : largest;
  if (d < 1) throw std::invalid_argument(fmt::format("{}: expected at least one feature index, got none", name));
  return {samples, d};
}

constexpr std::int64_t kMaxDenseBytes = std::int64_t{1} << 40;

}  // namespace

std::shared_ptr<const SyntheticDataset> parse_libsvm(std::istream& in, const std::string& name, std::int64_t features) {
  std::vector<float> labels;
  std::vector<std::vector<std::pair<std::int64_t, float>>> rows;
  const auto [n, d] = read_libsvm(in, name, features, [&](float label, const auto& row) {
    labels.push_back(label);
    rows.push_back(row);
  });
  // n x d x 4 bytes, without overflowing: an index of 10^15 in a one-line file is not data.
  if (d > kMaxDenseBytes / 4 / n)
    throw std::invalid_argument(fmt::format("{}: expected a dense float32 matrix of at most 1 TiB, got {} samples x {} "
                                            "features",
                                            name, n, d));
  auto data = std::make_shared<SyntheticDataset>();
  try {
    data->x = at::zeros({n, d}, at::kFloat);
  } catch (const c10::Error&) {
    throw std::invalid_argument(
        fmt::format("{}: cannot allocate the dense {} x {} float32 matrix ({} bytes)", name, n, d, n * d * 4));
  }
  auto x = data->x.accessor<float, 2>();
  for (std::int64_t i = 0; i < n; ++i)
    for (const auto& [j, v] : rows[static_cast<std::size_t>(i)]) x[i][j] = v;
  data->y = at::tensor(labels, at::kFloat);
  return data;
}

std::shared_ptr<const SyntheticDataset> load_libsvm(const std::string& path, std::int64_t features) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("cannot read LIBSVM file {}", path));
  return parse_libsvm(in, path, features);
}

LibsvmShape libsvm_shape(std::istream& in, const std::string& name, std::int64_t features) {
  return read_libsvm(in, name, features, [](float, const auto&) {});
}

LibsvmShape libsvm_shape(const std::string& path, std::int64_t features) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("cannot read LIBSVM file {}", path));
  return libsvm_shape(in, path, features);
}

std::shared_ptr<const SyntheticDataset> logistic_dataset(const LabelledData& data) {
  auto out = std::make_shared<SyntheticDataset>();
  out->x = data.train_x;
  out->y = data.train_y.to(at::kFloat);
  return out;
}

std::unique_ptr<Workload> make_logistic_regression(const LogisticRegressionSpec& spec,
                                                   std::shared_ptr<const SyntheticDataset> data, std::uint64_t seed,
                                                   int rank, int ranks) {
  return std::make_unique<LogisticRegression>(spec, std::move(data), seed, rank, ranks);
}

namespace {

struct LogisticData : WorkloadData {
  std::shared_ptr<const SyntheticDataset> dataset;
};

// "batch_size": a positive integer, or "full" / 0 for the whole shard every step.
std::int64_t parse_batch_size(config::ObjectReader& w, std::int64_t fallback) {
  if (const auto* b = w.find("batch_size"); b && b->is_string()) {
    if (b->get<std::string>() != "full")
      throw config::ScenarioError(w.where("batch_size"), config::ErrorKind::wrong_type,
                                  "expected a positive integer, 0 or \"full\", got " + config::describe(*b));
    return 0;
  }
  return w.integer("batch_size", fallback, 0, config::kIntMax);
}

void parse_logistic(config::ObjectReader& w, WorkloadSpec& spec, const WorkloadContext&) {
  LogisticRegressionSpec s;
  s.batch_size = parse_batch_size(w, s.batch_size);
  s.partition = w.choice("partition", s.partition, {"iid", "sorted"});
  spec.settings = s;
}

void logistic_json(const WorkloadSpec& spec, nlohmann::json& out) {
  const auto& s = settings_of<LogisticRegressionSpec>(spec);
  out["batch_size"] = s.batch_size;
  out["partition"] = s.partition;
}

WorkloadFootprint logistic_footprint(const WorkloadSpec& spec, int ranks) {
  constexpr double kFloat = 4;
  WorkloadFootprint w;
  const auto& lr = settings_of<LogisticRegressionSpec>(spec);
  const auto data = workload_data(spec);
  const auto shape = data_source_entry(data.source).shape(data);
  const double samples = static_cast<double>(shape.train), features = static_cast<double>(shape.sample_elements());
  w.elements = features + 1;
  w.sizes_backward = {1, shape.sample_elements()};
  // x and y, the generator's temporaries and the evaluation's per-sample vectors, one
  // rank's permutation of every sample index while it builds its shard.
  w.data_bytes = samples * features * kFloat + samples * 48;
  const double shard = std::ceil(samples / std::max(1, ranks));
  const double batch = lr.batch_size == 0 ? shard : std::min(static_cast<double>(lr.batch_size), shard);
  w.per_rank_bytes = 2 * shard * 8 + batch * (features + 5) * kFloat;
  return w;
}

}  // namespace

const WorkloadEntry& logistic_regression_entry() {
  static const WorkloadEntry entry{
      .name = "logistic_regression",
      .description = "logistic regression on synthetic data or a LIBSVM file (the convex problem of the CHOCO-SGD "
                     "experiments)",
      .fields =
          with_data_fields({"batch_size", "partition"}, sources_yielding(SampleKind::binary_vectors, "synthetic")),
      .data_sources = sources_yielding(SampleKind::binary_vectors, "synthetic"),
      .parse = parse_logistic,
      .to_json = logistic_json,
      .load_data = [](const WorkloadSpec& spec, std::uint64_t seed) -> std::shared_ptr<const WorkloadData> {
        auto data = std::make_shared<LogisticData>();
        data->dataset = on_device(logistic_dataset(*load_data_source(workload_data(spec), seed)), spec.device,
                                  [](const SyntheticDataset& from, SyntheticDataset& to, at::Device device) {
                                    to.x = from.x.to(device);
                                    to.y = from.y.to(device);
                                  });
        return data;
      },
      .make = [](const WorkloadSpec& spec, std::shared_ptr<const WorkloadData> data, std::uint64_t seed, int rank,
                 int ranks) {
        return make_logistic_regression(settings_of<LogisticRegressionSpec>(spec), data_for<LogisticData>(data, spec.type).dataset, seed, rank, ranks);
      },
      .footprint = logistic_footprint};
  return entry;
}

}  // namespace dtsim::workloads
