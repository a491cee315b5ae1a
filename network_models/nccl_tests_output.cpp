#include "network_models/nccl_tests_output.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::net {

namespace {

std::vector<std::string_view> tokens(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const std::size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

std::optional<std::int64_t> integer(std::string_view t) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return v;
}

bool is_word(std::string_view t) {
  return !t.empty() && std::isalpha(static_cast<unsigned char>(t.front())) && t != "N/A";
}

// A time or bandwidth column: a finite number >= 0.
double number(std::string_view t, int line, const char* what) {
  std::string text(t);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v) || v < 0)
    throw std::invalid_argument(fmt::format("line {}: {} \"{}\" is not a number >= 0", line, what, text));
  return v;
}

// "2.20.5" as a release: three dot-separated numbers (at most 16 characters).
bool is_release(std::string_view v) {
  int dots = 0;
  for (char c : v) {
    if (c == '.') ++dots;
    else if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return dots == 2 && v.size() <= 16 && v.front() != '.' && v.back() != '.' && v.find("..") == std::string_view::npos;
}

// The NCCL release a line names, "2.20.5": nccl-tests' "nccl-library=22005" (NCCL_VERSION_CODE:
// X * 10000 + Y * 100 + Z, before 2.9 X * 1000 + Y * 100 + Z) or NCCL's own "NCCL version
// 2.20.5+cuda12.3" (NCCL_DEBUG=VERSION or INFO); nullopt where it names none, or not in
// those shapes.
std::optional<std::string> library_version(const std::vector<std::string_view>& words) {
  for (std::size_t k = 0; k < words.size(); ++k) {
    std::string_view w = words[k];
    if (w.starts_with("nccl-library=")) {
      const auto code = integer(w.substr(13));
      if (!code || *code < 1000 || *code > 999999) return std::nullopt;
      const std::int64_t major = *code >= 10000 ? *code / 10000 : *code / 1000;
      const std::int64_t minor = (*code >= 10000 ? *code % 10000 : *code % 1000) / 100;
      return fmt::format("{}.{}.{}", major, minor, *code % 100);
    }
    if (w == "NCCL" && k + 2 < words.size() && words[k + 1] == "version") {
      const std::string_view v = words[k + 2].substr(0, words[k + 2].find('+'));
      if (!is_release(v)) return std::nullopt;
      return std::string(v);
    }
  }
  return std::nullopt;
}

// nccl-tests' name of an operation dtsim times ("all_reduce", ...).
std::optional<NcclTestOp> find_test_op(std::string_view name) {
  for (auto op : {NcclTestOp::AllReduce, NcclTestOp::ReduceScatter, NcclTestOp::AllGather, NcclTestOp::Broadcast,
                  NcclTestOp::Reduce, NcclTestOp::SendRecv, NcclTestOp::AllToAll})
    if (name == to_string(op)) return op;
  return std::nullopt;
}

// The operation of "<name>_perf".
NcclTestOp test_op_of(std::string_view binary, int line) {
  std::string_view name = binary;
  if (name.ends_with("_perf")) name.remove_suffix(5);
  if (const auto op = find_test_op(name)) return *op;
  throw std::invalid_argument(fmt::format("line {}: {}: dtsim times all_reduce, reduce_scatter, all_gather, broadcast, "
                                          "reduce, sendrecv and alltoall, not this test",
                                          line, binary));
}

// mpirun's "[1,0]<stdout>:" (or a bare "[0]") before the text.
std::string_view strip_launcher_prefix(std::string_view line) {
  if (line.empty() || line.front() != '[') return line;
  const auto close = line.find(']');
  if (close == std::string_view::npos) return line;
  line.remove_prefix(close + 1);
  for (std::string_view tag : {"<stdout>:", "<stderr>:"})
    if (line.starts_with(tag)) line.remove_prefix(tag.size());
  return line;
}

// "... device  3 [0x07] NVIDIA A100-SXM4-80GB": what follows the bus id.
std::string device_name(std::string_view line) {
  const auto at = line.find(" device ");
  if (at == std::string_view::npos) return "";
  const auto close = line.find(']', at);
  std::string_view rest = close == std::string_view::npos ? std::string_view{} : line.substr(close + 1);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) rest.remove_prefix(1);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.back()))) rest.remove_suffix(1);
  return std::string(rest);
}

