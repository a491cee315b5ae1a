#include "workloads/torchscript_model.hpp"

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/autograd.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/json_input.hpp"
#include "workloads/image32_entry.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim::workloads {

namespace {

// The line of a LibTorch error that says what went wrong: c10::Error's message without its
// C++ backtrace; of a TorchScript interpreter error (a traceback of the module's code,
// then "RuntimeError: ..."), the last line.
std::string brief(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::istringstream text(c10_error ? c10_error->what_without_backtrace() : e.what());
  std::string line, first, last;
  while (std::getline(text, line)) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (first.empty()) first = line;
    last = line;
  }
  const bool traceback = first.find("Traceback") != std::string::npos ||
                         first.find("The following operation failed") != std::string::npos;
  return config::one_line(traceback ? last : first);
}

class ScriptModule final : public TrainableModule {
 public:
  explicit ScriptModule(torch::jit::Module module) : module_(std::move(module)) {
    // Every parameter must be a leaf that requires a gradient (its .grad is the
    // gradient): Module::clone deep-copies a parameter with Tensor::clone, which makes it
    // a non-leaf of the original, and a loaded module's may not require gradients. The
    // detached tensor keeps the copy's storage.
    for (auto sub : module_.modules())  // a Module is a handle: the copy is the submodule
      for (const auto& p : sub.named_parameters(/*recurse=*/false))
        if (!p.value.is_leaf() || !p.value.requires_grad())
          sub.register_parameter(p.name, p.value.detach().requires_grad_(true), /*is_buffer=*/false);
  }
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) out.emplace_back(p.name, p.value);
    return out;
  }
  std::vector<at::Tensor> buffers() const override {
    std::vector<at::Tensor> out;
    for (const auto& b : module_.buffers(/*recurse=*/true)) out.push_back(b);
    return out;
  }
  at::Tensor forward(const at::Tensor& x) override {
    auto out = run({c10::IValue(x)});
    if (!out.isTensor()) throw std::runtime_error("torchscript: forward(x) returned " + out.tagKind() + ", not logits");
    return out.toTensor();
  }
  std::pair<at::Tensor, at::Tensor> forward_loss(const at::Tensor& x, const at::Tensor& y) override {
    auto out = run({c10::IValue(x), c10::IValue(y)});
    if (out.isTensor()) return {out.toTensor(), {}};
    if (out.isTuple() && out.toTupleRef().elements().size() == 2 && out.toTupleRef().elements()[0].isTensor() &&
        out.toTupleRef().elements()[1].isTensor())
      return {out.toTupleRef().elements()[0].toTensor(), out.toTupleRef().elements()[1].toTensor()};
    throw std::runtime_error("torchscript: forward(x, y) returned " + out.tagKind() + ", not a loss");
  }
  void train(bool on) override { module_.train(on); }
  void to(at::Device device) override { module_.to(device); }

 private:
  c10::IValue run(std::vector<c10::IValue> inputs) {
    torch::jit::GraphOptimizerEnabledGuard plain(false);
    return module_.forward(std::move(inputs));
  }
  torch::jit::Module module_;
};

}  // namespace

std::shared_ptr<TrainableModule> script_trainable(torch::jit::Module module) {
  return std::make_shared<ScriptModule>(std::move(module));
}

