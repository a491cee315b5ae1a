#include "comm/emulated.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "comm/wire_bytes.hpp"

namespace dtsim::comm {

namespace {

enum Kind { kAllReduce, kAllGather, kBroadcast };
const char* kind_name(int k) {
  switch (k) {
    case kAllReduce: return "all_reduce";
    case kAllGather: return "all_gather";
    default: return "broadcast";
  }
}

// An emulated operation completes when the engine fires its Completion.
class EmulatedOp final : public OpState {
 public:
  explicit EmulatedOp(std::shared_ptr<sim::Completion> done) : done_(std::move(done)) {}
  bool ready() override { return done_->done(); }
  void resume_when_done(std::coroutine_handle<> h) override { done_->await_suspend(h); }

 private:
  std::shared_ptr<sim::Completion> done_;
};

void require_contiguous(const at::Tensor& t, const char* op) {
  if (!t.defined() || !t.is_contiguous())
    throw std::invalid_argument(fmt::format("{}: tensor must be defined and contiguous", op));
}

}  // namespace

struct EmulatedWorld::PendingCollective {
  int kind = -1;
  int variant = 0;  // broadcast root, or the all-reduce's ReduceOp
  int first_rank = -1;
  int arrived = 0;
  std::vector<double> arrival;
  std::vector<at::Tensor> tensors;
  std::vector<std::vector<at::Tensor>*> gather_outputs;
  std::vector<std::shared_ptr<sim::Completion>> done;
  std::uint64_t seq = 0;
};

struct EmulatedWorld::Message {
  double available;  // simulated time the data has fully arrived at the receiver
  at::Tensor data;   // the sender's payload, copied when it was sent
};

// One peer's slot of an exchange that is waiting for its message.
struct EmulatedWorld::PendingReceive {
  struct Exchange {
    std::shared_ptr<sim::Completion> done;
    std::vector<at::Tensor>* received;
    std::vector<at::Tensor> delivered;
    std::int64_t numel;
    at::ScalarType dtype;
    int rank;
    int remaining;
    double finish;
  };
  std::shared_ptr<Exchange> exchange;
  std::size_t slot;
  double posted;
};

class EmulatedCommunicator final : public Communicator {
 public:
  EmulatedCommunicator(EmulatedWorld& world, int rank) : world_(world), rank_(rank) {}

  std::string backend() const override { return "emulated"; }
  int rank() const override { return rank_; }
  int size() const override { return world_.size(); }
  double now() const override { return world_.engine_.now(); }

  Op compute(const sim::ComputeCost& cost, const std::function<void()>& work) override {
    double seconds = 0.0;
    if (world_.timing_.kind == ComputeTiming::Kind::Measured) {
      const auto start = std::chrono::steady_clock::now();
      work();
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } else {
      work();
      seconds = world_.timing_.model.seconds(cost);
    }
    return after(now() + seconds);
  }

  Op all_reduce(at::Tensor& tensor, ReduceOp op) override {
    require_contiguous(tensor, "all_reduce");
    traffic_.wire_bytes += ring_all_reduce_bytes(rank_, size(), tensor.numel(), tensor.element_size());
    return collective(kAllReduce, tensor, static_cast<int>(op), nullptr);
  }

  Op all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) override {
    require_contiguous(input, "all_gather");
    if (input.dim() != 1) throw std::invalid_argument("all_gather: input must be 1-D");
    return collective(kAllGather, input, 0, &outputs);
  }

  Op broadcast(at::Tensor& tensor, int root) override {
    require_contiguous(tensor, "broadcast");
    if (root < 0 || root >= size()) throw std::invalid_argument(fmt::format("broadcast: root {} of {} ranks", root, size()));
    traffic_.wire_bytes += binomial_broadcast_bytes(rank_, size(), root, tensor.numel() * tensor.element_size());
    return collective(kBroadcast, tensor, root, nullptr);
  }

  Op exchange(const at::Tensor& send, std::span<const int> peers, std::vector<at::Tensor>& received) override;

  void add_wire_bytes(std::uint64_t b) { traffic_.wire_bytes += b; }

