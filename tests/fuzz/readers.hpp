// The contract every reader of a user file keeps, checked on one input: the reader either
// accepts it or throws its documented exception type with a one-line message that starts
// with the JSON path, the file name or the flag. Shared by the seeded mutation test
// (fuzz_readers_test.cpp) and the libFuzzer targets (fuzz_target.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::fuzz {

enum class Reader { scenario, sweep, op_trace, network_model, libsvm, idx, cifar10, tensors, collective_flags, nccl_system };

inline const std::vector<Reader>& all_readers() {
  static const std::vector<Reader> readers{Reader::scenario, Reader::sweep,   Reader::op_trace,
                                           Reader::network_model, Reader::libsvm, Reader::idx,
                                           Reader::cifar10,  Reader::tensors, Reader::collective_flags,
                                           Reader::nccl_system};
  return readers;
}
std::string name_of(Reader reader);  // "scenario", "sweep", ... (the corpus folder's name)

struct Verdict {
  enum class Kind { accepted, rejected, skipped } kind = Kind::accepted;
  // Set when the contract is broken: a foreign exception type, a message on more than
  // one line or not naming where, a loader/schema disagreement. Empty otherwise.
  std::string violation;
  std::string message;  // the rejection's message (or what was skipped, and why)
};

// Runs the reader(s) for `reader` on one input. For collective_flags the input is the
// command line after "dtsim", one argument per NUL-separated piece.
//
// Inputs that are valid but would make the parse itself build something huge (a
// scenario of a million ranks on a complete graph, a sweep of thousands of points) are
// skipped, not parsed: resource limits are not what this checks. skip_huge = false (the
// committed corpus, whose inputs are known) parses them all.
Verdict check(Reader reader, std::string_view input, bool skip_huge = true);

// Where file inputs are written: a fresh directory per process (removed at exit),
// holding what seeds refer to (tiny.libsvm, model.json, copies of scenarios/*.json for
// the sweeps' relative bases).
const std::string& workspace();

// The source tree (DTSIM_SOURCE_DIR).
std::string source_dir();

// Seeds: the real files (scenarios/, scenarios/sweeps/, tests/data/: a torch.save file
// written by Python's torch) and files written by the library's own writers (traces,
// model files, IDX files, LibTorch's pickle_save) or in the documented layout (CIFAR-10
// records), as bytes.
std::vector<std::string> seeds(Reader reader);

// An input as printable text: escapes everything outside printable ASCII; long inputs
// are cut.
std::string printable(std::string_view input, std::size_t limit = 400);

}  // namespace dtsim::fuzz
