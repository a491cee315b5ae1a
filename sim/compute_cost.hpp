// The work a compute phase does, and the cost model that turns it into simulated time.
#pragma once

namespace dtsim::sim {

// What a compute phase costs, stated by the code that runs it (e.g. an optimizer update
// over d parameters touches about 20*d bytes and does about 6*d flops).
struct ComputeCost {
  double flops = 0.0;
  double bytes = 0.0;  // bytes read plus bytes written
};

// Roofline-free additive model: time = flops / flop rate + bytes / memory bandwidth.
// Deterministic, so emulated runs are reproducible bit for bit.
struct ComputeModel {
  double flops_per_s = 1e12;
  double bytes_per_s = 1e11;
  double seconds(const ComputeCost& c) const { return c.flops / flops_per_s + c.bytes / bytes_per_s; }
};

}  // namespace dtsim::sim
