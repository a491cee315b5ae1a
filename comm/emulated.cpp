#include "comm/emulated.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "comm/device_sync.hpp"
#include "network_models/network.hpp"

namespace dtsim::comm {

namespace {

using net::CollectiveKind;

// An emulated operation completes when the engine fires its Completion.
class EmulatedOp final : public OpState {
 public:
  explicit EmulatedOp(std::shared_ptr<sim::Completion> done) : done_(std::move(done)) {}
  bool ready() override { return done_->done(); }
  void resume_when_done(std::coroutine_handle<> h) override { done_->await_suspend(h); }

 private:
  std::shared_ptr<sim::Completion> done_;
};

// What a rank puts on links for a planned collective, in whole bytes.
std::uint64_t wire_bytes(const net::CollectivePlan& plan, int rank) {
  return static_cast<std::uint64_t>(std::llround(plan.bytes_sent[static_cast<std::size_t>(rank)]));
}

void require_contiguous(const at::Tensor& t, const char* op) {
  if (!t.defined() || !t.is_contiguous())
    throw std::invalid_argument(fmt::format("{}: tensor must be defined and contiguous", op));
}

}  // namespace

struct EmulatedWorld::PendingCollective {
  CollectiveKind kind;
  int variant = 0;  // broadcast root, or the all-reduce's ReduceOp
  int first_rank = -1;
  int arrived = 0;
  int finished = 0;
  net::CollectiveSpec spec;
  std::shared_ptr<net::Execution> execution;
  std::shared_ptr<const net::CollectivePlan> plan;  // its schedule and per-rank bytes
  std::vector<at::Tensor> tensors;
  std::vector<std::vector<at::Tensor>*> gather_outputs;
  std::vector<std::shared_ptr<sim::Completion>> done;
  std::vector<char> on_stream;        // per rank: a stream collective (starts the rank's next)
  at::Tensor result;                  // all-reduce sum, or the broadcast root's data
  std::vector<at::Tensor> gathered;   // all-gather blocks
};

struct EmulatedWorld::Exchange {
  sim::Engine* engine;
  std::shared_ptr<sim::Completion> done;
  std::vector<at::Tensor>* received;  // exchange: one tensor per peer
  at::Tensor target;                   // recv: the tensor the message lands in
  std::vector<at::Tensor> delivered;
  std::int64_t numel;
  at::ScalarType dtype;
  int rank;
  int remaining;  // sends not yet arrived + receives not yet matched
};

class EmulatedCommunicator final : public Communicator {
 public:
  EmulatedCommunicator(EmulatedWorld& world, int rank) : world_(world), rank_(rank) {}

  std::string backend() const override { return "emulated"; }
  int rank() const override { return rank_; }
  int size() const override { return world_.size(); }
  double now() const override { return world_.engine_.now(); }

  Op compute(const sim::ComputeCost& cost, const std::function<void()>& work) override {
    double seconds = world_.timing_.run(cost, work);
    const auto& slow = world_.timing_.slowdown;
    if (!slow.empty()) seconds *= slow.at(rank_);
    // What the clock advances by: the seconds on the engine's time grid.
    const double done_at = world_.engine_.after(seconds);
    count_compute(done_at - now());
    auto done = std::make_shared<sim::Completion>(world_.engine_);
    done->fire_at(done_at);
    return Op(std::make_shared<EmulatedOp>(std::move(done)));
  }

  Op all_reduce(at::Tensor& tensor, ReduceOp op) override {
    require_contiguous(tensor, "all_reduce");
    return collective(CollectiveKind::AllReduce, tensor, static_cast<int>(op), nullptr);
  }

  Op all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) override {
    require_contiguous(input, "all_gather");
    if (input.dim() != 1) throw std::invalid_argument("all_gather: input must be 1-D");
    return collective(CollectiveKind::AllGather, input, 0, &outputs);
  }

  Op broadcast(at::Tensor& tensor, int root) override {
    require_contiguous(tensor, "broadcast");
    if (root < 0 || root >= size())
      throw std::invalid_argument(fmt::format("broadcast: root {} of {} ranks", root, size()));
    return collective(CollectiveKind::Broadcast, tensor, root, nullptr);
  }

  Op exchange(const at::Tensor& send, std::span<const int> peers, std::vector<at::Tensor>& received) override;
  Op send(const at::Tensor& tensor, int peer) override;
  Op recv(at::Tensor& tensor, int peer) override;

