#include "calibration/calibration.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/closed_form.hpp"
#include "network_models/network.hpp"
#include "config/json_input.hpp"
#include "config/scenario_error.hpp"
#include "network_models/network_model.hpp"

namespace dtsim::calibration {

using nlohmann::json;

std::string to_string(Probe p) {
  switch (p) {
    case Probe::AllReduce: return "all_reduce";
    case Probe::AllGather: return "all_gather";
    case Probe::PointToPoint: return "p2p";
  }
  return "?";
}

std::pair<double, double> coefficients(const Sample& s) {
  if (s.probe == Probe::PointToPoint) return {1.0, s.bytes};
  net::CollectiveSpec spec;
  spec.algorithm = net::Algorithm::Ring;
  spec.ranks = s.ranks;
  spec.element_size = 1;
  if (s.probe == Probe::AllReduce) {
    spec.kind = net::CollectiveKind::AllReduce;
    spec.elements = static_cast<std::int64_t>(s.bytes);
  } else {
    spec.kind = net::CollectiveKind::AllGather;
    spec.block_elements.assign(static_cast<std::size_t>(s.ranks), static_cast<std::int64_t>(s.bytes));
  }
  const double inf = std::numeric_limits<double>::infinity();
  return {net::closed_form_seconds(spec, 1.0, inf), net::closed_form_seconds(spec, 0.0, 1.0)};
}

double predict(const Sample& s, const LinkFit& f) {
  const auto [a, b] = coefficients(s);
  return a * f.alpha_s + b / f.beta_bytes_per_s;
}

LinkFit fit(const std::vector<Sample>& samples) {
  // Rows x = (a/t, b/t), target 1: minimise sum (1 - x1 alpha - x2 gamma)^2, gamma = 1/beta.
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  std::vector<double> sizes;
  for (const auto& s : samples) {
    if (!(s.seconds > 0)) throw std::invalid_argument(fmt::format("{} sample of {} bytes: time must be > 0", to_string(s.probe), s.bytes));
    const auto [a, b] = coefficients(s);
    const double x1 = a / s.seconds, x2 = b / s.seconds;
    s11 += x1 * x1;
    s12 += x1 * x2;
    s22 += x2 * x2;
    r1 += x1;
    r2 += x2;
    sizes.push_back(s.bytes);
  }
  std::sort(sizes.begin(), sizes.end());
  if (std::unique(sizes.begin(), sizes.end()) - sizes.begin() < 2)
    throw std::runtime_error("calibration: need samples of at least two sizes to fit alpha and beta");
  const double det = s11 * s22 - s12 * s12;
  double alpha = 0.0, gamma = 0.0;
  if (det > 1e-12 * s11 * s22) {
    alpha = (r1 * s22 - r2 * s12) / det;
    gamma = (s11 * r2 - s12 * r1) / det;
  }
  if (!(alpha > 0.0)) {  // no latency visible (or a negative one): bandwidth alone
    alpha = 0.0;
    gamma = r2 / s22;
  }
  if (!(gamma > 0.0)) throw std::runtime_error("calibration: the samples do not determine a positive bandwidth");
  return {alpha, 1.0 / gamma};
}

std::vector<std::int64_t> geometric_sizes(std::int64_t min, std::int64_t max, double factor) {
  if (min < 1 || max < min || !(factor > 1.0))
    throw config::InputError("calibration sizes: expected 1 <= min <= max and a factor > 1");
  std::vector<std::int64_t> sizes;
  for (double b = static_cast<double>(min); b <= static_cast<double>(max) * (1 + 1e-9); b *= factor) {
    const auto bytes = std::max<std::int64_t>(4, static_cast<std::int64_t>(std::llround(b / 4.0)) * 4);
    if (sizes.empty() || sizes.back() != bytes) sizes.push_back(bytes);
  }
  return sizes;
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

sim::Task<void> barrier(comm::Communicator& comm, at::Tensor& token) { co_await comm.all_reduce(token, comm::ReduceOp::Sum); }

// Every rank's host name, by rank.
sim::Task<std::vector<std::string>> host_names(comm::Communicator& comm, at::Device device) {
  char buffer[256] = {};
  ::gethostname(buffer, sizeof buffer - 1);
  const std::string mine(buffer);
  at::Tensor name = at::empty({static_cast<std::int64_t>(mine.size())}, at::kByte);
  std::copy(mine.begin(), mine.end(), name.data_ptr<std::uint8_t>());
  name = name.to(device);
  std::vector<at::Tensor> names;
  co_await comm.all_gather(name, names);
  std::vector<std::string> hosts;
  for (const auto& t : names) {
    const at::Tensor c = t.to(at::kCPU).contiguous();
    hosts.emplace_back(c.data_ptr<std::uint8_t>(), c.data_ptr<std::uint8_t>() + c.numel());
  }
  co_return hosts;
}

}  // namespace

sim::Task<std::vector<Sample>> measure(comm::Communicator& comm, MeasureOptions o) {
  const int n = comm.size(), me = comm.rank();
  const auto options = at::TensorOptions().dtype(at::kFloat).device(o.device);
  const sim::ComputeCost no_cost;
  const std::function<void()> nothing = [] {};
  at::Tensor token = at::zeros({1}, options);

  // Link classes for the point-to-point probe: rank 0 with a rank on its host, and with
  // one on another host.
  std::vector<std::pair<std::string, int>> p2p_peers;
  if (n > 1) {
    const auto hosts = co_await host_names(comm, o.device);
    for (const char* cls : {"same_host", "other_host"})
      for (int r = 1; r < n; ++r)
        if ((hosts[r] == hosts[0]) == (std::string(cls) == "same_host")) {
          p2p_peers.emplace_back(cls, r);
          break;
        }
  }

  std::vector<Sample> samples;
  for (const Probe probe : o.probes) {
    std::vector<std::pair<std::string, int>> links{{"all", -1}};
    if (probe == Probe::PointToPoint) links = p2p_peers;
    for (const auto& [link, peer] : links) {
      for (const std::int64_t bytes : o.sizes) {
        at::Tensor t = at::zeros({std::max<std::int64_t>(1, bytes / 4)}, options);
        std::vector<at::Tensor> gathered;
        std::vector<double> times;
        for (int i = 0; i < o.warmup + o.iters; ++i) {
          co_await barrier(comm, token);
          const double start = comm.now();
          if (probe == Probe::AllReduce) {
            co_await comm.all_reduce(t, comm::ReduceOp::Sum);
          } else if (probe == Probe::AllGather) {
            co_await comm.all_gather(t, gathered);
          } else if (me == 0) {
            auto sent = comm.send(t, peer);
            co_await sent;
            co_await comm.recv(t, peer);
          } else if (me == peer) {
            co_await comm.recv(t, 0);
            auto sent = comm.send(t, 0);
            co_await sent;
          }
          co_await comm.compute(no_cost, nothing);  // on a GPU: wait until the operation is done
          double elapsed = comm.now() - start;
          if (probe == Probe::PointToPoint) elapsed /= 2.0;  // one way of the round trip
          if (i >= o.warmup) times.push_back(elapsed);
        }
        // Collectives: the rank mean per iteration; point-to-point: rank 0's round trips.
        at::Tensor per_iter = at::tensor(times, at::kDouble);
        if (probe == Probe::PointToPoint && me != 0) per_iter.zero_();
        per_iter = per_iter.to(o.device);
        co_await comm.all_reduce(per_iter, probe == Probe::PointToPoint ? comm::ReduceOp::Sum : comm::ReduceOp::Average);
        const at::Tensor host = per_iter.to(at::kCPU).contiguous();
        Sample s;
        s.probe = probe;
        s.ranks = probe == Probe::PointToPoint ? 2 : n;
        s.bytes = static_cast<double>(t.numel() * 4);
        s.seconds = median(std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel()));
        s.link = link;
        samples.push_back(s);
      }
    }
  }
  co_return samples;
}

