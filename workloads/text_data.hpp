// Token data for the language model (gpt_workload.cpp): a text corpus read as bytes (data
// source "text", sources/text.cpp) and a token tensors file (data source "tokens",
// sources/tokens.cpp).
//
// Text: a file, or a folder's files (recursively, in path order; hidden names and files that
// hold a NUL byte, such as fortune's .dat indexes, skipped; each file once, by its canonical
// path, so fortune's .u8 links to the same files add nothing). Byte-level tokens: byte b is
// token b (V = 256). Held-out split: the last floor(holdout x size) bytes of every file are
// held out; the training stream is the files' first parts concatenated in path order, the
// held-out stream their last parts. As LabelledData: train_x is the training stream's bytes
// 0 .. N-2 and train_y its bytes 1 .. N-1 (uint8 views of one buffer: position i's input is
// byte i, its target the next byte), test_x / test_y the same of the held-out stream (absent
// when it has fewer than 2 bytes); classes 256.
//
// Tokens: torch.save({"x": X, "y": Y}) with X the input tokens and Y the next-token targets,
// int64 [N, T] each (any integer dtype, converted), values >= 0; optionally "test_x" and
// "test_y" alike (the same T). classes = the largest token + 1. Read with the checks of
// tensor_file.hpp's reader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/labelled_data.hpp"

namespace dtsim::workloads {

// The text and tokens sources' fields (a DataSpec member).
// Debian's fortunes package: the text source's default corpus.
inline const std::string kFortunesPath = "/usr/share/games/fortunes";

// The corpus's files, in the order they are read, and their sizes; throws
// std::invalid_argument "<path>: ..." for a path that is missing, unreadable, or holds no text.
struct TextFiles {
  std::vector<std::string> files;
  std::vector<std::int64_t> bytes;
  std::int64_t train_bytes = 0;  // sum of the files' first parts
  std::int64_t test_bytes = 0;   // sum of their last parts
};
TextFiles list_text_files(const std::string& path, double holdout);

// The corpus as LabelledData (above), on the CPU.
std::shared_ptr<const LabelledData> read_text_corpus(const std::string& path, double holdout);

// A token tensors file as LabelledData (x, y int64 [N, T]); throws std::invalid_argument
// "<file>: ..." or "<file> ..." as read_tensor_file does.
std::shared_ptr<const LabelledData> read_token_file(const std::string& path);

}  // namespace dtsim::workloads
