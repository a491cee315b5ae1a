#include "algorithms/outer_exchange.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/llm_codecs.hpp"

namespace dtsim::algorithms {

namespace llm = kernels::llm;

const std::vector<std::string>& outer_codec_names() {
  static const std::vector<std::string> names{"none", "bf16", "int8", "fp4"};
  return names;
}

OuterCodec outer_codec_named(const std::string& name) {
  const auto& names = outer_codec_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<OuterCodec>(i);
  throw std::invalid_argument(fmt::format("outer codec \"{}\" is none of {}", name, fmt::join(names, ", ")));
}

const std::string& outer_codec_name(OuterCodec codec) { return outer_codec_names()[static_cast<std::size_t>(codec)]; }

namespace {

std::int64_t fp4_blocks(std::int64_t numel, std::int64_t block) {
  const auto b = block == 0 ? std::max<std::int64_t>(1, numel) : block;
  return (numel + b - 1) / b;
}

// Bytes reinterpreted as fp32 (or another type): a copy, so that the view starts aligned.
at::Tensor bytes_as(const at::Tensor& bytes, at::ScalarType type) { return bytes.clone().view(type); }

}  // namespace

std::uint64_t outer_codec_bits(OuterCodec codec, const std::vector<std::int64_t>& numels, std::int64_t fp4_block) {
  std::uint64_t bits = 0;
  for (const auto n : numels) {
    const auto un = static_cast<std::uint64_t>(n);
    switch (codec) {
      case OuterCodec::none: bits += 32 * un; break;
      case OuterCodec::bf16: bits += 16 * un; break;
      case OuterCodec::int8: bits += 8 * un + 8192; break;
      case OuterCodec::fp4: bits += 8 * ((un + 1) / 2) + 32 * static_cast<std::uint64_t>(fp4_blocks(n, fp4_block)); break;
    }
  }
  return bits;
}

std::int64_t OuterExchange::message_bytes(std::int64_t n) const {
  switch (codec_) {
    case OuterCodec::none: return 4 * n;
    case OuterCodec::bf16: return 2 * n;
    case OuterCodec::int8: return 4 * 256 + n;
    case OuterCodec::fp4: return 4 * fp4_blocks(n, fp4_block_) + (n + 1) / 2;
  }
  return 0;
}

// Layouts: bf16 [2 n bytes]; int8 [codebook, 256 fp32][codes, n]; fp4 [scales, fp32 per
// block][codes, ceil(n / 2)].
at::Tensor OuterExchange::encode(const at::Tensor& x_in) const {
  const auto x = x_in.contiguous().reshape({-1});
  switch (codec_) {
    case OuterCodec::bf16: return x.to(at::kBFloat16).view(at::kByte);
    case OuterCodec::int8: {
      const auto p = llm::int8_encode(x);
      return at::cat({p.codebook.view(at::kByte), p.codes});
    }
    case OuterCodec::fp4: {
      const auto p = llm::fp4_encode(x, fp4_block_);
      return at::cat({p.scales.view(at::kByte), p.codes});
    }
    case OuterCodec::none: break;
  }
  throw std::logic_error("OuterExchange::encode: codec none has no message");
}

void OuterExchange::decode_add(const at::Tensor& m, at::Tensor& out, bool accumulate) const {
  const auto n = out.numel();
  switch (codec_) {
    case OuterCodec::bf16: {
      const auto v = bytes_as(m, at::kBFloat16).to(at::kFloat);
      accumulate ? out.add_(v) : out.copy_(v);
      return;
    }
    case OuterCodec::int8: {
      llm::Int8Payload p;
      p.codebook = bytes_as(m.narrow(0, 0, 1024), at::kFloat);
      p.codes = m.narrow(0, 1024, n);
      llm::int8_decode(p, out, 1.0f, accumulate);
      return;
    }
    case OuterCodec::fp4: {
      llm::Fp4Payload p;
      const auto blocks = fp4_blocks(n, fp4_block_);
      p.scales = bytes_as(m.narrow(0, 0, 4 * blocks), at::kFloat);
      p.codes = m.narrow(0, 4 * blocks, (n + 1) / 2);
      p.numel = n;
      p.block = fp4_block_ == 0 ? std::max<std::int64_t>(1, n) : fp4_block_;
      llm::fp4_decode(p, out, 1.0f, accumulate);
      return;
    }
    case OuterCodec::none: break;
  }
  throw std::logic_error("OuterExchange::decode_add: codec none has no message");
}

sim::Task<std::uint64_t> OuterExchange::start(comm::Communicator& comm, std::vector<at::Tensor>& delta) {
  if (in_flight_) throw std::logic_error("OuterExchange::start: the previous exchange was not joined");
  delta_ = &delta;
  std::int64_t d = 0;
  std::vector<std::int64_t> numels;
  for (const auto& t : delta) {
    numels.push_back(t.numel());
    d += t.numel();
  }
  const auto dd = static_cast<double>(d);
  if (codec_ == OuterCodec::none) {
    co_await comm.compute({0.0, 8.0 * dd}, [&] {
      if (flat_.count() == 0)
        flat_ = kernels::TensorBuffer(delta);
      else
        flat_.pack(delta);
    });
    op_ = comm.all_reduce(flat_.buffer(), comm::ReduceOp::Average);
  } else {
    // The encoders read every element a few times (statistics, scale, code): about 10
    // flops and 12 bytes per element, the message written included.
    co_await comm.compute({10.0 * dd, 12.0 * dd}, [&] {
      std::vector<at::Tensor> parts;
      for (const auto& t : delta) parts.push_back(encode(t));
      message_ = at::cat(parts);
      if (flat_.count() == 0) flat_ = kernels::TensorBuffer(delta);
    });
    op_ = comm.all_gather(message_, gathered_);
  }
  in_flight_ = true;
  co_return outer_codec_bits(codec_, numels, fp4_block_);
}

sim::Task<void> OuterExchange::join(comm::Communicator& comm) {
  if (!in_flight_) throw std::logic_error("OuterExchange::join: nothing in flight");
  co_await op_;
  in_flight_ = false;
  auto& delta = *delta_;
  const auto d = static_cast<double>(flat_.buffer().numel());
  const auto ranks = static_cast<double>(comm.size());
  if (codec_ == OuterCodec::none) {
    co_await comm.compute({0.0, 8.0 * d}, [&] { flat_.unpack(delta); });
    co_return;
  }
  co_await comm.compute({2.0 * ranks * d, ranks * (4.0 + 8.0) * d}, [&] {
    auto& sum = flat_.buffer();
    for (std::size_t r = 0; r < gathered_.size(); ++r) {
      std::int64_t element = 0, byte = 0;
      for (const auto& t : delta) {
        const auto n = t.numel();
        const auto bytes = message_bytes(n);
        auto out = sum.narrow(0, element, n);
        decode_add(gathered_[r].narrow(0, byte, bytes), out, r > 0);
        element += n;
        byte += bytes;
      }
    }
    sum.div_(ranks);
    flat_.unpack(delta);
  });
}

}  // namespace dtsim::algorithms