NetworkModel fit_model(const std::vector<Sample>& samples) {
  NetworkModel model;
  std::vector<Sample> all_reduce;
  std::map<std::string, std::vector<Sample>> p2p;
  for (const auto& s : samples) {
    if (s.probe == Probe::PointToPoint) p2p[s.link].push_back(s);
    if (s.probe == Probe::AllReduce) all_reduce.push_back(s);
  }
  model.nominal = fit(all_reduce.empty() ? samples : all_reduce);
  if (p2p.size() > 1)
    for (const auto& [cls, group] : p2p) model.links[cls] = fit(group);
  return model;
}

namespace {

json link_json(const LinkFit& f) { return {{"latency_us", f.alpha_s * 1e6}, {"bandwidth_GBps", f.beta_bytes_per_s / 1e9}}; }

}  // namespace

json model_json(const NetworkModel& model, const std::vector<Sample>& samples, const std::string& backend) {
  json rows = json::array();
  std::vector<double> errors;
  int ranks = 0;
  for (const auto& s : samples) {
    auto it = model.links.find(s.link);
    const double predicted = predict(s, it != model.links.end() ? it->second : model.nominal);
    const double error = (predicted - s.seconds) / s.seconds;
    errors.push_back(std::abs(error));
    ranks = std::max(ranks, s.ranks);
    rows.push_back({{"op", to_string(s.probe)},
                    {"ranks", s.ranks},
                    {"link", s.link},
                    {"bytes", s.bytes},
                    {"measured_s", s.seconds},
                    {"predicted_s", predicted},
                    {"relative_error", error}});
  }
  json doc = link_json(model.nominal);
  doc["dtsim_network_model"] = 1;
  doc["model"] = model.model;
  doc["links"] = json::object();
  for (const auto& [cls, f] : model.links) doc["links"][cls] = link_json(f);
  // Each probe's own fit, for reading (the nominal link is the all-reduce's).
  std::map<std::string, std::vector<Sample>> by_probe;
  for (const auto& s : samples)
    by_probe[s.probe == Probe::PointToPoint ? "p2p " + s.link : to_string(s.probe)].push_back(s);
  json fits = json::object();
  for (const auto& [name, group] : by_probe) {
    try {
      fits[name] = link_json(fit(group));
    } catch (const std::runtime_error&) {
    }
  }
  const double median_error = errors.empty() ? 0.0 : median(errors);
  doc["calibration"] = {{"backend", backend},
                        {"fit_per_probe", fits},
                        {"ranks", ranks},
                        {"median_abs_relative_error", median_error},
                        {"samples", rows}};
  if (const auto warning = fit_warning(median_error); !warning.empty()) doc["calibration"]["warning"] = warning;
  return doc;
}