 private:
  Op after(double t) {
    auto done = std::make_shared<sim::Completion>(world_.engine_);
    done->fire_at(t);
    return Op(std::make_shared<EmulatedOp>(std::move(done)));
  }
  Op collective(int kind, const at::Tensor& tensor, int variant, std::vector<at::Tensor>* outputs) {
    ++traffic_.calls;
    auto& pending = world_.arrive(rank_, collective_seq_++, kind, tensor, variant, outputs);
    auto done = pending.done[rank_];
    if (pending.arrived == size()) {
      const auto seq = pending.seq;
      if (kind == kAllReduce) world_.complete_all_reduce(pending);
      else if (kind == kAllGather) world_.complete_all_gather(pending);
      else world_.complete_broadcast(pending);
      world_.collectives_.erase(seq);
    }
    return Op(std::make_shared<EmulatedOp>(std::move(done)));
  }

  EmulatedWorld& world_;
  int rank_;
  std::uint64_t collective_seq_ = 0;
};

EmulatedWorld::EmulatedWorld(sim::Engine& engine, std::shared_ptr<const net::NetworkModel> network,
                             ComputeTiming timing)
    : engine_(engine), network_(std::move(network)), timing_(timing) {
  for (int r = 0; r < network_->size(); ++r) ranks_.push_back(std::make_unique<EmulatedCommunicator>(*this, r));
}

EmulatedWorld::~EmulatedWorld() = default;

Communicator& EmulatedWorld::communicator(int rank) { return *ranks_.at(rank); }

EmulatedWorld::PendingCollective& EmulatedWorld::arrive(int rank, std::uint64_t seq, int kind,
                                                        const at::Tensor& tensor, int variant,
                                                        std::vector<at::Tensor>* gather_outputs) {
  const int n = size();
  auto& p = collectives_[seq];
  if (p.kind < 0) {
    p.kind = kind;
    p.variant = variant;
    p.first_rank = rank;
    p.seq = seq;
    p.arrival.assign(n, 0.0);
    p.tensors.resize(n);
    p.gather_outputs.assign(n, nullptr);
    p.done.resize(n);
  } else {
    const auto& first = p.tensors[p.first_rank];
    const bool same_shape = kind == kAllGather || first.numel() == tensor.numel();
    if (p.kind != kind || p.variant != variant || first.scalar_type() != tensor.scalar_type() || !same_shape)
      throw std::runtime_error(fmt::format(
          "collective #{} does not match: rank {} called {}({}) on {} {} elements, rank {} called {}({}) on {} {} "
          "elements",
          seq, rank, kind_name(kind), variant, tensor.numel(), c10::toString(tensor.scalar_type()), p.first_rank,
          kind_name(p.kind), p.variant, first.numel(), c10::toString(first.scalar_type())));
  }
  p.arrival[rank] = engine_.now();
  p.tensors[rank] = tensor;
  p.done[rank] = std::make_shared<sim::Completion>(engine_);
  p.gather_outputs[rank] = gather_outputs;
  ++p.arrived;
  return p;
}

void EmulatedWorld::complete_all_reduce(PendingCollective& p) {
  const int n = size();
  // Sum in rank order, so the result does not depend on arrival order.
  at::Tensor result = p.tensors[0].clone();
  for (int r = 1; r < n; ++r) result.add_(p.tensors[r]);
  if (p.variant == static_cast<int>(ReduceOp::Average)) result.div_(n);
  const double bytes = static_cast<double>(result.numel() * result.element_size());
  const auto finish = network_->all_reduce(p.arrival, bytes);
  for (int r = 0; r < n; ++r)
    p.done[r]->fire_at(finish[r], [t = p.tensors[r], result]() mutable { t.copy_(result); });
}

void EmulatedWorld::complete_all_gather(PendingCollective& p) {
  const int n = size();
  std::vector<double> block(n);
  std::vector<std::int64_t> block_bytes(n);
  for (int r = 0; r < n; ++r) {
    block_bytes[r] = p.tensors[r].numel() * p.tensors[r].element_size();
    block[r] = static_cast<double>(block_bytes[r]);
  }
  // Snapshot every input now: a rank may reuse its buffer once its own gather completes.
  std::vector<at::Tensor> snapshot(n);
  for (int r = 0; r < n; ++r) snapshot[r] = p.tensors[r].clone();
  const auto finish = network_->all_gather(p.arrival, block);
  for (int r = 0; r < n; ++r) {
    ranks_[r]->add_wire_bytes(ring_all_gather_bytes(r, block_bytes));
    p.done[r]->fire_at(finish[r], [out = p.gather_outputs[r], snapshot, r]() {
      out->resize(snapshot.size());
      for (std::size_t j = 0; j < snapshot.size(); ++j)
        (*out)[j] = static_cast<int>(j) == r ? snapshot[j] : snapshot[j].clone();
    });
  }
}

