// How every dtsim command ends: 0 success; 2 bad input (a scenario, sweep, flag or
// environment variable), with one line naming what is wrong; 1 a failure during the run
// (a peer that died, a deadlock), with the first line of its message (c10 appends
// backtraces on later lines).
#pragma once

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "runner/scenario.hpp"

namespace dtsim::cli {

template <typename F>
int exit_code_of(F&& body) {
  try {
    return body();
  } catch (const runner::ScenarioError& e) {
    fmt::print(stderr, "dtsim: error: {}\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "dtsim: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    fmt::print(stderr, "dtsim: run failed: {}\n", what);
    return 1;
  }
}

}  // namespace dtsim::cli