  Op stream_all_reduce(at::Tensor& tensor, ReduceOp op) override {
    require_contiguous(tensor, "stream_all_reduce");
    return stream_collective(CollectiveKind::AllReduce, tensor, static_cast<int>(op), nullptr);
  }
  Op stream_all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) override {
    require_contiguous(input, "stream_all_gather");
    if (input.dim() != 1) throw std::invalid_argument("stream_all_gather: input must be 1-D");
    return stream_collective(CollectiveKind::AllGather, input, 0, &outputs);
  }

  void add_wire_bytes(std::uint64_t b) { traffic_.wire_bytes += b; }

  // This rank's part of its current stream collective has completed: start the next.
  void stream_op_done() {
    stream_busy_ = false;
    if (stream_queue_.empty()) return;
    StreamOp next = std::move(stream_queue_.front());
    stream_queue_.pop_front();
    start_stream(next);
  }

 private:
  // A stream collective issued (its sequence number taken) but not yet arrived.
  struct StreamOp {
    std::uint64_t seq;
    CollectiveKind kind;
    at::Tensor tensor;
    int variant;
    std::vector<at::Tensor>* outputs;
    std::shared_ptr<sim::Completion> done;
  };

  Op stream_collective(CollectiveKind kind, const at::Tensor& tensor, int variant, std::vector<at::Tensor>* outputs) {
    ++traffic_.calls;
    auto done = std::make_shared<sim::Completion>(world_.engine_);
    StreamOp op{collective_seq_++, kind, tensor, variant, outputs, done};
    if (stream_busy_)
      stream_queue_.push_back(std::move(op));
    else
      start_stream(op);
    return Op(std::make_shared<EmulatedOp>(std::move(done)));
  }
  void start_stream(StreamOp& op) {
    stream_busy_ = true;  // before arriving: a one-rank collective may complete inside arrive
    world_.arrive(rank_, op.seq, op.kind, op.tensor, op.variant, op.outputs, std::move(op.done), true);
  }

  std::deque<StreamOp> stream_queue_;
  bool stream_busy_ = false;
  Op collective(CollectiveKind kind, const at::Tensor& tensor, int variant, std::vector<at::Tensor>* outputs) {
    ++traffic_.calls;
    auto done = std::make_shared<sim::Completion>(world_.engine_);
    world_.arrive(rank_, collective_seq_++, kind, tensor, variant, outputs, done);
    return Op(std::make_shared<EmulatedOp>(std::move(done)));
  }

  EmulatedWorld& world_;
  int rank_;
  std::uint64_t collective_seq_ = 0;
};

EmulatedWorld::EmulatedWorld(sim::Engine& engine, std::shared_ptr<net::Network> network, ComputeTiming timing)
    : engine_(engine), network_(std::move(network)), timing_(std::move(timing)) {
  if (!timing_.slowdown.empty() && static_cast<int>(timing_.slowdown.size()) != network_->size())
    throw std::invalid_argument(
        fmt::format("stragglers: {} slowdown factors for {} ranks", timing_.slowdown.size(), network_->size()));
  for (int r = 0; r < network_->size(); ++r) ranks_.push_back(std::make_unique<EmulatedCommunicator>(*this, r));
}

EmulatedWorld::~EmulatedWorld() = default;

int EmulatedWorld::size() const { return network_->size(); }

Communicator& EmulatedWorld::communicator(int rank) { return *ranks_.at(rank); }

void EmulatedWorld::arrive(int rank, std::uint64_t seq, CollectiveKind kind, const at::Tensor& tensor, int variant,
                           std::vector<at::Tensor>* gather_outputs, std::shared_ptr<sim::Completion> done,
                           bool on_stream) {
  const int n = size();
  auto& p = collectives_[seq];
  if (p.first_rank < 0) {
    p.kind = kind;
    p.variant = variant;
    p.first_rank = rank;
    p.tensors.resize(n);
    p.gather_outputs.assign(n, nullptr);
    p.done.resize(n);
    p.on_stream.assign(n, 0);
    p.spec.kind = kind;
    p.spec.elements = tensor.numel();
    p.spec.element_size = tensor.element_size();
    p.spec.root = kind == CollectiveKind::Broadcast ? variant : 0;
  } else {
    const auto& first = p.tensors[p.first_rank];
    const bool same_shape = kind == CollectiveKind::AllGather || first.numel() == tensor.numel();
    if (p.kind != kind || p.variant != variant || first.scalar_type() != tensor.scalar_type() || !same_shape)
      throw std::runtime_error(fmt::format(
          "collective #{} does not match: rank {} called {}({}) on {} {} elements, rank {} called {}({}) on {} {} "
          "elements",
          seq, rank, net::to_string(kind), variant, tensor.numel(), c10::toString(tensor.scalar_type()),
          p.first_rank, net::to_string(p.kind), p.variant, first.numel(), c10::toString(first.scalar_type())));
  }
  p.tensors[rank] = tensor;
  p.gather_outputs[rank] = gather_outputs;
  p.done[rank] = std::move(done);
  p.on_stream[rank] = on_stream ? 1 : 0;
  ++p.arrived;

  if (kind == CollectiveKind::Broadcast && rank == variant) p.result = tensor.clone();  // sent when the root arrives
  if (kind == CollectiveKind::AllGather) {
    if (p.arrived == n) {
      for (int r = 0; r < n; ++r) {
        p.spec.block_elements.push_back(p.tensors[r].numel());
        p.gathered.push_back(p.tensors[r].clone());  // ranks may reuse their buffers once done
      }
      start(p, seq);
      auto execution = p.execution;  // `p` is erased when the last rank is done
      for (int r = 0; r < n; ++r) ranks_[r]->add_wire_bytes(wire_bytes(*p.plan, r));
      for (int r = 0; r < n; ++r) execution->arrive(r);
    }
    return;
  }
  if (!p.execution) start(p, seq);
  if (kind == CollectiveKind::AllReduce && p.arrived == n) {
    // Sum in rank order, so the result does not depend on arrival order.
    p.result = p.tensors[0].clone();
    for (int r = 1; r < n; ++r) p.result.add_(p.tensors[r]);
    if (p.variant == static_cast<int>(ReduceOp::Average)) p.result.div_(n);
  }
  ranks_[rank]->add_wire_bytes(wire_bytes(*p.plan, rank));  // charged to the step that issued it
  auto execution = p.execution;  // `p` is erased when the last rank is done
  execution->arrive(rank);
}

