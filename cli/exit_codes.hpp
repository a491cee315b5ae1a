// How every dtsim command ends: 0 success; 2 bad input (config::ScenarioError: a
// scenario field; config::InputError: a sweep file, flag, environment variable or input
// file), with one line naming what is wrong; 1 a failure during the run (a peer that
// died, a deadlock), with the first line of its message (c10 appends backtraces on later
// lines), or a broken internal precondition (std::logic_error, std::invalid_argument
// included): a bug in dtsim, said as such, not blamed on the input.
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
  } catch (const config::ScenarioError& e) {
    fmt::print(stderr, "dtsim: error: {}\n", e.what());
    return 2;
  } catch (const config::InputError& e) {
    fmt::print(stderr, "dtsim: error: {}\n", e.what());
    return 2;
  } catch (const std::logic_error& e) {
    fmt::print(stderr, "dtsim: internal error (a bug in dtsim, not in the input): {}\n", config::one_line(e.what()));
    return 1;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    fmt::print(stderr, "dtsim: run failed: {}\n", what);
    return 1;
  }
}

}  // namespace dtsim::cli
