// The quota door's state under concurrency (src/server/quota_door.h),
// driven without gRPC, also under ThreadSanitizer: two doors of a fleet
// over one memory store (their shares from HeartbeatShare), eight client
// threads, each a client that reports on a stream of one door, breaks its
// stream now and then and reconnects to either door, and sends a bad
// report now and then; a network thread delivers each response a little
// later (what a reactor's write is) and ends finished streams (OnDone).
// The clients apply what they receive as Envoy does, and the token buckets
// they held at any one instant never sum above the budget; every stream
// is closed and both doors stop cleanly.

#include "quota_door.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "config.h"
#include "gtest/gtest.h"
#include "heartbeat_share.h"
#include "rlqs_held.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit::server {
namespace quota_door_test {
namespace {

using testing::RlqsHeld;

constexpr int64_t kLimit = 20;
constexpr int kClients = 8;

int64_t now_ms() { return ServerClock{}.now_ms(); }

// Delivers queued work after a short delay, in order, on one thread.
class Network {
 public:
  Network() : thread_([this] { run(); }) {}
  ~Network() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(std::function<void()> work) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_all();
  }
  // Waits until the queue is empty (and what was taken has run).
  void drain() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      std::function<void()> work = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      work();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

// One client: its Envoy-like bucket state across its streams.
class Client {
 public:
  // Applies a response's actions for its bucket (called by the network).
  void apply(const rlqs_pb::RateLimitQuotaResponse& r) {
    std::lock_guard lock(mu_);
    const int64_t now = now_ms();
    for (const auto& a : r.bucket_action()) {
      const auto name = a.bucket_id().bucket().find("name");
      if (name == a.bucket_id().bucket().end() || name->second != "api") {
        continue;  // the allowed-all bucket holds no tokens
      }
      if (!a.has_quota_assignment_action()) continue;
      const auto& q = a.quota_assignment_action();
      const int64_t ttl_ms = q.assignment_time_to_live().seconds() * 1000;
      const bool tb = q.rate_limit_strategy().has_token_bucket();
      const uint32_t t =
          tb ? q.rate_limit_strategy().token_bucket().max_tokens() : 0;
      const bool live = held_ && now < expires_ms_;
      if (live && tb && t == tokens_) {  // identical: keeps running
        expires_ms_ = now + ttl_ms;
        continue;
      }
      if (held_)
        history_.push_back({from_ms_, std::min(now, expires_ms_), tokens_});
      held_ = tb;
      tokens_ = t;
      from_ms_ = now;
      expires_ms_ = now + ttl_ms;
    }
  }
  std::vector<RlqsHeld> history() {
    std::lock_guard lock(mu_);
    std::vector<RlqsHeld> out = history_;
    if (held_) out.push_back({from_ms_, expires_ms_, tokens_});
    return out;
  }

 private:
  std::mutex mu_;
  bool held_ = false;
  uint32_t tokens_ = 0;
  int64_t from_ms_ = 0, expires_ms_ = 0;
  std::vector<RlqsHeld> history_;
};

// A stream as its reactor sees it: writes and the finish go through the
// network; OnDone closes it in the door.
class Reactor final : public QuotaStreamWriter {
 public:
  Reactor(QuotaDoor& door, Network& net, Client& client)
      : door_(door), net_(net), client_(client) {}
  // Opens the stream; false once the door stopped.
  bool open() {
    stream_ = door_.open(this);
    if (stream_ == nullptr) return false;
    stream_->start();
    return true;
  }
  bool done() { return done_.load(); }

  // OnReadDone with a message: the door handles it; a refused one ends the
  // stream with its status. Returns the door's status.
  absl::Status read(const rlqs_pb::RateLimitQuotaUsageReports& message) {
    absl::Status s = door_.report(*stream_, message);
    if (!s.ok()) {
      stream_->finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                   std::string(s.message())));
    }
    return s;
  }
  // OnReadDone(false): the client half-closed or the stream broke.
  void half_close() { stream_->finish(grpc::Status::OK); }

