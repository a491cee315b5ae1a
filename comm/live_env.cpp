#include "comm/live_env.hpp"

#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::comm {

namespace {

std::optional<std::pair<const char*, std::string>> first_set(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) return std::make_pair(n, std::string(v));
  return std::nullopt;
}

long parse_int(const char* name, const std::string& text, long lo, long hi) {
  long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi)
    throw std::invalid_argument(fmt::format("environment variable {}=\"{}\": expected an integer in [{}, {}]",
                                            name, text, lo, hi));
  return value;
}

}  // namespace

LiveEnv LiveEnv::from_environment() {
  LiveEnv env;
  auto rank = first_set({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
  auto world = first_set({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  if (!rank) throw std::invalid_argument("live run: RANK is not set (nor OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)");
  if (!world)
    throw std::invalid_argument(
        "live run: WORLD_SIZE is not set (nor OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS)");
  env.world_size = static_cast<int>(parse_int(world->first, world->second, 1, 1 << 20));
  env.rank = static_cast<int>(parse_int(rank->first, rank->second, 0, env.world_size - 1));
  if (auto local = first_set({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}))
    env.local_rank = static_cast<int>(parse_int(local->first, local->second, 0, 1 << 20));
  if (auto addr = first_set({"MASTER_ADDR"})) env.master_addr = addr->second;
  if (auto port = first_set({"MASTER_PORT"}))
    env.master_port = static_cast<std::uint16_t>(parse_int(port->first, port->second, 1, 65535));
  if (auto t = first_set({"DTSIM_TIMEOUT_S"}))
    env.timeout = std::chrono::milliseconds(1000 * parse_int(t->first, t->second, 1, 86400));
  return env;
}

}  // namespace dtsim::comm