// Plans the collective (its schedule and per-rank bytes, built once per distinct spec)
// and starts it.
void EmulatedWorld::start(PendingCollective& p, std::uint64_t seq) {
  p.spec = network_->resolve(p.spec);
  p.plan = network_->plan(p.spec);
  p.execution = network_->collective(*p.plan, [this, seq](int rank) { rank_done(seq, rank); });
}

void EmulatedWorld::rank_done(std::uint64_t seq, int rank) {
  auto& p = collectives_.at(seq);
  sim::Engine::Callback deliver;
  switch (p.kind) {
    case CollectiveKind::AllReduce:
    case CollectiveKind::Broadcast:
      deliver = [t = p.tensors[rank], result = p.result]() mutable { t.copy_(result); };
      break;
    case CollectiveKind::AllGather:
      deliver = [out = p.gather_outputs[rank], blocks = p.gathered, rank]() {
        out->resize(blocks.size());
        for (std::size_t j = 0; j < blocks.size(); ++j)
          (*out)[j] = static_cast<int>(j) == rank ? blocks[j] : blocks[j].clone();
      };
      break;
    case CollectiveKind::ReduceScatter: break;
  }
  p.done[rank]->fire_at(engine_.now(), std::move(deliver));
  const bool on_stream = p.on_stream[rank] != 0;
  if (++p.finished == size()) collectives_.erase(seq);
  if (on_stream) ranks_[rank]->stream_op_done();  // the rank's next stream collective arrives now
}

Op EmulatedCommunicator::exchange(const at::Tensor& send, std::span<const int> peers,
                                  std::vector<at::Tensor>& received) {
  require_contiguous(send, "exchange");
  ++traffic_.calls;
  auto ex = std::make_shared<EmulatedWorld::Exchange>();
  ex->engine = &world_.engine_;
  ex->done = std::make_shared<sim::Completion>(world_.engine_);
  ex->received = &received;
  ex->delivered.resize(peers.size());
  ex->numel = send.numel();
  ex->dtype = send.scalar_type();
  ex->rank = rank_;
  ex->remaining = 2 * static_cast<int>(peers.size());
  if (peers.empty()) {
    ex->done->fire_at(now());
    return Op(std::make_shared<EmulatedOp>(ex->done));
  }
  // Receives are posted first, so that data already arrived is matched at once.
  for (std::size_t k = 0; k < peers.size(); ++k) {
    const int peer = peers[k];
    if (peer < 0 || peer >= size() || peer == rank_)
      throw std::invalid_argument(fmt::format("exchange: rank {} cannot exchange with peer {}", rank_, peer));
    auto& early = world_.arrived_[{peer, rank_}];
    if (!early.empty()) {
      at::Tensor payload = std::move(early.front());
      early.pop_front();
      world_.receive_matched({ex, k}, std::move(payload), peer);
    } else {
      world_.receivers_[{peer, rank_}].push_back({ex, k});
    }
  }
  // Sends: the payload is copied now (eager protocol), so the sender may reuse `send`.
  const auto bytes = send.numel() * send.element_size();
  at::Tensor payload = send.clone();
  for (int peer : peers) {
    traffic_.wire_bytes += static_cast<std::uint64_t>(bytes);
    world_.network_->send(rank_, peer, static_cast<double>(bytes), [this, ex, peer, payload] {
      world_.deliver(rank_, peer, payload);
      if (--ex->remaining == 0) EmulatedWorld::finish_exchange(ex);
    });
  }
  return Op(std::make_shared<EmulatedOp>(ex->done));
}

