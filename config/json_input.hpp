// Reading JSON that a user wrote (scenarios, sweeps, network model files): what every
// reader of such a file shares, so that any input, however malformed, ends in one line
// naming where it is wrong.
//
// - parse_json_text: JSON text to a document; a syntax error, and a number beyond a
//   double's range (which nlohmann reports as out_of_range, without a position), both
//   throw JsonTextError with the line and column.
// - first_too_deep: nlohmann's copy, comparison and dump recurse once per level of
//   nesting, so a document nested tens of thousands of levels deep (a few hundred KB of
//   "[") overflows the stack. Readers refuse documents deeper than kMaxJsonDepth (no
//   dtsim file needs more than about 8) before touching them.
// - one_line / pointer_token: messages carry user text (keys, values, file names); a
//   newline in it must not split the message.
// - not_a_regular_file: a reader that slurps a file whole would read /dev/zero forever
//   and block on /dev/stdin or a FIFO; user files must be regular files.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace dtsim::config {

// what() is the reason, which names the line and column too.
class JsonTextError : public std::invalid_argument {
 public:
  JsonTextError(std::size_t line, std::size_t column, const std::string& reason);
  std::size_t line() const { return line_; }
  std::size_t column() const { return column_; }
  // nlohmann's message without its "[json.exception...] " prefix ("parse error at line L, column C: ...").
  const std::string& reason() const { return reason_; }

 private:
  std::size_t line_, column_;
  std::string reason_;
};

nlohmann::json parse_json_text(const std::string& text);

inline constexpr int kMaxJsonDepth = 64;

// The JSON Pointer of the first value of `doc` nested more than `max_depth` levels deep
// (the root is level 0), cut to its first few tokens; nullopt when there is none.
// Iterative, so it is safe on any document.
std::optional<std::string> first_too_deep(const nlohmann::json& doc, int max_depth = kMaxJsonDepth);

// `text` with control characters escaped (\n, \r, \t, \xNN): safe inside a one-line message.
std::string one_line(const std::string& text);

// Why `file` cannot be read as a user file ("does not exist", "is a directory", "is not a
// regular file (a device, FIFO or socket)"); nullopt when it is a regular file.
std::optional<std::string> not_a_regular_file(const std::filesystem::path& file);

// A key as a JSON Pointer token (RFC 6901: ~ as ~0, / as ~1).
std::string pointer_token(const std::string& key);

}  // namespace dtsim::config