torch::jit::Module load_torchscript_model(const std::string& file, const std::vector<std::int64_t>& input_shape,
                                          const std::string& loss, std::int64_t classes) {
  if (const auto why = config::not_a_regular_file(file)) throw std::invalid_argument(fmt::format("{} {}", file, *why));
  torch::jit::Module module;
  try {
    module = torch::jit::load(file, at::Device(at::kCPU));
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("{}: expected a TorchScript module (torch.jit.save), got a file LibTorch "
                                            "cannot load ({})",
                                            file, brief(e)));
  }
  const auto forward = module.find_method("forward");
  if (!forward) throw std::invalid_argument(fmt::format("{}: the TorchScript module has no forward method", file));
  const auto& arguments = forward->function().getSchema().arguments();
  std::vector<std::string> names;
  for (std::size_t i = 1; i < arguments.size(); ++i) names.push_back(arguments[i].name());
  const std::size_t expected = loss == "module" ? 2 : 1;
  if (names.size() != expected)
    throw std::invalid_argument(fmt::format("{}: expected forward(self, {}) for loss {}, got forward(self{}{})", file,
                                            expected == 2 ? "x, y" : "x", loss, names.empty() ? "" : ", ",
                                            fmt::join(names, ", ")));
  const auto params = module.named_parameters(/*recurse=*/true);
  if (params.size() == 0) throw std::invalid_argument(fmt::format("{}: the TorchScript module has no parameters", file));
  for (const auto& p : params)
    if (!at::isFloatingType(p.value.scalar_type()))
      throw std::invalid_argument(fmt::format("{}: parameter {} is {}, expected floating point", file, p.name,
                                              c10::toString(p.value.scalar_type())));

  // One forward on two zero samples, in eval mode (no BatchNorm statistics move), on a
  // clone, so the file's module is left as loaded.
  std::vector<std::int64_t> shape{2};
  shape.insert(shape.end(), input_shape.begin(), input_shape.end());
  const auto x = at::zeros(shape, at::TensorOptions((*params.begin()).value.scalar_type()));
  const auto y = at::zeros({2}, at::kLong);
  auto probe = module.clone();
  probe.eval();
  c10::IValue out;
  try {
    torch::NoGradGuard no_grad;
    torch::jit::GraphOptimizerEnabledGuard plain(false);
    std::vector<c10::IValue> inputs{c10::IValue(x)};
    if (loss == "module") inputs.emplace_back(y);
    out = probe.forward(std::move(inputs));
  } catch (const std::exception& e) {
    throw std::invalid_argument(
        fmt::format("{}: forward on a batch of 2 x {} failed: {}", file, fmt::join(input_shape, " x "), brief(e)));
  }
  if (loss == "module") {
    const bool ok = (out.isTensor() && out.toTensor().numel() == 1) ||
                    (out.isTuple() && out.toTupleRef().elements().size() == 2 &&
                     out.toTupleRef().elements()[0].isTensor() && out.toTupleRef().elements()[0].toTensor().numel() == 1 &&
                     out.toTupleRef().elements()[1].isTensor());
    if (!ok)
      throw std::invalid_argument(fmt::format("{}: expected forward(x, y) to return the loss (a scalar tensor) or (loss, "
                                              "logits), got {}",
                                              file, out.tagKind()));
  } else {
    if (!out.isTensor() || out.toTensor().dim() != 2 || out.toTensor().size(0) != 2 || out.toTensor().size(1) < classes)
      throw std::invalid_argument(fmt::format(
          "{}: expected forward(x) to return logits [2, {}] for 2 samples of {} classes, got {}", file, classes, classes,
          out.isTensor() ? fmt::format("a tensor [{}]", fmt::join(out.toTensor().sizes(), ", ")) : out.tagKind()));
  }
  // Every parameter must get a gradient (the workload hands out one per parameter): one
  // backward of the same batch in training mode, on the clone.
  try {
    auto trainable = script_trainable(probe);
    trainable->train(true);
    torch::AutoGradMode grad_mode(true);
    const auto loss_value = loss == "module"
                                ? trainable->forward_loss(x, y).first
                                : at::nll_loss(at::log_softmax(trainable->forward(x), 1), y);
    loss_value.sum().backward();
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("{}: backward of the loss failed: {}", file, brief(e)));
  }
  for (const auto& p : probe.named_parameters(/*recurse=*/true))
    if (!p.value.grad().defined())
      throw std::invalid_argument(fmt::format("{}: parameter {} gets no gradient from the loss", file, p.name));
  return module;
}

std::unique_ptr<ModuleWorkload> make_torchscript_workload(const torch::jit::Module& module, const std::string& loss,
                                                          std::shared_ptr<const LabelledData> data,
                                                          std::int64_t batch_size, const std::string& partition,
                                                          std::uint64_t seed, int rank, int ranks) {
  ModuleModel model;
  model.other = script_trainable(module.clone());
  model.loss = loss == "module" ? ModuleModel::Loss::module : ModuleModel::Loss::cross_entropy;
  return std::make_unique<ModuleWorkload>(std::move(model), std::move(data), batch_size, partition, seed, rank, ranks);
}

// --- the registry entry of "torchscript" (workload_registry.hpp) ------------------------

namespace {

using config::ErrorKind;
using config::ScenarioError;

struct TorchScriptData : WorkloadData {
  std::shared_ptr<const LabelledData> dataset;
  torch::jit::Module module;
};

std::vector<std::int64_t> parse_input_shape(config::ObjectReader& w) {
  const auto& v = w.require("input_shape", "the per-sample shape, an array of positive integers such as [1, 28, 28]");
  if (!v.is_array() || v.empty() || v.size() > 4)
    throw ScenarioError(w.where("input_shape"), ErrorKind::wrong_type,
                        "expected the per-sample shape, 1 to 4 positive integers such as [1, 28, 28], got " +
                            config::describe(v));
  std::vector<std::int64_t> shape;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<std::int64_t>() < 1 || v[i].get<std::int64_t>() > (1 << 20))
      throw ScenarioError(fmt::format("{}/{}", w.where("input_shape"), i), ErrorKind::out_of_range,
                          "expected a positive integer, got " + config::describe(v[i]));
    shape.push_back(v[i].get<std::int64_t>());
  }
  return shape;
}

