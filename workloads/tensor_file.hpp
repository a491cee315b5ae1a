// A data set a user saved from Python: torch.save({"x": X, "y": Y}) with X the samples
// ([N, C, H, W], or [N, H, W] for one channel; any floating dtype, converted to fp32) and
// Y their int64 class labels 0..K-1 ([N]); optionally "test_x" and "test_y" alike.
// Read with torch::jit::pickle_load, which takes the zip format torch.save writes since
// PyTorch 1.6 (checked with Debian's python3-torch 1.13 and LibTorch 1.13).
#pragma once

#include <ATen/core/Dict.h>

#include <memory>
#include <string>

#include "workloads/labelled_data.hpp"

namespace dtsim::workloads {

// Throws std::invalid_argument "<file>: expected ..., got ..." for a file that is not a
// torch.save of such a dict, tensors of other shapes or dtypes, or labels out of range.
std::shared_ptr<const LabelledData> read_tensor_file(const std::string& path);

// For the readers of other torch.save dicts (text_data.hpp's token files): the dict a file
// holds, after the same checks (the archive, the pickle's lengths and memo), and the tensor
// at `key` (nullptr when absent) with its storage checked. Errors as above.
c10::impl::GenericDict read_saved_dict(const std::string& path);
const at::Tensor* find_saved_tensor(const c10::impl::GenericDict& dict, const std::string& key, const std::string& path);

}  // namespace dtsim::workloads