NcclTestsPoint parse_row(const std::vector<std::string_view>& t, int line) {
  NcclTestsPoint p;
  p.line = line;
  const auto size = integer(t[0]);
  const auto count = t.size() > 1 ? integer(t[1]) : std::nullopt;
  if (!size || !count || *size < 0 || *count < 0 || t.size() < 3 || !is_word(t[2]))
    throw std::invalid_argument(fmt::format("line {}: expected a row of nccl-tests (size count type ...)", line));
  p.bytes = *size;
  p.count = *count;
  p.type = std::string(t[2]);

  std::size_t i = 3;
  // Old nccl-tests printed no redop, and every rank's buffers in its size column.
  if (i >= t.size() || !is_word(t[i]))
    throw std::invalid_argument(fmt::format("line {}: no redop column: an old nccl-tests, whose size column counts every "
                                            "rank's buffer; rerun with a current one",
                                            line));
  p.redop = std::string(t[i++]);
  const std::size_t left = t.size() - i;
  if (left == 9 || left == 5) {
    const auto root = integer(t[i]);
    if (!root || *root < -1 || *root > (1 << 30))
      throw std::invalid_argument(fmt::format("line {}: root \"{}\" is not a rank", line, t[i]));
    p.root = static_cast<int>(*root);
    ++i;
  } else if (left != 8 && left != 4) {
    throw std::invalid_argument(fmt::format(
        "line {}: expected nccl-tests' columns (size count type redop [root], then time algbw busbw #wrong out of "
        "place and in place), got {} columns",
        line, t.size()));
  }
  if (t.size() - i == 4) {  // dtsim_nccl_bench: one in-place time per size
    p.in_place_us = p.out_of_place_us = number(t[i], line, "time");
    p.in_place_busbw_GBps = p.out_of_place_busbw_GBps = number(t[i + 2], line, "busbw");
    return p;
  }
  p.out_of_place_us = number(t[i], line, "out-of-place time");
  p.out_of_place_busbw_GBps = number(t[i + 2], line, "out-of-place busbw");
  p.in_place_us = number(t[i + 4], line, "in-place time");
  p.in_place_busbw_GBps = number(t[i + 6], line, "in-place busbw");
  return p;
}

}  // namespace