// Plain messages travel on their own channels (tag 1), so they never match an exchange's.
Op EmulatedCommunicator::send(const at::Tensor& tensor, int peer) {
  require_contiguous(tensor, "send");
  if (peer < 0 || peer >= size() || peer == rank_)
    throw std::invalid_argument(fmt::format("send: rank {} cannot send to rank {}", rank_, peer));
  ++traffic_.calls;
  auto ex = std::make_shared<EmulatedWorld::Exchange>();
  ex->engine = &world_.engine_;
  ex->done = std::make_shared<sim::Completion>(world_.engine_);
  ex->received = nullptr;
  ex->numel = tensor.numel();
  ex->dtype = tensor.scalar_type();
  ex->rank = rank_;
  ex->remaining = 1;
  const auto bytes = tensor.numel() * tensor.element_size();
  traffic_.wire_bytes += static_cast<std::uint64_t>(bytes);
  world_.network_->send(rank_, peer, static_cast<double>(bytes), [this, ex, peer, payload = tensor.clone()] {
    world_.deliver(rank_ + EmulatedWorld::kPointToPoint, peer, payload);
    if (--ex->remaining == 0) EmulatedWorld::finish_exchange(ex);
  });
  return Op(std::make_shared<EmulatedOp>(ex->done));
}

Op EmulatedCommunicator::recv(at::Tensor& tensor, int peer) {
  require_contiguous(tensor, "recv");
  if (peer < 0 || peer >= size() || peer == rank_)
    throw std::invalid_argument(fmt::format("recv: rank {} cannot receive from rank {}", rank_, peer));
  ++traffic_.calls;
  auto ex = std::make_shared<EmulatedWorld::Exchange>();
  ex->engine = &world_.engine_;
  ex->done = std::make_shared<sim::Completion>(world_.engine_);
  ex->received = nullptr;
  ex->target = tensor;
  ex->delivered.resize(1);
  ex->numel = tensor.numel();
  ex->dtype = tensor.scalar_type();
  ex->rank = rank_;
  ex->remaining = 1;
  const std::pair<int, int> channel{peer + EmulatedWorld::kPointToPoint, rank_};
  auto& early = world_.arrived_[channel];
  if (!early.empty()) {
    at::Tensor payload = std::move(early.front());
    early.pop_front();
    world_.receive_matched({ex, 0}, std::move(payload), peer);
  } else {
    world_.receivers_[channel].push_back({ex, 0});
  }
  return Op(std::make_shared<EmulatedOp>(ex->done));
}

void EmulatedWorld::deliver(int src, int dst, at::Tensor payload) {
  auto& waiting = receivers_[{src, dst}];
  if (waiting.empty()) {
    arrived_[{src, dst}].push_back(std::move(payload));
    return;
  }
  auto rv = std::move(waiting.front());
  waiting.pop_front();
  receive_matched(rv, std::move(payload), src >= kPointToPoint ? src - kPointToPoint : src);
}

void EmulatedWorld::receive_matched(const PendingReceive& rv, at::Tensor payload, int src) {
  auto& x = *rv.exchange;
  if (payload.numel() != x.numel || payload.scalar_type() != x.dtype)
    throw std::runtime_error(fmt::format("message: rank {} sent {} {} elements to rank {}, which expects {} {} elements",
                                         src, payload.numel(), c10::toString(payload.scalar_type()), x.rank, x.numel,
                                         c10::toString(x.dtype)));
  x.delivered[rv.slot] = std::move(payload);
  if (--x.remaining == 0) finish_exchange(rv.exchange);
}

// Every send has arrived and every receive is matched: the rank sees its data now.
void EmulatedWorld::finish_exchange(const std::shared_ptr<Exchange>& ex) {
  ex->done->fire_at(ex->engine->now(), [ex]() {
    if (ex->target.defined()) {  // a recv
      ex->target.copy_(ex->delivered.front().view(ex->target.sizes()));
      ex->delivered.clear();
      return;
    }
    if (!ex->received) return;  // a send
    auto& out = *ex->received;
    out.resize(ex->delivered.size());
    for (std::size_t j = 0; j < ex->delivered.size(); ++j) {
      if (out[j].defined() && out[j].numel() == ex->numel && out[j].scalar_type() == ex->dtype && out[j].is_contiguous())
        out[j].copy_(ex->delivered[j].view(out[j].sizes()));
      else
        out[j] = ex->delivered[j].clone();
    }
    ex->delivered.clear();
  });
}

}  // namespace dtsim::comm
