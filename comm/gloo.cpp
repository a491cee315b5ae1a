#include "comm/gloo.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "comm/live_job.hpp"
#include "comm/wire_bytes.hpp"

#if DTSIM_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <chrono>
#include <map>

namespace dtsim::comm {

namespace {

// A live operation: c10d works to wait for, then a local step (e.g. divide for an average).
// A failure names the rank that is gone when there is one (LiveJob::explain_failure),
// otherwise says what Gloo said.
class GlooOp final : public OpState {
 public:
  GlooOp(std::shared_ptr<LiveJob> job, std::string what, std::vector<c10::intrusive_ptr<c10d::Work>> works,
         std::function<void()> then = {})
      : job_(std::move(job)), what_(std::move(what)), works_(std::move(works)), then_(std::move(then)) {}
  bool ready() override {
    try {
      for (auto& w : works_) w->wait(job_->env().timeout);
    } catch (const c10::Error& e) {
      fail(e.what_without_backtrace());
    } catch (const std::exception& e) {
      fail(e.what());
    }
    if (then_) then_();
    job_->op_completed();
    return true;
  }
  void resume_when_done(std::coroutine_handle<>) override {
    throw std::logic_error("GlooOp: blocking operation asked to suspend");
  }

 private:
  [[noreturn]] void fail(std::string why) {
    if (auto nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
    const std::string gone = job_->explain_failure();
    throw std::runtime_error(fmt::format("{} failed: {}", what_, gone.empty() ? why : gone));
  }

  std::shared_ptr<LiveJob> job_;
  std::string what_;  // e.g. "rank 2: all_reduce #7"
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::function<void()> then_;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const LiveEnv& env, net::NetworkConfig accounting)
      : env_(env), accounting_(std::move(accounting)), start_(std::chrono::steady_clock::now()) {
    job_ = LiveJob::join(env);
    auto options = c10d::ProcessGroupGloo::Options::create(env.timeout);
    const bool loopback = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
    options->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                        : c10d::ProcessGroupGloo::createDefaultDevice());
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(job_->store(), env.rank, env.world_size, options);
  }

  ~GlooCommunicator() override {
    // After a failure, Gloo's threads may still wait on a peer that is gone: leave the
    // group to the process's exit (which closes its sockets) instead of joining them.
    if (job_->failed()) {
      job_->end_failed();
      (void)group_.release();
    }
  }

  std::string backend() const override { return "gloo"; }
  int rank() const override { return env_.rank; }
  int size() const override { return env_.world_size; }
  double now() const override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  Op compute(const sim::ComputeCost&, const std::function<void()>& work) override {
    const auto begin = std::chrono::steady_clock::now();
    work();
    count_compute(std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
    return Op();
  }

  Op all_reduce(at::Tensor& tensor, ReduceOp op) override {
    ++traffic_.calls;
    traffic_.wire_bytes += bytes_sent({.kind = net::CollectiveKind::AllReduce,
                                       .elements = tensor.numel(),
                                       .element_size = tensor.element_size()});
    if (tensor.scalar_type() == at::kBFloat16) return bf16_all_reduce(tensor, op);
    std::vector<at::Tensor> tensors{tensor};
    auto work = group_->allreduce(tensors);
    std::function<void()> then;
    if (op == ReduceOp::Average) then = [t = tensor, n = size()]() mutable { t.div_(n); };
    return Op(std::make_shared<GlooOp>(job_, label("all_reduce"), std::vector{work}, std::move(then)));
  }

  // Gloo in LibTorch 1.13 reduces no bfloat16 ("Invalid scalar type"), so a bf16
  // all-reduce all-gathers every rank's values (widened to fp32, exactly) and sums them
  // in rank order, each addition rounded to bf16: the emulated backend's result, bit for
  // bit. It moves W times the data of a ring all-reduce; the traffic counted is the
  // all-reduce's, as on every backend.
  Op bf16_all_reduce(at::Tensor& tensor, ReduceOp op) {
    const int n = size();
    std::vector<at::Tensor> mine{tensor.to(at::kFloat).reshape({-1})};
    auto gathered = std::make_shared<std::vector<std::vector<at::Tensor>>>(1);
    for (int r = 0; r < n; ++r) (*gathered)[0].push_back(at::empty_like(mine[0]));
    auto work = group_->allgather(*gathered, mine);
    auto then = [gathered, t = tensor, op, n]() mutable {
      const auto& blocks = (*gathered)[0];
      at::Tensor sum = blocks[0].to(at::kBFloat16);
      for (int r = 1; r < n; ++r) sum.add_(blocks[r].to(at::kBFloat16));
      if (op == ReduceOp::Average) sum.div_(n);
      t.copy_(sum.view(t.sizes()));
    };
    return Op(std::make_shared<GlooOp>(job_, label("all_reduce"), std::vector{work}, std::move(then)));
  }

  Op all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) override {
    ++traffic_.calls;
    if (input.dim() != 1) throw std::invalid_argument("all_gather: input must be 1-D");
    const int n = size();
    // Gloo gathers equal sizes: first the sizes, then the payloads padded to the largest.
    std::vector<at::Tensor> my_size{at::full({1}, input.numel(), at::kLong)};
    std::vector<std::vector<at::Tensor>> sizes(1);
    for (int r = 0; r < n; ++r) sizes[0].push_back(at::empty({1}, at::kLong));
    GlooOp(job_, label("all_gather sizes"), {group_->allgather(sizes, my_size)}).ready();
    std::vector<std::int64_t> numel(n);
    std::int64_t largest = 0;
    for (int r = 0; r < n; ++r) {
      numel[r] = sizes[0][r].item<std::int64_t>();
      largest = std::max(largest, numel[r]);
    }
    traffic_.wire_bytes += bytes_sent(
        {.kind = net::CollectiveKind::AllGather, .element_size = input.element_size(), .block_elements = numel});
    if (largest == 0) {  // every block empty: nothing to move (and Gloo's allgather divides by the size)
      outputs.assign(static_cast<std::size_t>(n), at::empty({0}, input.options()));
      return Op();
    }
    std::vector<at::Tensor> padded{at::zeros({largest}, input.options())};
    padded[0].narrow(0, 0, input.numel()).copy_(input);
    auto gathered = std::make_shared<std::vector<std::vector<at::Tensor>>>(1);
    for (int r = 0; r < n; ++r) (*gathered)[0].push_back(at::empty({largest}, input.options()));
    auto work = group_->allgather(*gathered, padded);
    auto then = [gathered, numel, &outputs]() {
      outputs.resize(numel.size());
      for (std::size_t r = 0; r < numel.size(); ++r) outputs[r] = (*gathered)[0][r].narrow(0, 0, numel[r]).clone();
    };
    return Op(std::make_shared<GlooOp>(job_, label("all_gather"), std::vector{work}, std::move(then)));
  }