void parse(config::ObjectReader& w, WorkloadSpec& spec, const WorkloadContext&) {
  spec.batch_size = w.integer("batch_size", spec.batch_size, 1, config::kIntMax);
  spec.partition = w.choice("partition", spec.partition, {"iid", "by_label"});
  TorchScriptSpec script;
  script.loss = w.choice("loss", script.loss, {"cross_entropy", "module"});
  // The one cost source a TorchScript model has, echoed so that a result says where its
  // compute times come from.
  w.choice("cost", "estimated from ops", {"estimated from ops"});
  script.input_shape = parse_input_shape(w);
  const auto data = data_source_entry(spec.data.source).shape(spec.data);
  if (data.sample != script.input_shape)
    throw ScenarioError(w.where("input_shape"), ErrorKind::inconsistent,
                        fmt::format("expected the data's sample shape [{}], got [{}]", fmt::join(data.sample, ", "),
                                    fmt::join(script.input_shape, ", ")));
  script.model_file = w.string("model_file", std::nullopt);
  if (script.model_file.empty())
    throw ScenarioError(w.where("model_file"), ErrorKind::out_of_range, "expected a non-empty path");
  try {
    load_torchscript_model(script.model_file, script.input_shape, script.loss, data.classes);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(w.where("model_file"), ErrorKind::bad_file, e.what());
  }
  spec.settings = script;
}

void to_json(const WorkloadSpec& spec, nlohmann::json& out) {
  const auto& script = settings_of<TorchScriptSpec>(spec);
  out["model_file"] = script.model_file;
  out["input_shape"] = script.input_shape;
  out["loss"] = script.loss;
  out["cost"] = "estimated from ops";
  out["batch_size"] = spec.batch_size;
  out["partition"] = spec.partition;
}

std::shared_ptr<const WorkloadData> load(const WorkloadSpec& spec, std::uint64_t seed) {
  const auto& script = settings_of<TorchScriptSpec>(spec);
  auto data = std::make_shared<TorchScriptData>();
  data->dataset = load_image_dataset(spec, seed);
  data->module = load_torchscript_model(script.model_file, script.input_shape, script.loss,
                                        data->dataset->classes);
  return data;
}

std::unique_ptr<Workload> make(const WorkloadSpec& spec, std::shared_ptr<const WorkloadData> data, std::uint64_t seed,
                               int rank, int ranks) {
  const auto& script = settings_of<TorchScriptSpec>(spec);
  const auto& d = data_for<TorchScriptData>(data, spec.type);
  return make_torchscript_workload(d.module, script.loss, d.dataset, spec.batch_size, spec.partition, seed, rank,
                                   ranks);
}

// Parameters from the file (read again: the spec holds only its name); activations are
// not known without running the module, and are guessed at 16 fp32 values per input
// element per sample (ResNet-20 has about 60).
WorkloadFootprint footprint(const WorkloadSpec& spec, int ranks) {
  const auto& script = settings_of<TorchScriptSpec>(spec);
  constexpr double kFloat = 4;
  const auto d = [](auto x) { return static_cast<double>(x); };
  const auto data = workload_data(spec);
  const auto shape = data_source_entry(data.source).shape(data);
  WorkloadFootprint w;
  try {
    const auto module = torch::jit::load(script.model_file, at::Device(at::kCPU));
    for (const auto& p : module.named_parameters(/*recurse=*/true)) {
      w.sizes_backward.insert(w.sizes_backward.begin(), p.value.numel());
      w.elements += d(p.value.numel());
    }
  } catch (const std::exception&) {
    // The parse has checked the file; one that changed since is the load's to report.
  }
  const double train = d(shape.train), test = d(shape.test), sample = d(shape.sample_elements());
  w.data_bytes = (train + test) * (sample * kFloat + 8) + shape.file_bytes + 2000 * 16 * sample * kFloat;
  const double shard = std::ceil(train / std::max(1, ranks)), batch = std::min(d(spec.batch_size), shard);
  w.per_rank_bytes = 2 * shard * 8 + batch * 16 * sample * 2 * kFloat + 2 * w.elements * kFloat;
  return w;
}

}  // namespace

const WorkloadEntry& torchscript_entry() {
  const auto sources = sources_yielding(SampleKind::labelled_samples, "fashion_mnist");
  static const WorkloadEntry entry{
      .name = "torchscript",
      .description = "your own model: a TorchScript module (torch.jit.save) under autograd, on an image data source; "
                     "costs estimated from its ops",
      .fields = with_data_fields({"model_file", "input_shape", "loss", "cost", "batch_size", "partition"}, sources),
      .data_sources = sources,
      .path_fields = {"model_file"},
      .parse = parse,
      .to_json = to_json,
      .load_data = load,
      .make = make,
      .footprint = footprint};
  return entry;
}

}  // namespace dtsim::workloads