void EmulatedWorld::complete_broadcast(PendingCollective& p) {
  const int n = size();
  at::Tensor value = p.tensors[p.variant].clone();
  const auto finish = network_->broadcast(
      p.arrival, static_cast<double>(value.numel() * value.element_size()), p.variant);
  for (int r = 0; r < n; ++r)
    p.done[r]->fire_at(finish[r], [t = p.tensors[r], value]() mutable { t.copy_(value); });
}

Op EmulatedCommunicator::exchange(const at::Tensor& send, std::span<const int> peers,
                                  std::vector<at::Tensor>& received) {
  require_contiguous(send, "exchange");
  ++traffic_.calls;
  const double now_s = now();
  const auto bytes = send.numel() * send.element_size();
  auto ex = std::make_shared<EmulatedWorld::PendingReceive::Exchange>();
  ex->done = std::make_shared<sim::Completion>(world_.engine_);
  ex->received = &received;
  ex->delivered.resize(peers.size());
  ex->numel = send.numel();
  ex->dtype = send.scalar_type();
  ex->rank = rank_;
  ex->remaining = static_cast<int>(peers.size());
  ex->finish = now_s;

  // Sends: the payload is copied now (eager protocol), so the sender may reuse `send`.
  at::Tensor payload = peers.empty() ? at::Tensor() : send.clone();
  for (int peer : peers) {
    if (peer < 0 || peer >= size() || peer == rank_)
      throw std::invalid_argument(fmt::format("exchange: rank {} cannot exchange with peer {}", rank_, peer));
    const double available = now_s + world_.network_->p2p_time(rank_, peer, static_cast<double>(bytes));
    ex->finish = std::max(ex->finish, available);
    traffic_.wire_bytes += static_cast<std::uint64_t>(bytes);
    world_.in_flight_[{rank_, peer}].push_back({available, payload});
  }
  // Receives: post one per peer, then match everything now matchable on the affected
  // channels (ours as receiver, and the peers' pending receives from us).
  for (std::size_t k = 0; k < peers.size(); ++k) world_.receivers_[{peers[k], rank_}].push_back({ex, k, now_s});

  auto match = [this](std::pair<int, int> channel) {
    auto& msgs = world_.in_flight_[channel];
    auto& recvs = world_.receivers_[channel];
    std::size_t m = 0;
    for (; m < msgs.size() && m < recvs.size(); ++m) {
      auto& msg = msgs[m];
      auto& rv = recvs[m];
      auto& x = *rv.exchange;
      if (msg.data.numel() != x.numel || msg.data.scalar_type() != x.dtype)
        throw std::runtime_error(fmt::format(
            "exchange: rank {} sent {} {} elements to rank {}, which expects {} {} elements", channel.first,
            msg.data.numel(), c10::toString(msg.data.scalar_type()), x.rank, x.numel, c10::toString(x.dtype)));
      x.delivered[rv.slot] = msg.data;
      x.finish = std::max(x.finish, std::max(msg.available, rv.posted));
      if (--x.remaining == 0) {
        x.done->fire_at(x.finish, [ex = rv.exchange]() {
          auto& out = *ex->received;
          out.resize(ex->delivered.size());
          for (std::size_t j = 0; j < ex->delivered.size(); ++j) {
            if (out[j].defined() && out[j].numel() == ex->numel && out[j].scalar_type() == ex->dtype &&
                out[j].is_contiguous())
              out[j].copy_(ex->delivered[j].view(out[j].sizes()));
            else
              out[j] = ex->delivered[j].clone();
          }
          ex->delivered.clear();
        });
      }
    }
    msgs.erase(msgs.begin(), msgs.begin() + static_cast<std::ptrdiff_t>(m));
    recvs.erase(recvs.begin(), recvs.begin() + static_cast<std::ptrdiff_t>(m));
  };
  for (int peer : peers) {
    match({peer, rank_});
    match({rank_, peer});
  }
  if (peers.empty()) ex->done->fire_at(now_s);
  return Op(std::make_shared<EmulatedOp>(ex->done));
}

}  // namespace dtsim::comm
