#include "network_models/port_flows.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::net {

namespace {

// Engine arguments: 0 is a solve; otherwise version << kFlowBits | (flow + 1).
constexpr int kFlowBits = 24;
constexpr std::uint64_t kFlowMask = (std::uint64_t{1} << kFlowBits) - 1;
constexpr std::uint64_t kVersionMask = (std::uint64_t{1} << (62 - kFlowBits)) - 1;

}  // namespace

PortFlows::PortFlows(sim::Engine& engine, int ports)
    : engine_(engine), ports_(ports), resources_(static_cast<std::size_t>(2 * std::max(ports, 0))) {
  if (ports < 1) throw std::invalid_argument(fmt::format("PortFlows: expected at least one port, got {}", ports));
}

void PortFlows::start(double seconds, int egress, int ingress, Client& client, std::uint64_t tag, double share) {
  if (egress < 0 || egress >= ports_ || ingress < 0 || ingress >= ports_)
    throw std::out_of_range(fmt::format("PortFlows: ports {} and {} of {}", egress, ingress, ports_));
  if (!(share > 0.0 && share <= 1.0))
    throw std::invalid_argument(fmt::format("PortFlows: a transfer's share of its ports must be in (0, 1], got {}", share));
  const int f = add(seconds, egress, ingress, client, tag, share);
  for (int resource : {2 * egress, 2 * ingress + 1}) {
    resources_[static_cast<std::size_t>(resource)].flows.push_back(f);
    touch(resource);
  }
  request_solve();
}

void PortFlows::start_everywhere(double seconds, Client& client, std::uint64_t tag) {
  everywhere_.push_back(add(seconds, kEverywhere, kEverywhere, client, tag, 1.0));
  everywhere_changed_ = true;
  request_solve();
}

int PortFlows::add(double seconds, int egress, int ingress, Client& client, std::uint64_t tag, double share) {
  int f;
  if (free_flows_.empty()) {
    f = static_cast<int>(flows_.size());
    if (static_cast<std::uint64_t>(f) + 1 >= kFlowMask) throw std::length_error("PortFlows: too many transfers at once");
    flows_.emplace_back();
  } else {
    f = free_flows_.back();
    free_flows_.pop_back();
  }
  Flow& flow = flows_[static_cast<std::size_t>(f)];
  const std::uint64_t version = flow.version;  // kept across reuse: a stale end never matches
  flow = Flow{.remaining = std::max(seconds, 0.0), .rate = 0.0, .share = share, .updated_at = engine_.now(), .version = version + 1,
              .tag = tag, .client = &client, .egress = egress, .ingress = ingress, .active = true};
  ++active_;
  return f;
}

void PortFlows::remove(int f) {
  Flow& flow = flows_[static_cast<std::size_t>(f)];
  if (flow.egress == kEverywhere) {
    everywhere_.erase(std::find(everywhere_.begin(), everywhere_.end(), f));
    everywhere_changed_ = true;
  } else {
    for (int resource : {2 * flow.egress, 2 * flow.ingress + 1}) {
      auto& on = resources_[static_cast<std::size_t>(resource)].flows;
      on.erase(std::find(on.begin(), on.end(), f));
      touch(resource);
    }
  }
  flow.active = false;
  ++flow.version;
  --active_;
  free_flows_.push_back(f);
}

void PortFlows::touch(int resource) {
  auto& r = resources_[static_cast<std::size_t>(resource)];
  if (r.seen) return;
  r.seen = true;  // reset by the solve
  touched_.push_back(resource);
}

void PortFlows::request_solve() {
  if (solve_pending_) return;
  solve_pending_ = true;
  engine_.call_at(engine_.now(), *this, 0);
}

void PortFlows::on_event(std::uint64_t arg) {
  if (arg == 0) {
    solve_pending_ = false;
    solve();
    return;
  }
  const int f = static_cast<int>((arg & kFlowMask) - 1);
  Flow& flow = flows_[static_cast<std::size_t>(f)];
  if (!flow.active || (flow.version & kVersionMask) != (arg >> kFlowBits)) return;  // rescheduled since
  Client& client = *flow.client;
  const std::uint64_t tag = flow.tag;
  remove(f);
  request_solve();
  client.transfer_done(tag);
}

