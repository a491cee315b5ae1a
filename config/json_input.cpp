#include "config/json_input.hpp"

#include <utility>
#include <vector>

#include <fmt/format.h>

namespace dtsim::config {

using nlohmann::json;

namespace {

std::string without_prefix(const std::string& what) {
  if (what.rfind("[json.exception.", 0) == 0)
    if (auto p = what.find("] "); p != std::string::npos) return what.substr(p + 2);
  return what;
}

// Where SAX parsing stops: nlohmann passes the byte position of every error, including
// the number overflow that json::parse throws as out_of_range without one.
class ErrorPosition : public nlohmann::json_sax<json> {
 public:
  std::size_t byte = 0;
  std::string what;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    byte = position;
    what = e.what();
    return false;
  }
};

// Line and column of byte `byte` (nlohmann's 1-based count of bytes read).
std::pair<std::size_t, std::size_t> line_column(const std::string& s, std::size_t byte) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i + 1 < byte && i < s.size(); ++i, ++col)
    if (s[i] == '\n') ++line, col = 0;
  return {line, col};
}

}  // namespace

JsonTextError::JsonTextError(std::size_t line, std::size_t column, const std::string& reason)
    : std::invalid_argument(one_line(reason)),
      line_(line),
      column_(column),
      reason_(one_line(reason)) {}

json parse_json_text(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    const auto [line, col] = line_column(text, e.byte);
    throw JsonTextError(line, col, without_prefix(e.what()));
  } catch (const json::exception& e) {  // out_of_range 406: a number beyond a double's range
    ErrorPosition where;
    json::sax_parse(text, &where);
    const auto [line, col] = line_column(text, where.byte);
    throw JsonTextError(line, col, fmt::format("parse error at line {}, column {}: {}", line, col,
                                               without_prefix(where.what.empty() ? e.what() : where.what)));
  }
}

std::optional<std::string> first_too_deep(const json& doc, int max_depth) {
  struct Frame {
    const json* value;
    int depth;
    std::string path;
  };
  std::vector<Frame> stack{{&doc, 0, ""}};
  while (!stack.empty()) {
    Frame f = std::move(stack.back());
    stack.pop_back();
    if (!f.value->is_structured()) continue;
    if (f.depth >= max_depth && !f.value->empty()) {
      // The path down to this level is long and repetitive: its first tokens say where.
      std::string path;
      std::size_t tokens = 0, i = 0;
      for (; i < f.path.size(); ++i) {
        if (f.path[i] == '/' && ++tokens > 8) break;
        path += f.path[i];
      }
      return i < f.path.size() ? path + "/..." : path;
    }
    if (f.value->is_object()) {
      for (auto it = f.value->begin(); it != f.value->end(); ++it)
        stack.push_back({&*it, f.depth + 1, f.path + "/" + pointer_token(it.key())});
    } else {
      for (std::size_t k = 0; k < f.value->size(); ++k)
        stack.push_back({&(*f.value)[k], f.depth + 1, f.path + "/" + std::to_string(k)});
    }
  }
  return std::nullopt;
}

std::string one_line(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  return out;
}

std::optional<std::string> not_a_regular_file(const std::filesystem::path& file) {
  std::error_code error;
  const auto status = std::filesystem::status(file, error);
  if (status.type() == std::filesystem::file_type::not_found) return "does not exist";
  if (error) return "cannot be read: " + error.message();
  if (status.type() == std::filesystem::file_type::regular) return std::nullopt;
  if (status.type() == std::filesystem::file_type::directory) return "is a directory";
  return "is not a regular file (a device, FIFO or socket)";
}

std::string pointer_token(const std::string& key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

}  // namespace dtsim::config
