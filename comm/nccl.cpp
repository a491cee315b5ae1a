#include "comm/nccl.hpp"

#include <stdexcept>

#include <fmt/format.h>

#if DTSIM_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#if DTSIM_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "comm/live_job.hpp"
#include "comm/wire_bytes.hpp"

// One check funnel per error domain: the failing call, file:line and the library's words.
#define DTSIM_CUDA_CHECK(call)                                                                              \
  do {                                                                                                      \
    const cudaError_t dtsim_err_ = (call);                                                                  \
    if (dtsim_err_ != cudaSuccess)                                                                          \
      throw std::runtime_error(                                                                             \
          fmt::format("{} failed at {}:{}: {}", #call, __FILE__, __LINE__, cudaGetErrorString(dtsim_err_))); \
  } while (0)
#define DTSIM_NCCL_CHECK(call)                                                                              \
  do {                                                                                                      \
    const ncclResult_t dtsim_res_ = (call);                                                                 \
    if (dtsim_res_ != ncclSuccess)                                                                          \
      throw std::runtime_error(                                                                             \
          fmt::format("{} failed at {}:{}: {}", #call, __FILE__, __LINE__, ncclGetErrorString(dtsim_res_))); \
  } while (0)

namespace dtsim::comm {

namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kChar: return ncclInt8;
    case at::kByte:
    case at::kBool: return ncclUint8;
    default: throw std::invalid_argument(fmt::format("nccl: unsupported dtype {}", c10::toString(t)));
  }
}

// The calling rank's compute stream: LibTorch's current stream on `device`.
cudaStream_t compute_stream([[maybe_unused]] int device) {
#if DTSIM_TORCH_CUDA
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
#else
  return cudaStreamLegacy;
#endif
}

// Tells LibTorch's caching allocator that `t` is in use on `stream`, so its memory is
// not handed out again before the stream is done with it.
void record_stream([[maybe_unused]] const at::Tensor& t, [[maybe_unused]] cudaStream_t stream,
                   [[maybe_unused]] int device) {
#if DTSIM_TORCH_CUDA
  if (t.defined() && t.is_cuda())
    c10::cuda::CUDACachingAllocator::recordStream(
        t.storage().data_ptr(), c10::cuda::getStreamFromExternal(stream, static_cast<c10::DeviceIndex>(device)));
#endif
}

class NcclCommunicator;

// A CUDA event with timing, owned.
struct TimingEvent {
  cudaEvent_t event = nullptr;
  TimingEvent() { DTSIM_CUDA_CHECK(cudaEventCreate(&event)); }
  TimingEvent(const TimingEvent&) = delete;
  TimingEvent& operator=(const TimingEvent&) = delete;
  ~TimingEvent() { cudaEventDestroy(event); }
};

// ncclGroupStart .. ncclGroupEnd, ended on every path: a group left open by an exception
// (a bad peer, say) would queue every later NCCL call of this thread forever.
class NcclGroup {
 public:
  NcclGroup() { DTSIM_NCCL_CHECK(ncclGroupStart()); }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  ~NcclGroup() {
    if (open_) ncclGroupEnd();
  }
  void end() {
    open_ = false;
    DTSIM_NCCL_CHECK(ncclGroupEnd());
  }

 private:
  bool open_ = true;
};

// An operation in flight: its completion event on the communication stream, the tensors
// it must keep alive, and what runs on the compute stream after it (an average, a copy).
class NcclOp final : public OpState {
 public:
  NcclOp(NcclCommunicator& comm, std::string what, cudaEvent_t done, std::vector<at::Tensor> keep,
         std::function<void()> then)
      : comm_(&comm), what_(std::move(what)), done_(done), keep_(std::move(keep)), then_(std::move(then)) {}
  ~NcclOp() override;
  bool ready() override;
  void resume_when_done(std::coroutine_handle<>) override {
    throw std::logic_error("NcclOp: operation asked to suspend");
  }

 private:
  NcclCommunicator* comm_;
  std::string what_;
  cudaEvent_t done_;
  std::vector<at::Tensor> keep_;
  std::function<void()> then_;
  bool finished_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const LiveEnv& env, net::NetworkConfig accounting)
      : env_(env), accounting_(std::move(accounting)), start_(Clock::now()) {
    int devices = 0;
    DTSIM_CUDA_CHECK(cudaGetDeviceCount(&devices));
    if (env.local_rank >= devices)
      throw std::runtime_error(
          fmt::format("LOCAL_RANK is {} but this machine has {} CUDA device(s)", env.local_rank, devices));
    device_ = env.local_rank;
    DTSIM_CUDA_CHECK(cudaSetDevice(device_));
    job_ = LiveJob::join(env);
    comm_ = init_comm("dtsim/nccl_id");
    p2p_comm_ = init_comm("dtsim/nccl_p2p_id");
    DTSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DTSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&p2p_stream_, cudaStreamNonBlocking));
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
    if (job_->failed() || aborted_ || !drained()) {
      job_->end_failed();
      return;  // the communicators are aborted or hung: leave them to the process's exit
    }
    ncclCommDestroy(comm_);
    ncclCommDestroy(p2p_comm_);
    cudaStreamDestroy(stream_);
    cudaStreamDestroy(p2p_stream_);
  }

  std::string backend() const override { return "nccl"; }
  int rank() const override { return env_.rank; }
  int size() const override { return env_.world_size; }
  double now() const override { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // Runs `work` (which enqueues kernels on the compute stream), times it with CUDA events
  // and waits for it, so that the rank's clock includes the GPU time. Work on the CPU
  // (no kernels) counts by the host's clock.
  Op compute(const sim::ComputeCost&, const std::function<void()>& work) override {
    const double host_start = now();
    const TimingEvent begin, end;  // destroyed on every path, a throwing `work` too
    const cudaStream_t s = compute_stream(device_);
    DTSIM_CUDA_CHECK(cudaEventRecord(begin.event, s));
    work();
    DTSIM_CUDA_CHECK(cudaEventRecord(end.event, compute_stream(device_)));
    DTSIM_CUDA_CHECK(cudaEventSynchronize(end.event));
    float ms = 0.0f;
    DTSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, begin.event, end.event));
    count_compute(std::max(ms * 1e-3, now() - host_start));
    return Op();
  }

  Op all_reduce(at::Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "all_reduce");
    ++traffic_.calls;
    traffic_.wire_bytes += bytes_sent({.kind = net::CollectiveKind::AllReduce,
                                       .elements = tensor.numel(),
                                       .element_size = tensor.element_size()});
    const bool floating = at::isFloatingType(tensor.scalar_type());
    if (op == ReduceOp::Average && !floating)
      throw std::invalid_argument("nccl: all_reduce average needs a floating-point tensor");
    at::Tensor dev = staged(tensor);
    begin_op(stream_, {dev});
    DTSIM_NCCL_CHECK(ncclAllReduce(dev.data_ptr(), dev.data_ptr(), static_cast<std::size_t>(dev.numel()),
                                   nccl_type(dev.scalar_type()), op == ReduceOp::Average ? ncclAvg : ncclSum, comm_,
                                   stream_));
    return end_op(stream_, label("all_reduce"), {dev}, copy_back(tensor, dev));
  }

  Op broadcast(at::Tensor& tensor, int root) override {
    check_tensor(tensor, "broadcast");
    ++traffic_.calls;
    traffic_.wire_bytes += bytes_sent({.kind = net::CollectiveKind::Broadcast,
                                       .elements = tensor.numel(),
                                       .element_size = tensor.element_size(),
                                       .root = root});
    at::Tensor dev = staged(tensor);
    begin_op(stream_, {dev});
    DTSIM_NCCL_CHECK(ncclBroadcast(dev.data_ptr(), dev.data_ptr(), static_cast<std::size_t>(dev.numel()),
                                   nccl_type(dev.scalar_type()), root, comm_, stream_));
    return end_op(stream_, label("broadcast"), {dev}, copy_back(tensor, dev));
  }

  // Variable sizes: an all-gather of the sizes (the host needs them to size the outputs),
  // then one grouped send/receive per peer.
  Op all_gather(const at::Tensor& host_input, std::vector<at::Tensor>& outputs) override {
    if (host_input.dim() != 1) throw std::invalid_argument("all_gather: input must be 1-D");
    check_tensor(host_input, "all_gather");
    ++traffic_.calls;
    const int n = size();
    const at::Tensor input = staged(host_input);
    at::Tensor sizes = at::empty({n}, input.options().dtype(at::kLong));
    sizes[rank()].fill_(input.numel());
    begin_op(stream_, {sizes});
    DTSIM_NCCL_CHECK(ncclAllGather(static_cast<std::int64_t*>(sizes.data_ptr()) + rank(), sizes.data_ptr(), 1,
                                   ncclInt64, comm_, stream_));
    {
      Op sizes_done = end_op(stream_, label("all_gather sizes"), {sizes});
      wait_on_host(sizes_done);
    }
    const at::Tensor host_sizes = sizes.to(at::kCPU);
    std::vector<std::int64_t> numel(host_sizes.data_ptr<std::int64_t>(), host_sizes.data_ptr<std::int64_t>() + n);
    traffic_.wire_bytes += bytes_sent(
        {.kind = net::CollectiveKind::AllGather, .element_size = input.element_size(), .block_elements = numel});
    std::vector<at::Tensor> gathered;
    for (int r = 0; r < n; ++r) gathered.push_back(at::empty({numel[r]}, input.options()));
    std::vector<at::Tensor> keep(gathered.begin(), gathered.end());
    keep.push_back(input);
    begin_op(stream_, keep);
    const auto type = nccl_type(input.scalar_type());
    DTSIM_CUDA_CHECK(cudaMemcpyAsync(gathered[rank()].data_ptr(), input.data_ptr(),
                                     static_cast<std::size_t>(input.numel() * input.element_size()),
                                     cudaMemcpyDeviceToDevice, stream_));
    NcclGroup group;
    for (int r = 0; r < n; ++r) {
      if (r == rank()) continue;
      DTSIM_NCCL_CHECK(ncclSend(input.data_ptr(), static_cast<std::size_t>(input.numel()), type, r, comm_, stream_));
      DTSIM_NCCL_CHECK(ncclRecv(gathered[r].data_ptr(), static_cast<std::size_t>(numel[r]), type, r, comm_, stream_));
    }
    group.end();
    const bool to_host = !host_input.is_cuda();
    return end_op(stream_, label("all_gather"), std::move(keep), [gathered, to_host, &outputs] {
      outputs.clear();
      for (const auto& g : gathered) outputs.push_back(to_host ? g.to(at::kCPU) : g);
    });
  }

  Op exchange(const at::Tensor& send, std::span<const int> peers, std::vector<at::Tensor>& received) override {
    check_tensor(send, "exchange");
    ++traffic_.calls;
    received.resize(peers.size());
    const at::Tensor payload = staged(send.contiguous());
    std::vector<at::Tensor> keep{payload}, incoming;
    for (std::size_t k = 0; k < peers.size(); ++k) {
      if (!received[k].defined() || received[k].numel() != payload.numel() ||
          received[k].scalar_type() != payload.scalar_type() || !received[k].is_contiguous() ||
          received[k].device() != send.device())
        received[k] = at::empty_like(send, at::MemoryFormat::Contiguous);
      incoming.push_back(send.is_cuda() ? received[k] : at::empty_like(payload));
      keep.push_back(incoming.back());
      traffic_.wire_bytes += static_cast<std::uint64_t>(payload.numel() * payload.element_size());
    }
    begin_op(stream_, keep);
    const auto type = nccl_type(payload.scalar_type());
    const auto count = static_cast<std::size_t>(payload.numel());
    NcclGroup group;
    for (std::size_t k = 0; k < peers.size(); ++k) {
      DTSIM_NCCL_CHECK(ncclSend(payload.data_ptr(), count, type, peers[k], comm_, stream_));
      DTSIM_NCCL_CHECK(ncclRecv(incoming[k].data_ptr(), count, type, peers[k], comm_, stream_));
    }
    group.end();
    std::function<void()> then;
    if (!send.is_cuda())
      then = [incoming, &received] {
        for (std::size_t k = 0; k < incoming.size(); ++k) received[k].copy_(incoming[k]);
      };
    return end_op(stream_, label("exchange"), std::move(keep), std::move(then));
  }

  Op send(const at::Tensor& tensor, int peer) override {
    check_tensor(tensor, "send");
    ++traffic_.calls;
    traffic_.wire_bytes += static_cast<std::uint64_t>(tensor.numel() * tensor.element_size());
    const at::Tensor copy = tensor.is_cuda() ? tensor.contiguous().clone() : staged(tensor);  // taken now
    begin_op(p2p_stream_, {copy});
    DTSIM_NCCL_CHECK(ncclSend(copy.data_ptr(), static_cast<std::size_t>(copy.numel()), nccl_type(copy.scalar_type()),
                              peer, p2p_comm_, p2p_stream_));
    return end_op(p2p_stream_, label("send"), {copy});
  }

  Op recv(at::Tensor& tensor, int peer) override {
    check_tensor(tensor, "recv");
    ++traffic_.calls;
    at::Tensor dev = tensor.is_cuda() ? tensor : at::empty(tensor.sizes(), tensor.options().device(device()));
    begin_op(p2p_stream_, {dev});
    DTSIM_NCCL_CHECK(ncclRecv(dev.data_ptr(), static_cast<std::size_t>(dev.numel()), nccl_type(dev.scalar_type()), peer,
                              p2p_comm_, p2p_stream_));
    return end_op(p2p_stream_, label("recv"), {dev}, copy_back(tensor, dev));
  }

  // Called by NcclOp::ready, the await: the host waits until `done` (as Gloo's wait does),
  // so that the time goes to the await and not to the next compute phase, the op stays in
  // the watchdog's list (and under its timeout) until it completes, and copies back to
  // the host cannot block on a hung operation. Fails if the watchdog aborted the
  // communicators. The compute stream also waits for it, for the device's own order.
  void join_op(const std::string& what, cudaEvent_t done) {
    for (int polls = 0;; ++polls) {
      const cudaError_t state = cudaEventQuery(done);
      if (state == cudaSuccess) break;
      if (state != cudaErrorNotReady) fail(what, cudaGetErrorString(state));
      if (aborted_) fail(what, abort_reason_);
      if (polls < 1000)
        std::this_thread::yield();  // small messages complete within microseconds
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (aborted_) fail(what, abort_reason_);
    DTSIM_CUDA_CHECK(cudaStreamWaitEvent(compute_stream(device_), done, 0));
    job_->op_completed();
    op_settled(done);
  }

  void op_settled(cudaEvent_t done) {
    std::lock_guard lock(mutex_);
    for (auto it = in_flight_.begin(); it != in_flight_.end(); ++it)
      if (it->first == done) {
        in_flight_.erase(it);
        break;
      }
  }

 private:
  ncclComm_t init_comm(const std::string& key) {
    ncclUniqueId id;
    auto store = job_->store();
    if (rank() == 0) {
      DTSIM_NCCL_CHECK(ncclGetUniqueId(&id));
      const auto* p = reinterpret_cast<const std::uint8_t*>(&id);
      store->set(key, std::vector<std::uint8_t>(p, p + sizeof id));
    } else {
      store->wait({key}, env_.timeout);
      const auto bytes = store->get(key);
      if (bytes.size() != sizeof id) throw std::runtime_error("nccl: malformed ncclUniqueId in the store");
      std::memcpy(&id, bytes.data(), sizeof id);
    }
    ncclComm_t comm = nullptr;
    DTSIM_NCCL_CHECK(ncclCommInitRank(&comm, size(), id, rank()));
    return comm;
  }

  // CPU tensors (the CPU workloads of `dtsim live --backend nccl`) are staged through
  // this rank's GPU: copied there before the operation and back after it.
  at::Device device() const { return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_)); }
  at::Tensor staged(const at::Tensor& t) const { return t.is_cuda() ? t : t.to(device()); }
  static std::function<void()> copy_back(const at::Tensor& host, const at::Tensor& dev) {
    if (host.is_cuda()) return {};
    return [host, dev]() mutable { host.copy_(dev); };
  }

  void check_tensor(const at::Tensor& t, const char* op) const {
    if (!t.is_contiguous()) throw std::invalid_argument(fmt::format("nccl {}: the tensor must be contiguous", op));
    if (aborted_) throw std::runtime_error(fmt::format("{} failed: {}", label(op), abort_reason_));
  }

  // The communication stream starts after everything the compute stream has queued.
  void begin_op(cudaStream_t stream, const std::vector<at::Tensor>& tensors) {
    cudaEvent_t ready = nullptr;
    DTSIM_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    DTSIM_CUDA_CHECK(cudaEventRecord(ready, compute_stream(device_)));
    DTSIM_CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
    cudaEventDestroy(ready);  // released once the wait has been enqueued
    for (const auto& t : tensors) record_stream(t, stream, device_);
  }

  Op end_op(cudaStream_t stream, std::string what, std::vector<at::Tensor> keep, std::function<void()> then = {}) {
    cudaEvent_t done = nullptr;
    DTSIM_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    DTSIM_CUDA_CHECK(cudaEventRecord(done, stream));
    {
      std::lock_guard lock(mutex_);
      in_flight_.emplace_back(done, Clock::now());
    }
    return Op(std::make_shared<NcclOp>(*this, std::move(what), done, std::move(keep), std::move(then)));
  }

  // Blocks the host until `op` is complete, or fails when the watchdog aborts.
  void wait_on_host(Op& op) {
    if (op.await_ready()) op.await_resume();  // joins the op: the compute stream now waits for it
    while (true) {
      const cudaError_t state = cudaStreamQuery(compute_stream(device_));
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) fail(label("wait"), cudaGetErrorString(state));
      if (aborted_) fail(label("wait"), abort_reason_);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // Both communication streams idle within the timeout? (A peer that died mid-operation
  // would otherwise hang the destructor; then the communicators are aborted.)
  bool drained() {
    const auto deadline = Clock::now() + env_.timeout;
    for (cudaStream_t s : {stream_, p2p_stream_}) {
      while (true) {
        const cudaError_t state = cudaStreamQuery(s);
        if (state == cudaSuccess) break;
        if (state != cudaErrorNotReady || Clock::now() > deadline) {
          ncclCommAbort(comm_);
          ncclCommAbort(p2p_comm_);
          return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    return true;
  }

  [[noreturn]] void fail(const std::string& what, const std::string& why) {
    const std::string gone = job_->explain_failure();
    throw std::runtime_error(fmt::format("{} failed: {}", what, gone.empty() ? why : gone));
  }

  // Aborts the communicators on NCCL's asynchronous errors and on operations outstanding
  // longer than the timeout (NCCL itself never times out), so that kernels waiting on a
  // dead peer return and the rank can report it.
  void watch() {
    cudaSetDevice(device_);  // else its first CUDA call makes a context on device 0
    const auto period = LiveJob::timing_for(env_.timeout).beat;
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, period, [&] { return stop_; });
      if (stop_ || aborted_) continue;
      std::string why;
      ncclResult_t async = ncclSuccess, async_p2p = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      ncclCommGetAsyncError(p2p_comm_, &async_p2p);
      if (async != ncclSuccess && async != ncclInProgress) why = ncclGetErrorString(async);
      if (async_p2p != ncclSuccess && async_p2p != ncclInProgress) why = ncclGetErrorString(async_p2p);
      while (!in_flight_.empty() && cudaEventQuery(in_flight_.front().first) == cudaSuccess) in_flight_.pop_front();
      if (why.empty() && !in_flight_.empty() && Clock::now() - in_flight_.front().second > env_.timeout)
        why = fmt::format("an operation did not complete within {} s",
                          std::chrono::duration<double>(env_.timeout).count());
      if (why.empty()) continue;
      abort_reason_ = why;
      aborted_ = true;
      ncclCommAbort(comm_);
      ncclCommAbort(p2p_comm_);
    }
  }

  std::string label(const char* op) const { return fmt::format("rank {}: {} #{}", env_.rank, op, traffic_.calls); }
  std::uint64_t bytes_sent(const net::CollectiveSpec& spec) const {
    return collective_bytes_sent(net::resolve_collective(spec, size(), accounting_), rank());
  }

  LiveEnv env_;
  net::NetworkConfig accounting_;
  Clock::time_point start_;
  int device_ = 0;
  std::shared_ptr<LiveJob> job_;
  ncclComm_t comm_ = nullptr, p2p_comm_ = nullptr;
  cudaStream_t stream_ = nullptr, p2p_stream_ = nullptr;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<cudaEvent_t, Clock::time_point>> in_flight_;  // oldest first
  bool stop_ = false;
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;  // written before aborted_ is set
  std::thread watchdog_;
};

NcclOp::~NcclOp() {
  comm_->op_settled(done_);  // also after a join that threw: the watchdog must not query a destroyed event
  cudaEventDestroy(done_);
}

bool NcclOp::ready() {
  if (!finished_) {
    finished_ = true;
    comm_->join_op(what_, done_);
    if (then_) then_();  // enqueued on the compute stream, after the op
  }
  return true;
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const LiveEnv& env, net::NetworkConfig accounting) {
#if DTSIM_TORCH_CUDA
  try {
    return std::make_unique<NcclCommunicator>(env, std::move(accounting));
  } catch (const c10::Error& e) {
    throw std::runtime_error(fmt::format("nccl setup as rank {} of {} failed: {}", env.rank, env.world_size,
                                         e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw std::runtime_error(
        fmt::format("nccl setup as rank {} of {} failed: {}", env.rank, env.world_size, e.what()));
  }
#else
  (void)env;
  (void)accounting;
  throw std::runtime_error("this dtsim was built without NCCL/CUDA LibTorch");
#endif
}

bool nccl_available() {
#if DTSIM_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

std::string nccl_library_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess || code <= 0) return "";
  // NCCL_VERSION_CODE: X * 10000 + Y * 100 + Z, before 2.9 X * 1000 + Y * 100 + Z.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = (code >= 10000 ? code % 10000 : code % 1000) / 100;
  return fmt::format("{}.{}.{}", major, minor, code % 100);
}

}  // namespace dtsim::comm

#else  // !DTSIM_HAVE_NCCL

namespace dtsim::comm {
std::unique_ptr<Communicator> make_nccl_communicator(const LiveEnv&, net::NetworkConfig) {
  throw std::runtime_error("this dtsim was built without NCCL/CUDA LibTorch");
}
bool nccl_available() { return false; }
std::string nccl_library_version() { return ""; }
}  // namespace dtsim::comm

#endif
