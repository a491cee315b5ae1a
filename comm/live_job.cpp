#include "comm/live_job.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::comm {

LiveJob::Timing LiveJob::timing_for(std::chrono::milliseconds timeout) {
  const auto beat = std::clamp(timeout / 20, std::chrono::milliseconds(100), std::chrono::milliseconds(1000));
  return {beat, 5 * beat};
}

}  // namespace dtsim::comm

#if DTSIM_HAVE_C10D
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <atomic>
#include <cstdlib>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace dtsim::comm {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }
std::string seconds(std::chrono::milliseconds d) { return fmt::format("{:g} s", static_cast<double>(d.count()) / 1e3); }
std::string key(const char* what, int rank) { return fmt::format("dtsim/{}/{}", what, rank); }
const std::string kVerdict = "dtsim/verdict";

std::string ranks_phrase(const std::vector<int>& ranks) {
  return ranks.size() == 1 ? fmt::format("rank {}", ranks[0]) : fmt::format("ranks {}", fmt::join(ranks, ", "));
}

std::string first_line(const std::exception& e) {
  std::string what = e.what();
  if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
  return what;
}

// What the heartbeat thread and the rank's main thread share.
struct Heart {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  bool store_lost = false;
  std::string verdict;  // cached from the store once any rank published one
  std::atomic<std::uint64_t> ops{0};
};

void beat_loop(std::shared_ptr<Heart> heart, c10::intrusive_ptr<c10d::TCPStore> store, int rank,
               std::chrono::milliseconds period) {
  std::uint64_t beat = 0;
  std::unique_lock lock(heart->mutex);
  while (!heart->stop) {
    const bool have_verdict = !heart->verdict.empty();
    lock.unlock();
    std::string verdict;
    bool lost = false;
    try {
      store->set(key("hb", rank), bytes(fmt::format("{} {}", ++beat, heart->ops.load())));
      if (!have_verdict && store->check({kVerdict})) {
        verdict = text(store->get(kVerdict));
        store->set(key("seen", rank), bytes("1"));
      }
    } catch (const std::exception&) {
      lost = true;  // rank 0's store is gone (or this process is ending)
    }
    lock.lock();
    if (!verdict.empty()) heart->verdict = verdict;
    if (lost) {
      heart->store_lost = true;
      break;
    }
    heart->wake.wait_for(lock, period, [&] { return heart->stop; });
  }
}

// c10d logs connection failures itself before throwing; dtsim reports them in one line
// of its own, so quiet the library's log unless the user asked for its level.
void quiet_library_logging() {
  if (std::getenv("GLOG_minloglevel")) return;
#if defined(C10_USE_GLOG)
  FLAGS_minloglevel = 3;  // glog: FATAL only
#else
  FLAGS_caffe2_log_level = 3;
#endif
}

class TcpLiveJob final : public LiveJob {
 public:
  explicit TcpLiveJob(const LiveEnv& env) : env_(env), timing_(timing_for(env.timeout)) {
    connect();
    rendezvous();
    thread_ = std::thread(beat_loop, heart_, beat_store_, env_.rank, timing_.beat);
  }

  ~TcpLiveJob() override {
    if (failed_) end_failed();
    {
      std::lock_guard lock(heart_->mutex);
      heart_->stop = true;
    }
    heart_->wake.notify_all();
    // After a failure the heartbeat may be stuck on a store that stopped answering:
    // do not wait for it (it holds its own references).
    if (failed_)
      thread_.detach();
    else
      thread_.join();
  }

  const LiveEnv& env() const override { return env_; }
  c10::intrusive_ptr<c10d::Store> store() override { return store_; }
  void op_completed() override { ++heart_->ops; }
  bool failed() const override { return failed_; }

  std::string explain_failure() override {
    failed_ = true;
    {
      std::lock_guard lock(heart_->mutex);
      if (!heart_->verdict.empty()) return heart_->verdict;
      if (heart_->store_lost) return rank0_gone();
    }
    try {
      return cache(diagnose());
    } catch (const std::exception&) {
      return rank0_gone();
    }
  }

