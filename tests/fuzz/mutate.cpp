#include "tests/fuzz/mutate.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/json_input.hpp"

namespace dtsim::fuzz {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxInput = 1 << 20;  // byte mutations stop growing an input here

// --- bytes ---------------------------------------------------------------------------------------

const std::vector<std::string>& json_tokens() {
  static const std::vector<std::string> t{
      "1e999", "-1e999", "1e-999", "NaN", "Infinity", "-Infinity", "nan", "0x10", "01", "-", "1.", ".5", "1e", "+1",
      "-0", "18446744073709551616", "9223372036854775808", "-9223372036854775809", "4294967296", "2147483648",
      "1048577", "null", "true", "false", "[]", "{}", "\"\"", "[", "]", "{", "}", ",", ":", "\"", "\\", "\\u0000",
      "\"\\ud800\"", "\"\\udc00\\ud800\"", "\"\\u0000\"", "\"a\\nb\"", "/", "~", "\xff", "\xc3", "\xed\xa0\x80",
      "\xef\xbb\xbf", "\t", "\r\n", "  ", "\"zzz\": 1,", "\"name\": 2,", "\"ranks\": 1048576,", "\"ranks\": 0,"};
  return t;
}

const std::vector<std::string>& msgpack_tokens() {
  static const std::vector<std::string> t{
      std::string("\xdd\xff\xff\xff\xff", 5), std::string("\xdf\xff\xff\xff\xff", 5), std::string("\xdb\xff\xff\xff\xff", 5),
      std::string("\xc6\xff\xff\xff\xff", 5), std::string("\xc9\xff\xff\xff\xff\x01", 6),
      std::string("\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00", 9), std::string("\xcb\x7f\xf0\x00\x00\x00\x00\x00\x00", 9),
      std::string("\xcb\xff\xf0\x00\x00\x00\x00\x00\x00", 9), std::string("\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 9),
      std::string("\xd3\x80\x00\x00\x00\x00\x00\x00\x00", 9), std::string("\xce\xff\xff\xff\xff", 5),
      std::string("\xd2\x80\x00\x00\x00", 5), std::string("\xca\x7f\xc0\x00\x00", 5), std::string("\xc1", 1),
      std::string("\xd4\x00\x00", 3), std::string("\xd8\x01", 2), std::string("\xc0", 1), std::string("\xc3", 1),
      std::string("\x90", 1), std::string("\x80", 1), std::string("\xa0", 1), std::string("\xdc\x00\x00", 3),
      std::string("\xd9\xff", 2), std::string("\x9f", 1), std::string("\x8f", 1), std::string("\xff", 1),
      std::string("\x7f", 1)};
  return t;
}

const std::vector<std::string>& libsvm_tokens() {
  static const std::vector<std::string> t{
      "1e999", "nan", "inf", "-inf", "+1", "-1", "0", "1", "2", "0.5", "0x1", "1:", ":1", "0:1", "-1:2", "1:nan",
      "1:inf", "1:1e40", "1:-0", "1:0x10", "99999999999999999999:1", "1000000000000000:1", "9223372036854775807:1",
      "4294967296:1", "100000:1", "3:1 2:1", "1:1 1:1", "1:1:1", "#", "\t", "\r", std::string("\0", 1), "\n", "\n\n",
      "1 1:1\n", "-1 2:2 3:3\n", " ", "\xff", "1:1e-320", "+1 1:.5", "1 01:1"};
  return t;
}

std::string interesting_byte_text(Reader reader, Rng& rng) {
  if (reader == Reader::op_trace) return rng.pick(msgpack_tokens());
  if (reader == Reader::libsvm) return rng.pick(libsvm_tokens());
  if (reader == Reader::idx) {
    static const std::vector<std::string> t{std::string("\x00\x00\x08\x01", 4), std::string("\xff\xff\xff\xff", 4),
                                            std::string("\x00\x00\x00\x00", 4), std::string("\x7f\xff\xff\xff", 4),
                                            std::string("\x1f\x8b", 2), std::string("\x00", 1)};
    return rng.pick(t);
  }
  return rng.pick(json_tokens());
}

void mutate_bytes(Reader reader, std::string& s, const std::vector<std::string>& donors, Rng& rng) {
  static const unsigned char special[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, '"', '{', '}', '[', ']', ':', ',',
                                          '\n', '\\', '0', '9', '-', 'e', '.', ' ', '#', 'x'};
  const std::size_t n = s.size();
  switch (rng.below(9)) {
    case 0:  // flip a bit
      if (n) s[rng.below(n)] ^= static_cast<char>(1u << rng.below(8));
      break;
    case 1:  // an interesting byte
      if (n) s[rng.below(n)] = static_cast<char>(special[rng.below(sizeof special)]);
      break;
    case 2:  // an interesting token inserted, or overwriting
      if (s.size() < kMaxInput) {
        const std::string t = interesting_byte_text(reader, rng);
        const std::size_t at = rng.below(n + 1);
        if (rng.chance(50)) s.insert(at, t);
        else s.replace(at, std::min(t.size(), n - at), t);
      }
      break;
    case 3:  // truncate
      s.resize(rng.below(n + 1));
      break;
    case 4:  // delete a span
      if (n) {
        const std::size_t at = rng.below(n), len = 1 + rng.below(std::min<std::size_t>(n - at, 64));
        s.erase(at, len);
      }
      break;
    case 5:  // duplicate a span elsewhere
      if (n && s.size() < kMaxInput) {
        const std::size_t at = rng.below(n), len = 1 + rng.below(std::min<std::size_t>(n - at, 256));
        const std::string span = s.substr(at, len);
        s.insert(rng.below(s.size() + 1), span);
      }
      break;
    case 6:  // a span of another input spliced in
      if (!donors.empty() && s.size() < kMaxInput) {
        const std::string& d = rng.pick(donors);
        if (!d.empty()) {
          const std::size_t at = rng.below(d.size()), len = 1 + rng.below(std::min<std::size_t>(d.size() - at, 256));
          const std::size_t to = rng.below(n + 1);
          s.replace(to, rng.chance(50) ? 0 : std::min(len, n - to), d.substr(at, len));
        }
      }
      break;
    case 7:  // a span repeated many times (very long tokens and lines)
      if (n && s.size() < kMaxInput) {
        const std::size_t at = rng.below(n), len = 1 + rng.below(std::min<std::size_t>(n - at, 8));
        const std::string span = s.substr(at, len);
        std::string run;
        const std::size_t times = 1 + rng.below(20000);
        for (std::size_t k = 0; k < times && run.size() < kMaxInput / 16; ++k) run += span;
        s.insert(at, run);
      }
      break;
    default:  // a run of one byte value
      if (n) {
        const std::size_t at = rng.below(n), len = 1 + rng.below(std::min<std::size_t>(n - at, 16));
        std::fill_n(s.begin() + static_cast<std::ptrdiff_t>(at), len, static_cast<char>(special[rng.below(sizeof special)]));
      }
      break;
  }
}

// --- JSON ----------------------------------------------------------------------------------------

const std::vector<json>& interesting_numbers() {
  static const std::vector<json> v{
      0, 1, -1, 2, 3, 7, 8, 9, 16, 255, 256, 1023, 1024, 4096, 65536, 1 << 20, (1 << 20) + 1, 1 << 24,
      std::numeric_limits<int>::max(), static_cast<std::int64_t>(std::numeric_limits<int>::max()) + 1,
      std::numeric_limits<int>::min(), std::int64_t{1} << 32, std::int64_t{1} << 53,
      std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min(),
      std::uint64_t{1} << 63, std::numeric_limits<std::uint64_t>::max(), 1e308, -1e308, 1e-308, 5e-324, -0.0, 0.5, 1.5,
      -0.5, 1e9, 1e18, 1e19, 3.14159, 1e-6, 100.0, 2.0, 0.999999, 1.000001};
  return v;
}

const std::vector<std::string>& interesting_strings() {
  static const std::vector<std::string> v{
      "", "x", "ring", "complete", "torus", "fat_tree", "hierarchical", "edges", "star", "hypercube", "exponential",
      "cuda", "cpu", "full", "flow", "alpha_beta", "analytical", "measured", "cost_model", "auto", "tree", "direct", "ps",
      "binomial", "halving_doubling", "top_k", "qsgd", "sign", "identity", "random_k", "threshold", "scaled_sign",
      "fp16", "bf16", "choco_sgd", "parallel_sgd", "distopt", "dcd_psgd", "local_sgd", "centralized", "decentralized",
      "sync", "half", "partial", "sparse", "resnet20", "resnet50", "mlp", "cnn", "gpt2_small", "bert_base",
      "logistic_regression", "iid", "sorted", "by_label", "zip", "product", "tiny.libsvm", "model.json",
      "../quickstart.json", "../centralized.json", "/nonexistent/file", ".", "/", "/algorithm/lr", "/ranks",
      "/topology", "/topology/kind", "/network/calibrated", "/workload/libsvm_file", "/algorithm/compressor/kind",
      "/a~2b", "/~", "~", "a\nb", "\t", "\xc3\xa9", "same_host", "all_reduce", "p2p"};
  return v;
}

const std::vector<std::string>& interesting_keys() {
  static const std::vector<std::string> v{
      "zzz", "", "a/b", "~", "~1", "\n", "name", "ranks", "steps", "seed", "kind", "type", "values", "path", "base",
      "axes", "labels", "mode", "links", "model", "latency_us", "bandwidth_GBps", "calibrated", "dims", "k", "nodes",
      "edges", "stragglers", "failures", "bandwidth_trace", "libsvm_file", "data_dir", "features", "samples",
      "compressor", "variant", "lr", "device", "timing_only", "target_loss", "target_accuracy", "description", "rank", "operations",
      "phase_names", "ops", "gpus_per_node", "batch_size", "algorithms", "compute"};
  return v;
}

json random_scalar(Rng& rng) {
  switch (rng.below(7)) {
    case 0: return nullptr;
    case 1: return rng.chance(50);
    case 2: return rng.pick(interesting_numbers());
    case 3: return rng.pick(interesting_strings());
    case 4: return json::array();
    case 5: return json::object();
    default: return json::array({rng.pick(interesting_numbers()), rng.pick(interesting_strings())});
  }
}

// Every value of a (shallow) document, by address.
std::vector<json*> nodes_of(json& doc) {
  std::vector<json*> out, stack{&doc};
  while (!stack.empty()) {
    json* v = stack.back();
    stack.pop_back();
    out.push_back(v);
    if (v->is_structured())
      for (auto& child : *v) stack.push_back(&child);
  }
  return out;
}

std::vector<std::string> keys_of(const json& doc) {
  std::vector<std::string> out;
  std::vector<const json*> stack{&doc};
  while (!stack.empty()) {
    const json* v = stack.back();
    stack.pop_back();
    if (v->is_object())
      for (auto it = v->begin(); it != v->end(); ++it) out.push_back(it.key());
    if (v->is_structured())
      for (const auto& child : *v) stack.push_back(&child);
  }
  return out;
}

// Deep nesting goes in as a marker string and is expanded in the text: the harness itself
// must not copy, compare or dump a document tens of thousands of levels deep.
const std::string kDeepMarker = "\x01" "deep:";

json deep_marker(Rng& rng) {
  // Past the readers' limit (64), past the sanitizers' stack (a few thousand levels), past
  // the release build's (about 10^5); the deepest are rare, each costs a second under ASan.
  static const int depths[] = {65, 200, 3000, 3000, 20000, 20000, 20000, 100000};
  return kDeepMarker + std::to_string(depths[rng.below(8)]) + ":" + std::to_string(rng.below(3));
}

std::string expand_deep(std::string text) {
  const std::string quoted = "\"\\u0001deep:";
  for (std::size_t at = text.find(quoted); at != std::string::npos; at = text.find(quoted, at)) {
    const std::size_t end = text.find('"', at + 1);
    int depth = 0, kind = 0;
    std::sscanf(text.c_str() + at + quoted.size(), "%d:%d", &depth, &kind);
    std::string nested;
    if (kind == 0) nested = std::string(depth, '[') + "1" + std::string(depth, ']');
    else if (kind == 1) {
      for (int i = 0; i < depth; ++i) nested += "{\"a\":";
      nested += "{}" + std::string(depth, '}');
    } else {
      for (int i = 0; i < depth; ++i) nested += i % 2 ? "{\"k\":" : "[";
      nested += "0";
      for (int i = depth - 1; i >= 0; --i) nested += i % 2 ? "}" : "]";
    }
    text.replace(at, end + 1 - at, nested);
    at += nested.size();
  }
  return text;
}

void mutate_value(json& doc, const std::vector<json>& donors, Rng& rng) {
  auto nodes = nodes_of(doc);
  json& v = *rng.pick(nodes);
  switch (rng.below(12)) {
    case 0:  // another type
      v = random_scalar(rng);
      break;
    case 1:  // an interesting number
      v = rng.pick(interesting_numbers());
      break;
    case 2:  // a nudged number, or a number as a string
      if (v.is_number_integer() && !v.is_number_unsigned()) {
        const auto x = v.get<std::int64_t>();
        const std::int64_t deltas[] = {1, -1, 2, -2};
        v = rng.chance(80) && x > std::numeric_limits<std::int64_t>::min() + 2 && x < std::numeric_limits<std::int64_t>::max() - 2
                ? json(x + deltas[rng.below(4)])
                : json(-x / 2);
      } else if (v.is_number()) {
        const double factors[] = {-1.0, 0.0, 10.0, 1e-3, 1e10, 0.5};
        v = v.get<double>() * factors[rng.below(6)];
      } else {
        v = rng.pick(interesting_numbers()).dump();
      }
      break;
    case 3:  // deep nesting
      v = deep_marker(rng);
      break;
    case 4:  // empty
      v = rng.chance(50) ? json::array() : json::object();
      break;
    case 5:  // an unknown (or known, misplaced) key
      if (v.is_object()) {
        const auto keys = keys_of(doc);
        const std::string key = rng.chance(50) || keys.empty() ? rng.pick(interesting_keys()) : rng.pick(keys);
        v[key] = random_scalar(rng);
      } else {
        v = json{{rng.pick(interesting_keys()), v}};
      }
      break;
    case 6:  // a key removed
      if (v.is_object() && !v.empty()) {
        auto it = v.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(rng.below(v.size())));
        v.erase(it);
      }
      break;
    case 7:  // array elements duplicated, dropped or cleared
      if (v.is_array() && !v.empty()) {
        const std::size_t i = rng.below(v.size());
        switch (rng.below(4)) {
          case 0: v.insert(v.begin() + static_cast<std::ptrdiff_t>(i), v[i]); break;
          case 1: v.erase(v.begin() + static_cast<std::ptrdiff_t>(i)); break;
          case 2: v.clear(); break;
          default: {
            const json copy = v[i];
            const std::size_t times = 1 + rng.below(300);
            for (std::size_t k = 0; k < times; ++k) v.push_back(copy);
          }
        }
      } else if (v.is_array()) {
        v.push_back(random_scalar(rng));
      }
      break;
    case 8:  // a very long string, or a string changed
      if (v.is_string() && rng.chance(50)) {
        std::string s = v.get<std::string>();
        if (!s.empty()) s[rng.below(s.size())] = static_cast<char>('a' + rng.below(26));
        s += rng.chance(50) ? "x" : "";
        v = s;
      } else {
        v = std::string(1 + rng.below(rng.chance(90) ? 2000 : 100000), static_cast<char>('a' + rng.below(26)));
      }
      break;
    case 9:  // an interesting string
      v = rng.pick(interesting_strings());
      break;
    case 10:  // a value of another seed
      if (!donors.empty()) {
        json donor = rng.pick(donors);
        auto donor_nodes = nodes_of(donor);
        v = *rng.pick(donor_nodes);
      }
      break;
    default:  // a value of this document, copied over another
      v = json(*rng.pick(nodes));
      break;
  }
}

std::string mutate_json_text(Reader reader, const std::string& seed, const std::vector<std::string>& donors, Rng& rng) {
  std::string out = seed;
  json doc = json::parse(seed, nullptr, false);  // iterative: safe at any depth
  // A deep document (from an earlier mutation) only gets byte changes: copying or dumping
  // it would recurse as deep as it is (and pretty-printing it is quadratic).
  const bool shallow = !doc.is_discarded() && !config::first_too_deep(doc, 32);
  if (shallow && rng.chance(85)) {
    std::vector<json> donor_docs;
    for (int k = 0; k < 2 && !donors.empty(); ++k) {
      json d = json::parse(rng.pick(donors), nullptr, false);
      if (!d.is_discarded()) donor_docs.push_back(std::move(d));
    }
    // Mostly one change: a reader stops at the first error, so one change is one finding.
    const std::size_t rounds = rng.chance(60) ? 1 : 2 + rng.below(2);
    for (std::size_t r = 0; r < rounds; ++r) mutate_value(doc, donor_docs, rng);
    out = expand_deep(doc.dump(rng.chance(50) ? -1 : 1, ' ', false, json::error_handler_t::replace));
    if (rng.chance(15)) mutate_bytes(reader, out, donors, rng);
  } else {
    const std::size_t rounds = 1 + rng.below(4);
    for (std::size_t r = 0; r < rounds; ++r) mutate_bytes(reader, out, donors, rng);
  }
  return out;
}

// --- formats -------------------------------------------------------------------------------------

std::string mutate_msgpack(const std::string& seed, bool trusted, const std::vector<std::string>& donors, Rng& rng) {
  std::string out = seed;
  const json doc = trusted ? json::from_msgpack(seed, true, false) : json(json::value_t::discarded);
  const int what = static_cast<int>(rng.below(10));
  if (!doc.is_discarded() && what < 5) {  // a value-level change, written back as MessagePack
    json copy = doc;
    std::vector<json> donor_docs;
    if (!donors.empty()) {
      json d = json::from_msgpack(rng.pick(donors), true, false);
      if (!d.is_discarded()) donor_docs.push_back(std::move(d));
    }
    const std::size_t rounds = 1 + rng.below(3);
    for (std::size_t r = 0; r < rounds; ++r) mutate_value(copy, donor_docs, rng);
    // Deep markers become nested one-element arrays (0x91), the stack-hungry case.
    const auto bytes = json::to_msgpack(copy);
    out.assign(bytes.begin(), bytes.end());
    for (std::size_t at = out.find(kDeepMarker); at != std::string::npos; at = out.find(kDeepMarker, at)) {
      const std::size_t begin = at - 1;  // the marker is a fixstr: one header byte before its text
      int depth = 0, kind = 0;
      std::size_t end = at + kDeepMarker.size();
      std::sscanf(out.c_str() + end, "%d:%d", &depth, &kind);
      while (end < out.size() && (std::isdigit(static_cast<unsigned char>(out[end])) || out[end] == ':')) ++end;
      // Arrays of one (0x91), or maps of one keyed "k" (0x81 0xa1 'k'), around a nil.
      std::string levels;
      for (int i = 0; i < depth; ++i) levels += kind == 1 ? std::string("\x81\xa1k", 3) : std::string("\x91", 1);
      out.replace(begin, end - begin, levels + '\xc0');
      at = begin + levels.size() + 1;
    }
    if (rng.chance(30)) mutate_bytes(Reader::op_trace, out, donors, rng);
  } else if (what == 5) {  // nesting at a random point
    static const std::size_t depths[] = {17, 1000, 20000, 20000, 400000};
    out.insert(rng.below(out.size() + 1), std::string(depths[rng.below(5)], '\x91'));
  } else {
    const std::size_t rounds = 1 + rng.below(4);
    for (std::size_t r = 0; r < rounds; ++r) mutate_bytes(Reader::op_trace, out, donors, rng);
  }
  return out;
}

std::string mutate_libsvm(const std::string& seed, const std::vector<std::string>& donors, Rng& rng) {
  std::string out = seed;
  const std::size_t rounds = 1 + rng.below(4);
  for (std::size_t r = 0; r < rounds; ++r) {
    if (rng.chance(40)) {
      mutate_bytes(Reader::libsvm, out, donors, rng);
      continue;
    }
    // Token-level: replace or insert a whitespace-separated token, or repeat lines.
    std::vector<std::size_t> starts;
    for (std::size_t i = 0; i < out.size(); ++i)
      if (out[i] != ' ' && out[i] != '\n' && (i == 0 || out[i - 1] == ' ' || out[i - 1] == '\n')) starts.push_back(i);
    const std::string token = rng.pick(libsvm_tokens());
    if (starts.empty() || rng.chance(20)) {
      out.insert(rng.below(out.size() + 1), token + (rng.chance(50) ? " " : "\n"));
    } else if (rng.chance(80)) {
      const std::size_t at = rng.pick(starts);
      std::size_t end = at;
      while (end < out.size() && out[end] != ' ' && out[end] != '\n') ++end;
      out.replace(at, end - at, token);
    } else if (out.size() < kMaxInput) {
      const std::size_t line = out.rfind('\n', rng.below(out.size())) + 1;
      const std::size_t end = std::min(out.size(), out.find('\n', line) + 1);
      const std::string copy = out.substr(line, end - line);
      const std::size_t times = 1 + rng.below(2000);
      std::string run;
      for (std::size_t k = 0; k < times && run.size() < kMaxInput / 4; ++k) run += copy;
      out.insert(line, run);
    }
  }
  return out;
}

std::string mutate_idx(const std::string& seed, const std::vector<std::string>& donors, Rng& rng) {
  std::string out = seed;
  const bool gz = out.size() >= 2 && out[0] == '\x1f' && out[1] == '\x8b';
  if (gz || rng.chance(40)) {  // a compressed seed: any change is a corrupt stream, or not
    const std::size_t rounds = 1 + rng.below(3);
    for (std::size_t r = 0; r < rounds; ++r) mutate_bytes(Reader::idx, out, donors, rng);
    return out;
  }
  const std::size_t ndims = out.size() >= 4 ? static_cast<unsigned char>(out[3]) : 0;
  static const std::uint32_t dims[] = {0, 1, 2, 3, 255, 256, 65536, 0x7fffffff, 0x80000000, 0xffffffff, 1u << 20};
  switch (rng.below(6)) {
    case 0:  // the type byte
      if (out.size() > 2) out[2] = static_cast<char>(rng.chance(50) ? 0x08 + rng.below(8) : rng.below(256));
      break;
    case 1:  // the dimension count
      if (out.size() > 3) out[3] = static_cast<char>(rng.chance(50) ? rng.below(6) : 255 - rng.below(3));
      break;
    case 2:  // a dimension
      if (ndims > 0 && out.size() >= 4 + 4 * ndims) {
        const std::size_t at = 4 + 4 * rng.below(ndims);
        const std::uint32_t d = dims[rng.below(sizeof dims / sizeof dims[0])];
        for (int k = 0; k < 4; ++k) out[at + k] = static_cast<char>((d >> (24 - 8 * k)) & 0xff);
      }
      break;
    case 3:  // data cut short or grown
      if (rng.chance(50)) out.resize(rng.below(out.size() + 1));
      else out += std::string(1 + rng.below(100), '\x07');
      break;
    case 4:  // the magic
      if (out.size() > 1) out[rng.below(2)] = static_cast<char>(rng.below(256));
      break;
    default: {  // several dimensions at once, with the data left as it is
      for (std::size_t k = 0; k < ndims && 4 + 4 * k + 4 <= out.size(); ++k)
        if (rng.chance(50)) {
          const std::uint32_t d = dims[rng.below(sizeof dims / sizeof dims[0])];
          for (int b = 0; b < 4; ++b) out[4 + 4 * k + b] = static_cast<char>((d >> (24 - 8 * b)) & 0xff);
        }
    }
  }
  if (rng.chance(20)) mutate_bytes(Reader::idx, out, donors, rng);
  return out;
}

// CIFAR-10 records: a label byte changed (in range, 10, 255), whole or partial records
// added or cut, then maybe byte-level changes.
std::string mutate_cifar10(const std::string& seed, const std::vector<std::string>& donors, Rng& rng) {
  constexpr std::size_t kRecord = 3073;
  std::string out = seed;
  switch (rng.below(4)) {
    case 0:  // a label
      if (out.size() >= kRecord) {
        static const unsigned char labels[] = {0, 9, 10, 11, 127, 128, 255};
        out[kRecord * rng.below(out.size() / kRecord)] = static_cast<char>(labels[rng.below(sizeof labels)]);
      }
      break;
    case 1:  // records cut, possibly mid-record
      out.resize(rng.chance(50) ? kRecord * rng.below(out.size() / kRecord + 1) : rng.below(out.size() + 1));
      break;
    case 2:  // records added from a donor, possibly a part of one
      if (!donors.empty() && out.size() < (1u << 20)) {
        const std::string& d = rng.pick(donors);
        out += rng.chance(50) ? d : d.substr(0, rng.below(d.size() + 1));
      }
      break;
    default:
      mutate_bytes(Reader::cifar10, out, donors, rng);
  }
  if (rng.chance(25)) mutate_bytes(Reader::cifar10, out, donors, rng);
  return out;
}

// torch.save files (a zip archive from Python, LibTorch's pickle_save bytes): byte-level
// changes, one to four, anywhere (the pickle, the zip directory, the tensor records).
std::string mutate_tensors(const std::string& seed, const std::vector<std::string>& donors, Rng& rng) {
  std::string out = seed;
  const std::size_t rounds = 1 + rng.below(4);
  for (std::size_t r = 0; r < rounds; ++r) mutate_bytes(Reader::tensors, out, donors, rng);
  return out;
}

std::string mutate_args(const std::string& seed, const std::vector<std::string>& donors, Rng& rng) {
  static const std::vector<std::string> values{
      "", "-1", "0", "1", "2", "3", "17", "1e309", "nan", "inf", "-inf", "1e-320", "0.5", "1.0000001",
      "9223372036854775807", "9223372036854775807G", "9223372036854775808", "8589934591G", "8589934592G", "1T", "1K",
      "1k", "1m", "4G", "0x10", " 8", "8 ", "-0", "2147483647", "2147483648", "-2147483648", "torus:", "torus:0x8",
      "torus:65536x65536", "torus:1x1x1x1x1x1x1x1", "torus:8x", "torus:x8", "torus:2x2", "torus:1024x1024",
      "fat_tree:", "fat_tree:3", "fat_tree:2147483646", "fat_tree:1000", "fat_tree:8", "fat_tree:0", "hierarchical:",
      "hierarchical:0", "hierarchical:2147483647:direct", "hierarchical:4:foo", "hierarchical:4:nvswitch",
      "hierarchical:65536", "edges", "ring:5", "complete", "star", "exponential", "hypercube", "analytical",
      "alpha_beta", "flow", "packet", "allreduce", "all_gather", "broadcast", "reducescatter", "reduce", "sendrecv",
      "alltoall", "ps", "tree", "direct",
      "halving_doubling", "binomial", "auto", "a\nb", "\xff", "--", "-", "collective", "run", "--help"};
  static const std::vector<std::string> flags{
      "--op", "--algo", "-b", "--minbytes", "-e", "--maxbytes", "-f", "--stepfactor", "-i", "--stepbytes", "--topology",
      "-n", "--ranks", "--model", "--latency-us", "--bandwidth-GBps", "-r", "--root", "--json", "--bogus", "-z",
      "--ranks=4", "-n4", "--topology=torus:2x2"};
  std::vector<std::string> args;
  std::string current;
  for (char c : seed) {
    if (c == '\0') {
      args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  args.push_back(current);
  const std::size_t rounds = rng.chance(60) ? 1 : 2 + rng.below(2);
  for (std::size_t r = 0; r < rounds; ++r) {
    // Mostly a flag's value: that is what dtsim's own checks read (CLI11 checks the rest).
    std::vector<std::size_t> value_at;
    for (std::size_t k = 1; k < args.size(); ++k)
      if (!args[k - 1].empty() && args[k - 1][0] == '-' && (args[k].empty() || args[k][0] != '-')) value_at.push_back(k);
    if (!value_at.empty() && rng.chance(60)) {
      std::string& v = args[rng.pick(value_at)];
      if (rng.chance(70)) v = rng.pick(values);
      else mutate_bytes(Reader::collective_flags, v, donors, rng);
      continue;
    }
    if (rng.chance(30)) {  // a flag not given yet, with a value
      const std::string& f = rng.pick(flags);
      if (std::find(args.begin(), args.end(), f) == args.end()) args.insert(args.end(), {f, rng.pick(values)});
      continue;
    }
    // The subcommand stays, mostly: without it CLI11 stops at once.
    const std::size_t i = args.size() > 1 && rng.chance(95) ? 1 + rng.below(args.size() - 1) : rng.below(args.size());
    switch (rng.below(8)) {
      case 0:
      case 1:
      case 2: args[i] = rng.pick(values); break;  // a value (or a flag) replaced
      case 3: args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), rng.pick(flags)); break;
      case 4:
        args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), {rng.pick(flags), rng.pick(values)});
        break;
      case 5:
        if (args.size() > 1) args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      case 6: args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), args[i]); break;
      default: mutate_bytes(Reader::collective_flags, args[i], donors, rng); break;
    }
  }
  std::string out;
  for (std::size_t k = 0; k < args.size(); ++k) {
    if (k) out += '\0';
    out += args[k];
  }
  return out;
}

}  // namespace

std::string mutate(Reader reader, const std::string& seed, bool trusted, const std::vector<std::string>& donors,
                   Rng& rng) {
  switch (reader) {
    case Reader::scenario:
    case Reader::sweep:
    case Reader::network_model:
    case Reader::nccl_system: return mutate_json_text(reader, seed, donors, rng);
    case Reader::op_trace: return mutate_msgpack(seed, trusted, donors, rng);
    case Reader::libsvm: return mutate_libsvm(seed, donors, rng);
    case Reader::idx: return mutate_idx(seed, donors, rng);
    case Reader::cifar10: return mutate_cifar10(seed, donors, rng);
    case Reader::tensors: return mutate_tensors(seed, donors, rng);
    case Reader::collective_flags: return mutate_args(seed, donors, rng);
  }
  return seed;
}

}  // namespace dtsim::fuzz