  Op exchange(const at::Tensor& send, std::span<const int> peers, std::vector<at::Tensor>& received) override {
    ++traffic_.calls;
    const int tag = 2 * static_cast<int>(exchange_seq_++ % (1 << 29));  // even: exchanges
    received.resize(peers.size());
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    auto send_list = std::make_shared<std::vector<at::Tensor>>(1, send.contiguous());
    for (std::size_t k = 0; k < peers.size(); ++k) {
      if (!received[k].defined() || received[k].numel() != send.numel() ||
          received[k].scalar_type() != send.scalar_type() || !received[k].is_contiguous())
        received[k] = at::empty_like(send, at::MemoryFormat::Contiguous);
      works.push_back(group_->send(*send_list, peers[k], tag));
      std::vector<at::Tensor> recv_list{received[k]};
      works.push_back(group_->recv(recv_list, peers[k], tag));
      traffic_.wire_bytes += static_cast<std::uint64_t>(send.numel() * send.element_size());
    }
    return Op(std::make_shared<GlooOp>(job_, label("exchange"), std::move(works), [send_list]() {}));
  }

  // Odd tags: plain messages, counted per peer on both sides so that they match in order.
  Op send(const at::Tensor& tensor, int peer) override {
    ++traffic_.calls;
    traffic_.wire_bytes += static_cast<std::uint64_t>(tensor.numel() * tensor.element_size());
    const int tag = 2 * static_cast<int>(sent_to_[peer]++ % (1 << 29)) + 1;
    auto list = std::make_shared<std::vector<at::Tensor>>(1, tensor.contiguous().clone());
    auto work = group_->send(*list, peer, tag);
    return Op(std::make_shared<GlooOp>(job_, label("send"), std::vector{work}, [list]() {}));
  }

  Op recv(at::Tensor& tensor, int peer) override {
    ++traffic_.calls;
    const int tag = 2 * static_cast<int>(received_from_[peer]++ % (1 << 29)) + 1;
    std::vector<at::Tensor> list{tensor};
    auto work = group_->recv(list, peer, tag);
    return Op(std::make_shared<GlooOp>(job_, label("recv"), std::vector{work}));
  }

  Op broadcast(at::Tensor& tensor, int root) override {
    ++traffic_.calls;
    traffic_.wire_bytes += bytes_sent({.kind = net::CollectiveKind::Broadcast,
                                       .elements = tensor.numel(),
                                       .element_size = tensor.element_size(),
                                       .root = root});
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    auto work = group_->broadcast(tensors, opts);
    return Op(std::make_shared<GlooOp>(job_, label("broadcast"), std::vector{work}));
  }

 private:
  std::string label(const char* op) const { return fmt::format("rank {}: {} #{}", env_.rank, op, traffic_.calls); }
  std::uint64_t bytes_sent(const net::CollectiveSpec& spec) const {
    return collective_bytes_sent(net::resolve_collective(spec, size(), accounting_), rank());
  }

  LiveEnv env_;
  net::NetworkConfig accounting_;
  std::chrono::steady_clock::time_point start_;
  std::shared_ptr<LiveJob> job_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::uint64_t exchange_seq_ = 0;
  std::map<int, std::uint64_t> sent_to_, received_from_;
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const LiveEnv& env, net::NetworkConfig accounting) {
  auto failed = [&](const std::string& why) {
    return std::runtime_error(fmt::format("gloo rendezvous at {}:{} as rank {} of {} failed: {}", env.master_addr,
                                          env.master_port, env.rank, env.world_size, why));
  };
  try {
    return std::make_unique<GlooCommunicator>(env, std::move(accounting));
  } catch (const c10::Error& e) {
    throw failed(e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw failed(e.what());
  }
}

bool gloo_available() { return true; }

}  // namespace dtsim::comm

#else  // !DTSIM_HAVE_GLOO

namespace dtsim::comm {
std::unique_ptr<Communicator> make_gloo_communicator(const LiveEnv&, net::NetworkConfig) {
  throw std::runtime_error("this dtsim was built against a LibTorch without c10d's Gloo: live CPU runs unavailable");
}
bool gloo_available() { return false; }
}  // namespace dtsim::comm

#endif