void PortFlows::solve() {
  ++solves_;
  const double now = engine_.now();
  // The component: every active transfer when one is on every port, else the transfers
  // reachable from the touched ports through the ports they hold.
  component_flows_.clear();
  component_resources_.clear();
  if (!everywhere_.empty() || everywhere_changed_) {
    for (int r : touched_) resources_[static_cast<std::size_t>(r)].seen = false;
    for (std::size_t f = 0; f < flows_.size(); ++f)
      if (flows_[f].active) component_flows_.push_back(static_cast<int>(f));
    if (active_ == everywhere_.size()) {
      component_resources_.push_back(0);  // every port carries just these: one stands for all
    } else {
      for (std::size_t r = 0; r < resources_.size(); ++r) component_resources_.push_back(static_cast<int>(r));
    }
  } else {
    // Touched resources are marked seen; walk from them.
    component_resources_ = touched_;
    for (std::size_t i = 0; i < component_resources_.size(); ++i) {
      for (int f : resources_[static_cast<std::size_t>(component_resources_[i])].flows) {
        Flow& flow = flows_[static_cast<std::size_t>(f)];
        if (flow.seen) continue;
        flow.seen = true;
        component_flows_.push_back(f);
        for (int resource : {2 * flow.egress, 2 * flow.ingress + 1}) {
          auto& r = resources_[static_cast<std::size_t>(resource)];
          if (r.seen) continue;
          r.seen = true;
          component_resources_.push_back(resource);
        }
      }
    }
    for (int r : component_resources_) resources_[static_cast<std::size_t>(r)].seen = false;
    for (int f : component_flows_) flows_[static_cast<std::size_t>(f)].seen = false;
  }
  touched_.clear();
  everywhere_changed_ = false;

  // Work done at the old rates; then progressive filling from zero.
  const int everywhere = static_cast<int>(everywhere_.size());
  for (int f : component_flows_) {
    Flow& flow = flows_[static_cast<std::size_t>(f)];
    flow.remaining = std::max(0.0, flow.remaining - flow.rate * (now - flow.updated_at));
    flow.updated_at = now;
    flow.frozen = false;
  }
  for (int r : component_resources_) {
    auto& res = resources_[static_cast<std::size_t>(r)];
    res.free = 1.0;
    res.unfrozen = static_cast<int>(res.flows.size()) + everywhere;
    res.demand = everywhere;
    for (int f : res.flows) res.demand += flows_[static_cast<std::size_t>(f)].share;
  }
  std::vector<double>& rates = rates_;  // per component flow, its new rate
  rates.assign(component_flows_.size(), 0.0);
  auto freeze = [&](std::size_t i, double level) {
    Flow& flow = flows_[static_cast<std::size_t>(component_flows_[i])];
    flow.frozen = true;
    rates[i] = level;
    auto take = [&](Resource& res) {
      res.free -= flow.share * level;
      res.demand -= flow.share;
      --res.unfrozen;
    };
    if (flow.egress == kEverywhere) {
      for (int r : component_resources_) take(resources_[static_cast<std::size_t>(r)]);
      return;
    }
    for (int resource : {2 * flow.egress, 2 * flow.ingress + 1}) take(resources_[static_cast<std::size_t>(resource)]);
  };
  std::size_t left = component_flows_.size();
  while (left > 0) {
    // The pace every unfrozen transfer can rise to before a port fills: its time left over
    // the unfrozen transfers' shares of it.
    double level = std::numeric_limits<double>::infinity();
    for (int r : component_resources_) {
      const auto& res = resources_[static_cast<std::size_t>(r)];
      if (res.unfrozen > 0) level = std::min(level, res.free / res.demand);
    }
    // The ports at that level, all found before any of their transfers is frozen (so ties
    // stay ties), then every transfer on one of them frozen at it: at least the transfers
    // of the port that set the level, so every pass freezes some. A level at or beyond a
    // transfer's own pace fills no port: every transfer left runs at its own pace.
    const bool own_pace = level >= 1.0;
    bool any_bottleneck = false;
    for (int r : component_resources_) {
      auto& res = resources_[static_cast<std::size_t>(r)];
      res.bottleneck = !own_pace && res.unfrozen > 0 && res.free / res.demand <= level;
      any_bottleneck = any_bottleneck || res.bottleneck;
    }
    level = std::clamp(level, 1e-12, 1.0);
    std::size_t frozen_now = 0;
    for (std::size_t i = 0; i < component_flows_.size(); ++i) {
      const Flow& flow = flows_[static_cast<std::size_t>(component_flows_[i])];
      if (flow.frozen) continue;
      const bool limited = own_pace || (flow.egress == kEverywhere
                                            ? any_bottleneck
                                            : resources_[static_cast<std::size_t>(2 * flow.egress)].bottleneck ||
                                                  resources_[static_cast<std::size_t>(2 * flow.ingress + 1)].bottleneck);
      if (!limited) continue;
      freeze(i, level);
      ++frozen_now;
    }
    left -= frozen_now;
  }

  // New ends for the transfers whose rate changed (a transfer whose rate stays keeps its
  // end, so one that runs alone throughout ends exactly its time after it started).
  for (std::size_t i = 0; i < component_flows_.size(); ++i) {
    const int f = component_flows_[i];
    Flow& flow = flows_[static_cast<std::size_t>(f)];
    if (rates[i] == flow.rate) continue;
    flow.rate = rates[i];
    ++flow.version;
    const double end = engine_.time_grid().later(now, flow.remaining / flow.rate);
    engine_.call_at(end, *this, (flow.version & kVersionMask) << kFlowBits | (static_cast<std::uint64_t>(f) + 1));
  }
}

}  // namespace dtsim::net
