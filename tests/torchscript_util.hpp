// TorchScript modules built in C++ for the tests (torch::jit::Module, register_parameter,
// define() with TorchScript source, save()), so that no test needs Python: an MLP of
// given layers, a small conv + linear network, and the CIFAR ResNet-20 with the built-in
// resnet20_real's structure and parameter names. Each module class gets a name of its own
// (a saved archive holds one class per name).
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace dtsim::testing {

inline torch::jit::Module jit_module(const std::string& class_name) {
  static int counter = 0;
  torch::jit::Module m(fmt::format("dtsim_test.{}{}", class_name, counter++));
  m.register_attribute("training", c10::BoolType::get(), true);
  return m;
}

inline at::Tensor parameter(const at::Tensor& t) { return t.detach().clone().requires_grad_(true); }

inline torch::jit::Module jit_linear(const at::Tensor& weight, const at::Tensor& bias) {
  auto m = jit_module("Linear");
  m.register_parameter("weight", parameter(weight), false);
  m.register_parameter("bias", parameter(bias), false);
  m.define(R"(
def forward(self, x):
    return torch.linear(x, self.weight, self.bias)
)");
  return m;
}

// flatten - fc1 - relu - fc2 - relu - ... - fcN, from (weight, bias) pairs: the built-in
// mlp's structure and names given its parameters in its order.
inline torch::jit::Module jit_mlp(const std::vector<at::Tensor>& params) {
  auto m = jit_module("MLP");
  const std::size_t layers = params.size() / 2;
  std::string body = "def forward(self, x):\n    x = torch.flatten(x, 1)\n";
  for (std::size_t l = 1; l <= layers; ++l) {
    m.register_module(fmt::format("fc{}", l), jit_linear(params[2 * l - 2], params[2 * l - 1]));
    body += l < layers ? fmt::format("    x = torch.relu(self.fc{}.forward(x))\n", l) : fmt::format("    return self.fc{}.forward(x)\n", l);
  }
  m.define(body);
  return m;
}

inline torch::jit::Module jit_conv(const at::Tensor& weight, const std::optional<at::Tensor>& bias, std::int64_t stride,
                                   std::int64_t pad) {
  auto m = jit_module("Conv");
  m.register_parameter("weight", parameter(weight), false);
  if (bias) m.register_parameter("bias", parameter(*bias), false);
  m.define(fmt::format(R"(
def forward(self, x):
    return torch.conv2d(x, self.weight, {}, [{}, {}], [{}, {}])
)",
                       bias ? "self.bias" : "None", stride, stride, pad, pad));
  return m;
}

inline torch::jit::Module jit_batch_norm(std::int64_t channels) {
  auto m = jit_module("BatchNorm");
  m.register_parameter("weight", parameter(at::ones({channels})), false);
  m.register_parameter("bias", parameter(at::zeros({channels})), false);
  m.register_buffer("running_mean", at::zeros({channels}));
  m.register_buffer("running_var", at::ones({channels}));
  m.register_buffer("num_batches_tracked", at::zeros({}, at::kLong));
  m.define(R"(
def forward(self, x):
    if self.training:
        self.num_batches_tracked.add_(1)
    return torch.batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var, self.training, 0.1, 1e-05, False)
)");
  return m;
}

// ResNet-20 (resnet20_model.hpp's structure: option-A shortcuts, no conv biases), random
// parameters from `gen`.
inline torch::jit::Module jit_resnet20(std::int64_t in_channels, std::int64_t classes, at::Generator gen) {
  auto conv = [&](std::int64_t in, std::int64_t out, std::int64_t stride) {
    return jit_conv(at::randn({out, in, 3, 3}, gen) * 0.1, std::nullopt, stride, 1);
  };
  auto net = jit_module("ResNet20");
  net.register_module("conv1", conv(in_channels, 16, 1));
  net.register_module("bn1", jit_batch_norm(16));
  const std::int64_t widths[] = {16, 32, 64};
  std::int64_t in = 16;
  for (int stage = 0; stage < 3; ++stage) {
    auto layer = jit_module("Stage");
    std::string body = "def forward(self, x):\n";
    for (int b = 0; b < 3; ++b) {
      const std::int64_t out = widths[stage], stride = stage > 0 && b == 0 ? 2 : 1;
      auto block = jit_module("BasicBlock");
      block.register_module("conv1", conv(in, out, stride));
      block.register_module("bn1", jit_batch_norm(out));
      block.register_module("conv2", conv(out, out, 1));
      block.register_module("bn2", jit_batch_norm(out));
      const std::string shortcut =
          stride == 1 && in == out
              ? "x"
              : fmt::format("torch.constant_pad_nd(x[:, :, ::2, ::2], [0, 0, 0, 0, {}, {}], 0.)", (out - in) / 2,
                            out - in - (out - in) / 2);
      block.define(fmt::format(R"(
def forward(self, x):
    y = torch.relu(self.bn1.forward(self.conv1.forward(x)))
    y = self.bn2.forward(self.conv2.forward(y))
    return torch.relu(y + {})
)",
                               shortcut));
      layer.register_module(std::to_string(b), block);
      body += fmt::format("    x = getattr(self, \"{}\").forward(x)\n", b);
      in = out;
    }
    layer.define(body + "    return x\n");
    net.register_module(fmt::format("layer{}", stage + 1), layer);
  }
  net.register_module("fc", jit_linear(at::randn({classes, 64}, gen) * 0.1, at::zeros({classes})));
  net.define(R"(
def forward(self, x):
    h = torch.relu(self.bn1.forward(self.conv1.forward(x)))
    h = self.layer3.forward(self.layer2.forward(self.layer1.forward(h)))
    return self.fc.forward(torch.mean(h, [2, 3]))
)");
  return net;
}

}  // namespace dtsim::testing
