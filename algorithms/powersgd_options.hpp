// algorithms::PowerSgdOptions: PowerSGD's scenario fields, named as PyTorch's
// PowerSGDState names them (ddp's powersgd hook, parallel_sgd's centralized powersgd):
// matrix_approximation_rank, start_powerSGD_iter, min_compression_rate,
// use_error_feedback, warm_start, orthogonalization_epsilon, random_seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"

namespace dtsim::algorithms {

// What a PowerSgdGroup (powersgd.hpp) compresses with.
struct PowerSgdSettings {
  std::int64_t rank = 1;              // matrix_approximation_rank
  double min_compression_rate = 2.0;  // min_compression_rate
  bool error_feedback = true;         // use_error_feedback
  bool warm_start = true;             // warm_start
  double epsilon = 0.0;               // orthogonalization_epsilon
};

struct PowerSgdOptions {
  PowerSgdSettings group;
  std::int64_t start_powerSGD_iter = 1000;  // plain all-reduce while the iteration (from 0) is below it
  std::uint64_t random_seed = 0;            // Q's initial draws (an at::Generator, the same on every rank)
};

const std::vector<std::string>& powersgd_fields();
// `reads_them` false: any of powersgd_fields() present is an error naming `why_not`.
void parse_powersgd(config::ObjectReader& a, PowerSgdOptions& o, bool reads_them, const std::string& why_not);
void powersgd_json(const PowerSgdOptions& o, nlohmann::json& out);
// PyTorch's PowerSGDState rule: start_powerSGD_iter > 1 with error feedback or warm start;
// "" when it holds, else the problem.
std::string powersgd_start_problem(const PowerSgdOptions& o);

}  // namespace dtsim::algorithms