NcclTestsRun parse_nccl_tests_output(std::string_view text) {
  NcclTestsRun run;
  std::map<std::int64_t, int> size_line;
  std::map<int, int> rank_line;
  int line_no = 0;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    line = strip_launcher_prefix(line);
    const auto t = tokens(line);
    if (t.empty()) continue;
    const bool comment = t[0].starts_with('#');
    auto words = t;
    if (comment) {
      if (words[0] == "#")
        words.erase(words.begin());
      else
        words[0].remove_prefix(1);
    }
    if (words.empty()) continue;
    if (words[0] == "dtsim" && words.size() > 1 && words[1] == "collective:")
      throw std::invalid_argument(fmt::format("line {}: this is dtsim collective's prediction, not a measurement", line_no));
    // dtsim_nccl_bench's title: "dtsim_nccl_bench: all_reduce, 8 rank(s), ...", one GPU per process.
    if (words[0] == "dtsim_nccl_bench:" && words.size() > 2) {
      std::string_view name = words[1];
      if (name.ends_with(',')) name.remove_suffix(1);
      run.op = test_op_of(name, line_no);
      const auto ranks = integer(words[2]);
      if (!ranks || *ranks < 1 || *ranks > (1 << 20))
        throw std::invalid_argument(fmt::format("line {}: dtsim_nccl_bench's rank count is not a number", line_no));
      run.ranks = static_cast<int>(*ranks);
      run.threads = run.gpus_per_thread = 1;
      continue;
    }
    // "Collective test starting: all_reduce_perf"
    for (std::size_t k = 0; k + 2 < words.size(); ++k)
      if (words[k] == "Collective" && words[k + 1] == "test" && words[k + 2] == "starting:" && k + 3 < words.size())
        run.op = test_op_of(words[k + 3], line_no);
    // "nccl-tests version 2.13.8 nccl-headers=21805 nccl-library=21805", "NCCL version 2.18.5+cuda12.2"
    if (const auto version = library_version(words)) {
      if (!run.nccl_version.empty() && *version != run.nccl_version)
        throw std::invalid_argument(fmt::format("line {}: NCCL {}, but line {} printed NCCL {}: is this two runs' output?",
                                                line_no, *version, run.nccl_version_line, run.nccl_version));
      if (run.nccl_version.empty()) run.nccl_version_line = line_no;
      run.nccl_version = *version;
      continue;
    }
    // "... NCCL INFO NCCL_ALGO set by environment to Ring,Tree" (each rank prints it)
    for (std::size_t k = 0; k + 5 < words.size(); ++k) {
      if ((words[k] != "NCCL_ALGO" && words[k] != "NCCL_PROTO") || words[k + 1] != "set" || words[k + 2] != "by" ||
          words[k + 3] != "environment" || words[k + 4] != "to")
        continue;
      const bool algo = words[k] == "NCCL_ALGO";
      std::string& value = algo ? run.nccl_algo : run.nccl_proto;
      int& first = algo ? run.nccl_algo_line : run.nccl_proto_line;
      const std::string printed(words[k + 5]);
      if (!value.empty() && printed != value)
        throw std::invalid_argument(fmt::format("line {}: {} {}, but line {} printed {}: is this two runs' output?", line_no,
                                                words[k], printed, first, value));
      if (value.empty()) first = line_no;
      value = printed;
    }
    // "... NCCL INFO NCCL_MAX_NCHANNELS set by environment to 8." (NCCL_PARAM's line; each
    // process prints it)
    for (std::size_t k = 0; k + 5 < words.size(); ++k) {
      if (words[k].substr(0, 5) != "NCCL_" || words[k + 1] != "set" || words[k + 2] != "by" || words[k + 3] != "environment" ||
          words[k + 4] != "to" || words[k + 5].size() < 2 || words[k + 5].back() != '.')
        continue;
      const auto value = integer(words[k + 5].substr(0, words[k + 5].size() - 1));
      if (!value) continue;
      const std::string name(words[k]);
      auto [it, first] = run.nccl_params.try_emplace(name, NcclTestsRun::PrintedParam{*value, line_no});
      if (!first && it->second.value != *value)
        throw std::invalid_argument(fmt::format("line {}: {} {}, but line {} printed {}: is this two runs' output?", line_no,
                                                name, *value, it->second.line, it->second.value));
    }
    // "nThread 1 nGpus 8 minBytes ..."
    if (words[0] == "nThread" && words.size() >= 4 && words[2] == "nGpus") {
      const auto threads = integer(words[1]), gpus = integer(words[3]);
      if (!threads || !gpus || *threads < 1 || *gpus < 1 || *threads > 4096 || *gpus > 4096)
        throw std::invalid_argument(fmt::format("line {}: nThread / nGpus are not counts", line_no));
      run.threads = static_cast<int>(*threads);
      run.gpus_per_thread = static_cast<int>(*gpus);
      continue;
    }
    // "Rank  3 Group  0 Pid ... device  3 [0x07] NVIDIA ..."
    if (words[0] == "Rank" && words.size() >= 2 && line.find(" device ") != std::string_view::npos) {
      const auto rank = integer(words[1]);
      if (!rank || *rank < 0 || *rank > (1 << 20)) throw std::invalid_argument(fmt::format("line {}: rank is not a number", line_no));
      const int r = static_cast<int>(*rank);
      if (const auto [it, fresh] = rank_line.emplace(r, line_no); !fresh)
        throw std::invalid_argument(fmt::format("line {}: rank {} listed again (first on line {}): is this two runs' output?",
                                                line_no, r, it->second));
      if (r != run.ranks)
        throw std::invalid_argument(fmt::format("line {}: rank {} listed where rank {} was expected", line_no, r, run.ranks));
      ++run.ranks;
      run.devices.push_back(device_name(line));
      continue;
    }
    if (comment || !integer(words[0])) continue;
    NcclTestsPoint p = parse_row(words, line_no);
    if (const auto [it, fresh] = size_line.emplace(p.bytes, line_no); !fresh)
      throw std::invalid_argument(fmt::format("line {}: size {} printed again (first on line {}): is this two runs' output?",
                                              line_no, p.bytes, it->second));
    run.points.push_back(std::move(p));
  }
  if (run.points.empty())
    throw std::invalid_argument("no nccl-tests rows (size count type redop root time algbw busbw ...) in the text");
  return run;
}