  void start_write(const rlqs_pb::RateLimitQuotaResponse* r) override {
    auto copy = std::make_shared<rlqs_pb::RateLimitQuotaResponse>(*r);
    net_.post([this, copy] {
      client_.apply(*copy);
      stream_->on_write_done(true);
    });
  }
  void finish(const grpc::Status&) override {
    net_.post([this] {
      stream_->detach();
      door_.close(*stream_);
      done_.store(true);
    });
  }

 private:
  QuotaDoor& door_;
  Network& net_;
  Client& client_;
  std::shared_ptr<QuotaStream> stream_;
  std::atomic<bool> done_{false};
};

rlqs_pb::RateLimitQuotaUsageReports report(bool bad, std::mt19937& rng) {
  rlqs_pb::RateLimitQuotaUsageReports r;
  r.set_domain("edge");
  auto* u = r.add_bucket_quota_usages();
  if (!bad) (*u->mutable_bucket_id()->mutable_bucket())["name"] = "api";
  u->mutable_time_elapsed()->set_seconds(1);
  u->set_num_requests_allowed(rng() % 20);
  u->set_num_requests_denied(rng() % 20);
  auto* open = r.add_bucket_quota_usages();
  (*open->mutable_bucket_id()->mutable_bucket())["name"] = "open";
  open->mutable_time_elapsed()->set_seconds(1);
  return r;
}

TEST(QuotaDoorThreads,
     TwoDoorsEightClientsBreaksAndBadReportsStayWithinTheBudget) {
  absl::StatusOr<ServerConfig> config = parse_config(R"(
version: 1
rlqs:
  domains:
    - domain: edge
      assignmentTtl: 2s
      buckets:
        - match: {name: api}
          limit: {requests: 20, per: 1s}
        - match: {name: open}
          allow: true
)",
                                                     "door.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create();
  std::vector<std::unique_ptr<QuotaDoor>> doors;
  for (int d = 0; d < 2; ++d) {
    auto shares = HeartbeatShare::create(
        {.node_id = "door-" + std::to_string(d), .heartbeat_ms = 10}, store);
    ASSERT_TRUE(shares.ok()) << shares.status();
    doors.push_back(std::make_unique<QuotaDoor>(config->rlqs, ServerClock{},
                                                *std::move(shares)));
  }
  // Declared after the doors, so it goes (drained) before them.
  Network net;
  std::vector<Client> clients(kClients);
  std::vector<std::vector<std::unique_ptr<Reactor>>> reactors(kClients);
  std::atomic<int64_t> bad_refused{0};
  const int64_t end = now_ms() + 2500;
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(static_cast<uint32_t>(c) + 1);
      std::vector<std::unique_ptr<Reactor>>& mine = reactors[c];
      Reactor* current = nullptr;
      while (now_ms() < end) {
        if (current == nullptr || current->done()) {
          mine.push_back(
              std::make_unique<Reactor>(*doors[rng() % 2], net, clients[c]));
          current = mine.back().get();
          if (!current->open()) return;
        }
        const bool bad = rng() % 40 == 0;
        if (!current->read(report(bad, rng)).ok()) {
          EXPECT_TRUE(bad);
          bad_refused.fetch_add(1);
          current = nullptr;  // the door ended it
        } else if (rng() % 100 == 0) {
          current->half_close();  // a break: reconnect to either door
          current = nullptr;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 20));
      }
      if (current != nullptr) current->half_close();
    });
  }
  for (auto& t : threads) t.join();
  net.drain();
  for (auto& d : doors) EXPECT_EQ(d->streams_open(), 0u);
  for (auto& mine : reactors) {
    for (auto& r : mine) EXPECT_TRUE(r->done());
  }
  EXPECT_GT(bad_refused.load(), 0);

  std::vector<RlqsHeld> held;
  for (Client& c : clients) {
    for (const RlqsHeld& h : c.history()) held.push_back(h);
  }
  // Not vacuous: token buckets were held. How much of the budget depends
  // on how often streams broke (a broken stream's assignments count until
  // they expire, and its client starts again from nothing).
  const int64_t most = testing::most_held_at_once(held);
  EXPECT_GT(most, 0);
  EXPECT_LE(most, kLimit);
  for (auto& d : doors) d->stop();
}

}  // namespace
}  // namespace quota_door_test
}  // namespace throttlekit::server