std::string fit_warning(double median_abs_relative_error) {
  if (!(median_abs_relative_error > kPoorFitMedianError)) return {};
  return fmt::format("the fit's median error is {:.0f}% (over {:.0f}%): one latency and one bandwidth do not describe "
                     "these measurements (look at the samples' errors by size; measure more iterations, or on a "
                     "quieter machine); scenarios timed with this file inherit the error",
                     100.0 * median_abs_relative_error, 100.0 * kPoorFitMedianError);
}

NetworkModel load_model(const std::filesystem::path& file) {
  const std::string name = config::one_line(file.string());
  if (const auto why = config::not_a_regular_file(file))
    throw config::InputError(fmt::format("{}: the network model file {}", name, *why));
  std::ifstream in(file);
  if (!in) throw config::InputError(fmt::format("{}: cannot read the network model file", name));
  std::stringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = config::parse_json_text(text.str());
  } catch (const config::JsonTextError& e) {
    throw config::InputError(fmt::format("{}: not JSON: {}", name, e.reason()));
  }
  auto field = [&](const json& obj, const std::string& where, const char* key, bool positive) {
    if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number())
      throw config::InputError(fmt::format("{}: {}/{}: expected a number", name, where, key));
    const double v = obj[key].get<double>();
    if (positive ? !(v > 0) : !(v >= 0))
      throw config::InputError(fmt::format("{}: {}/{}: expected a number {} 0, got {}", name, where, key,
                                              positive ? ">" : ">=", v));
    return v;
  };
  NetworkModel model;
  model.nominal = {field(doc, "", "latency_us", false) * 1e-6, field(doc, "", "bandwidth_GBps", true) * 1e9};
  if (doc.contains("model")) {
    if (!doc["model"].is_string() || !net::find_network_model(doc["model"].get<std::string>()))
      throw config::InputError(fmt::format("{}: /model: expected one of {}", name, net::network_model_names()));
    model.model = doc["model"];
  }
  if (doc.contains("links") && doc["links"].is_object())
    for (const auto& [cls, link] : doc["links"].items()) {
      const std::string at = "/links/" + config::one_line(config::pointer_token(cls));  // a class name may hold anything
      model.links[cls] = {field(link, at, "latency_us", false) * 1e-6, field(link, at, "bandwidth_GBps", true) * 1e9};
    }
  return model;
}

}  // namespace dtsim::calibration