NcclTestsRun measured_table_from_json(const nlohmann::json& doc) {
  auto fail = [](const std::string& path, const std::string& what) {
    throw std::invalid_argument(fmt::format("{}: {}", path, what));
  };
  if (!doc.is_object()) fail("/", "expected a table of dtsim_nccl_bench --json (an object)");
  const auto source = doc.find("source");
  if (source == doc.end() || !source->is_string()) fail("/source", "expected \"measured\"");
  if (*source != "measured") fail("/source", fmt::format("\"{}\": this is not a measurement", source->get<std::string>()));
  NcclTestsRun run;
  const auto op = doc.find("op");
  if (op == doc.end() || !op->is_string()) fail("/op", "expected one of nccl-tests' operations (\"all_reduce\", ...)");
  run.op = find_test_op(op->get<std::string>());
  if (!run.op) fail("/op", fmt::format("\"{}\": dtsim times all_reduce, reduce_scatter, all_gather, broadcast, reduce, "
                                      "sendrecv and alltoall",
                                      op->get<std::string>()));
  const auto ranks = doc.find("ranks");
  if (ranks == doc.end() || !ranks->is_number_integer() || *ranks < 1 || *ranks > (1 << 20))
    fail("/ranks", "expected a rank count");
  run.ranks = ranks->get<int>();
  run.threads = run.gpus_per_thread = 1;  // one rank per process
  if (const auto setup = doc.find("setup"); setup != doc.end() && setup->is_object()) {
    if (const auto version = setup->find("nccl_version"); version != setup->end()) {
      if (!version->is_string() || !is_release(version->get<std::string>()))
        fail("/setup/nccl_version", "expected the NCCL release that ran, as \"2.20.5\"");
      run.nccl_version = version->get<std::string>();
    }
  }
  const auto rows = doc.find("rows");
  if (rows == doc.end() || !rows->is_array() || rows->empty()) fail("/rows", "expected the measured rows");
  std::map<std::int64_t, std::size_t> seen;
  for (std::size_t k = 0; k < rows->size(); ++k) {
    const auto& r = (*rows)[k];
    const std::string at = fmt::format("/rows/{}", k);
    auto field = [&](const char* name) -> const nlohmann::json& {
      const auto it = r.is_object() ? r.find(name) : r.end();
      if (!r.is_object() || it == r.end()) fail(at + "/" + name, "missing");
      return *it;
    };
    const auto& bytes = field("bytes");
    const auto& time = field("time_us");
    const auto& busbw = field("busbw_GBps");
    if (!bytes.is_number_integer() || bytes.get<std::int64_t>() < 0) fail(at + "/bytes", "expected a size >= 0");
    for (const auto& [v, name] : {std::pair{&time, "time_us"}, std::pair{&busbw, "busbw_GBps"}})
      if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0)
        fail(at + "/" + name, "expected a number >= 0");
    NcclTestsPoint p;
    p.bytes = bytes.get<std::int64_t>();
    const auto count = r.find("count");
    p.count = count != r.end() && count->is_number_integer() ? count->get<std::int64_t>() : p.bytes / 4;
    const auto type = r.find("type");
    p.type = type != r.end() && type->is_string() ? type->get<std::string>() : "float";
    const auto redop = r.find("redop");
    p.redop = redop != r.end() && redop->is_string() ? redop->get<std::string>() : "";
    p.in_place_us = p.out_of_place_us = time.get<double>();
    p.in_place_busbw_GBps = p.out_of_place_busbw_GBps = busbw.get<double>();
    if (const auto [it, fresh] = seen.emplace(p.bytes, k); !fresh)
      fail(at + "/bytes", fmt::format("size {} measured again (first at /rows/{})", p.bytes, it->second));
    run.points.push_back(std::move(p));
  }
  return run;
}

}  // namespace dtsim::net