  void end_failed() override {
    if (ended_) return;
    ended_ = true;
    failed_ = true;
    try {
      beat_store_->set(key("state", env_.rank), bytes("failed"));
      if (env_.rank == 0) linger();
    } catch (const std::exception&) {
    }
  }

 private:
  std::runtime_error failure(const std::string& why) const { return std::runtime_error(why); }

  std::string rank0_gone() const {
    if (env_.launcher_serves_store)
      return fmt::format("the launcher's store at {}:{} stopped answering", env_.master_addr, env_.master_port);
    if (env_.rank == 0) return "";
    return fmt::format("rank 0 is gone (the store it served at {}:{} stopped answering)", env_.master_addr,
                       env_.master_port);
  }

  std::string cache(std::string verdict) {
    std::lock_guard lock(heart_->mutex);
    if (heart_->verdict.empty()) heart_->verdict = verdict;
    return verdict;
  }

  void connect() {
    c10d::TCPStoreOptions opts;
    opts.port = env_.master_port;
    opts.isServer = env_.rank == 0 && !env_.launcher_serves_store;
    opts.numWorkers = c10::nullopt;
    opts.waitWorkers = false;
    opts.timeout = env_.timeout;
    try {
      store_ = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, opts);
      opts.isServer = false;
      beat_store_ = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, opts);
    } catch (const std::exception& e) {
      if (env_.rank == 0)
        throw failure(fmt::format("cannot serve the store at {}:{}: {}", env_.master_addr, env_.master_port, first_line(e)));
      throw failure(fmt::format("rank 0 never arrived: no store answered at {}:{} within {}", env_.master_addr,
                                env_.master_port, seconds(env_.timeout)));
    }
  }

  void rendezvous() {
    auto& s = *store_;
    const int n = env_.world_size, me = env_.rank;
    auto lost = [](const std::exception& e) {
      return std::runtime_error(fmt::format("rank 0 is gone during the rendezvous: {}", first_line(e)));
    };
    // A rank whose WORLD_SIZE differs from rank 0's does not join (rank 0 then names it).
    std::string theirs = std::to_string(n);
    try {
      if (me == 0) {
        s.set("dtsim/world_size", bytes(theirs));
      } else {
        s.wait({"dtsim/world_size"}, env_.timeout);
        theirs = text(s.get("dtsim/world_size"));
      }
    } catch (const std::exception& e) {
      throw lost(e);
    }
    if (theirs != std::to_string(n)) throw failure(fmt::format("WORLD_SIZE is {} here but {} at rank 0", n, theirs));
    std::int64_t joined = 0;
    try {
      s.set(key("hb", me), bytes("0 0"));
      joined = s.add(key("joined", me), 1);
    } catch (const std::exception& e) {
      throw lost(e);
    }
    if (joined > 1) throw failure(fmt::format("rank {} joined twice (two processes have RANK={})", me, me));

    if (me == 0) {
      std::vector<std::string> keys;
      for (int r = 0; r < n; ++r) keys.push_back(key("joined", r));
      // Polled rather than waited for: a timed-out wait leaves the connection expecting
      // a late answer.
      std::vector<int> missing;
      const auto until = Clock::now() + env_.timeout;
      while (!s.check(keys)) {
        if (Clock::now() >= until) {
          for (int r = 0; r < n; ++r)
            if (!s.check({keys[r]})) missing.push_back(r);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      const std::string outcome =
          missing.empty() ? "ok"
                          : fmt::format("{} never joined (waited {})", ranks_phrase(missing), seconds(env_.timeout));
      s.set("dtsim/rendezvous", bytes(outcome));
      if (missing.empty()) return;
      // Keep the store up until the ranks that came have read the outcome.
      const auto present = static_cast<std::int64_t>(n - static_cast<int>(missing.size()) - 1);
      const auto acks_until = Clock::now() + timing_.window;
      while (s.add("dtsim/acks", 0) < present && Clock::now() < acks_until) std::this_thread::sleep_for(timing_.beat / 4);
      throw failure(outcome);
    }
    // Rank 0 decides within the timeout from its own start, which may be later than ours.
    std::string outcome;
    const auto patience = 2 * env_.timeout + timing_.window;
    try {
      s.wait({"dtsim/rendezvous"}, patience);
      outcome = text(s.get("dtsim/rendezvous"));
      s.add("dtsim/acks", 1);
    } catch (const std::exception&) {
      throw failure(fmt::format("rank 0 did not finish the rendezvous within {}", seconds(patience)));
    }
    if (outcome != "ok") throw failure(outcome);
  }

  // Watches every other rank's heartbeat for the window; returns the verdict, or "" when
  // every rank is alive.
  std::string diagnose() {
    auto& s = *beat_store_;
    const int n = env_.world_size;
    std::vector<std::string> first(n);
    std::vector<bool> alive(n, false);
    alive[env_.rank] = true;
    for (int r = 0; r < n; ++r)
      if (r != env_.rank) first[r] = text(s.get(key("hb", r)));
    const auto until = Clock::now() + timing_.window;
    while (true) {
      if (s.check({kVerdict})) return text(s.get(kVerdict));
      bool all = true;
      for (int r = 0; r < n; ++r) {
        if (alive[r]) continue;
        if (text(s.get(key("hb", r))) != first[r] || s.check({key("state", r)}))
          alive[r] = true;
        else
          all = false;
      }
      if (all) return "";
      if (Clock::now() >= until) break;
      std::this_thread::sleep_for(timing_.beat / 2);
    }
    std::vector<int> gone;
    for (int r = 0; r < n; ++r)
      if (!alive[r]) gone.push_back(r);
    std::string verdict = fmt::format("{} {} gone (no heartbeat for {})", ranks_phrase(gone),
                                      gone.size() == 1 ? "is" : "are", seconds(timing_.window));
    if (s.add("dtsim/verdict_claim", 1) == 1) {
      s.set("dtsim/gone", bytes(fmt::format("{}", fmt::join(gone, ","))));
      s.set(kVerdict, bytes(verdict));
      return verdict;
    }
    s.wait({kVerdict}, timing_.window);  // another rank found out first: take its words
    return text(s.get(kVerdict));
  }

  // Rank 0 after a failure: keep serving the store until every other rank has seen the
  // verdict or ended, or has been silent for the window.
  void linger() {
    auto& s = *beat_store_;
    const int n = env_.world_size;
    std::vector<std::string> first(n);
    for (int r = 1; r < n; ++r) first[r] = text(s.get(key("hb", r)));
    std::vector<bool> gone(n, false);  // named in the verdict: nothing to wait for
    if (s.check({"dtsim/gone"})) {
      std::istringstream list(text(s.get("dtsim/gone")));
      for (std::string r; std::getline(list, r, ',');) gone.at(std::stoul(r)) = true;
    }
    const auto start = Clock::now();
    while (Clock::now() - start < timing_.window + timing_.beat) {
      bool settled = true;
      for (int r = 1; r < n && settled; ++r) {
        const bool heard = gone[r] || s.check({key("state", r)}) || s.check({key("seen", r)});
        const bool silent = Clock::now() - start >= timing_.window && text(s.get(key("hb", r))) == first[r];
        settled = heard || silent;
      }
      if (settled) return;
      std::this_thread::sleep_for(timing_.beat / 2);
    }
  }

  LiveEnv env_;
  Timing timing_;
  c10::intrusive_ptr<c10d::TCPStore> store_;       // the rendezvous (rank 0: the server)
  c10::intrusive_ptr<c10d::TCPStore> beat_store_;  // this rank's own connection for liveness
  std::shared_ptr<Heart> heart_ = std::make_shared<Heart>();
  std::thread thread_;
  bool failed_ = false;
  bool ended_ = false;
};

}  // namespace

std::shared_ptr<LiveJob> LiveJob::join(const LiveEnv& env) {
  quiet_library_logging();
  return std::make_shared<TcpLiveJob>(env);
}

}  // namespace dtsim::comm

#else  // !DTSIM_HAVE_C10D

namespace dtsim::comm {
std::shared_ptr<LiveJob> LiveJob::join(const LiveEnv&) {
  throw std::runtime_error("this dtsim was built against a LibTorch without c10d: live runs unavailable");
}
}  // namespace dtsim::comm

#endif
