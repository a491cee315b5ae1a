#include "comm/live_env.hpp"
#include "config/scenario_error.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace dtsim::comm {

namespace {

struct Launcher {
  const char* name;
  const char* rank;
  const char* size;
  const char* local_rank;
  // Set when the job may span several machines: (variable, value meaning one machine).
  const char* machines = nullptr;
};

const std::vector<Launcher>& launchers() {
  static const std::vector<Launcher> all = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NNODES"},
  };
  return all;
}

long parse_int(const char* name, const std::string& text, long lo, long hi) {
  long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi)
    throw config::InputError(fmt::format("environment variable {}=\"{}\": expected an integer in [{}, {}]",
                                            name, text, lo, hi));
  return value;
}

}  // namespace

LiveEnv LiveEnv::from_environment() {
  return from_variables([](const char* name) { return std::getenv(name); });
}

LiveEnv LiveEnv::from_variables(const std::function<const char*(const char*)>& get) {
  auto value = [&](const char* name) -> std::optional<std::string> {
    const char* v = name ? get(name) : nullptr;
    return v && *v ? std::optional<std::string>(v) : std::nullopt;
  };
  LiveEnv env;
  const Launcher* chosen = nullptr;
  for (const auto& l : launchers())
    if (value(l.rank)) {
      chosen = &l;
      break;
    }
  if (!chosen) {
    for (const auto& l : launchers())
      if (value(l.size)) throw config::InputError(fmt::format("live run: {} is not set, but {} is", l.rank, l.size));
    throw config::InputError("live run: RANK is not set (nor OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)");
  }
  const auto size = value(chosen->size);
  if (!size)
    throw config::InputError(fmt::format("live run: {} is not set, but {} is", chosen->size, chosen->rank));
  env.launcher = chosen->name;
  env.world_size = static_cast<int>(parse_int(chosen->size, *size, 1, 1 << 20));
  env.rank = static_cast<int>(parse_int(chosen->rank, *value(chosen->rank), 0, env.world_size - 1));
  if (auto local = value(chosen->local_rank))
    env.local_rank = static_cast<int>(parse_int(chosen->local_rank, *local, 0, env.world_size - 1));

  // Another launcher describing a job of the same size describes this job: it must agree.
  for (const auto& l : launchers()) {
    if (&l == chosen) continue;
    auto other_rank = value(l.rank), other_size = value(l.size);
    if (!other_rank || !other_size || *other_size != *size) continue;
    if (*other_rank != *value(chosen->rank))
      throw config::InputError(fmt::format(
          "live run: conflicting ranks for a job of {}: {}={} but {}={}; unset the variables of the launcher not in use",
          *size, chosen->rank, *value(chosen->rank), l.rank, *other_rank));
  }

  if (auto addr = value("MASTER_ADDR")) {
    env.master_addr = *addr;
  } else if (chosen->machines) {
    const auto machines = value(chosen->machines);
    const bool one_machine = chosen->machines == std::string("SLURM_NNODES") ? (!machines || *machines == "1")
                                                                             : (!machines || *machines == *size);
    if (!one_machine)
      throw config::InputError(fmt::format(
          "live run: MASTER_ADDR is not set, and this {} job spans several machines ({}={}): set it to rank 0's host",
          chosen->name, chosen->machines, *machines));
  }
  if (auto port = value("MASTER_PORT"))
    env.master_port = static_cast<std::uint16_t>(parse_int("MASTER_PORT", *port, 1, 65535));
  env.launcher_serves_store = env.launcher == "torchrun" && value("TORCHELASTIC_USE_AGENT_STORE") == "True";
  if (auto id = value("DTSIM_JOB_ID")) env.job_id = *id;
  if (auto t = value("DTSIM_TIMEOUT_S"))
    env.timeout = std::chrono::milliseconds(1000 * parse_int("DTSIM_TIMEOUT_S", *t, 1, 86400));
  return env;
}

namespace {

// Whether `port` can be bound on the loopback interface now.
bool loopback_port_free(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("free_loopback_port: cannot open a socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

std::uint16_t free_loopback_port() {
  // Below Linux's ephemeral range (32768-60999), from which the kernel gives out the
  // ports of every connection and of Gloo's own listeners: a port taken from that range
  // can be handed to a concurrent job's connection before this job's store binds it.
  // Candidates here collide only with another job's explicit choice.
  constexpr std::uint16_t kFirst = 20000, kCount = 12000;
  static std::mt19937 pick(std::random_device{}() ^ static_cast<std::uint32_t>(::getpid()));
  for (int attempt = 0; attempt < 256; ++attempt) {
    const auto port = static_cast<std::uint16_t>(kFirst + pick() % kCount);
    if (loopback_port_free(port)) return port;
  }
  throw std::runtime_error("free_loopback_port: no free loopback port in 20000-31999");
}

}  // namespace dtsim::comm
