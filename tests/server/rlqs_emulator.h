// tests/server/rlqs_emulator.h
//
// `RlqsEmulator`: a client of the quota door (docs/rlqs.md) that behaves as
// Envoy's `envoy.filters.http.rate_limit_quota` filter does, as
// docs/rlqs.md ("What Envoy's client does") records it, for the tests of
// the stream service:
//
// - a set of buckets (bucket id maps), one stream (opened lazily at the
//   first bucket), a report of every bucket on a timer (`report_period_ms`;
//   Envoy's is 5 s), counters swapped to 0 when read, `time_elapsed` in
//   whole seconds (0 in a bucket's first report), and an immediate report of
//   one bucket when it is first hit;
// - enforcement: a blanket rule as said; a token bucket refilled
//   continuously at tokens_per_fill / fill_interval (whole seconds); the
//   first one starts full, an identical re-sent one (Envoy compares
//   max_tokens, tokens_per_fill and only the nanos of fill_interval) keeps
//   the running bucket and only restarts the TTL, a changed one starts at
//   the old one's fill ratio; the TTL read in whole seconds; at expiry the
//   bucket falls back to the no-assignment behaviour (allow or deny,
//   configurable) and the next token bucket starts full; abandon erases the
//   bucket; actions for unknown buckets are ignored;
// - stream breaks: `break_stream` cancels the stream; the buckets and
//   their assignments stay until they expire, counts of reports that
//   could not be sent are lost, and the next report tick opens a new
//   stream (`move_to` another server first, as a client whose server
//   died is sent elsewhere).
//
// It records every request allowed, with its time, per bucket, so tests
// count admissions per interval, and every token bucket it held (`held`,
// rlqs_held.h), so they check what all clients held at once. Time is the steady
// clock, in ms.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_TESTS_SERVER_RLQS_EMULATOR_H_
#define THROTTLEKIT_TESTS_SERVER_RLQS_EMULATOR_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "rlqs_held.h"

namespace throttlekit::testing {

namespace rlqs_pb = ::envoy::service::rate_limit_quota::v3;
using RlqsId = std::map<std::string, std::string>;

inline int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct RlqsEmulatorOptions {
  std::string domain = "edge";
  int64_t report_period_ms = 5000;
  // Before any assignment (no_assignment_behavior) and after one expired
  // (expired_assignment_behavior without a fallback): deny, or allow.
  bool deny_without_assignment = false;
};

class RlqsEmulator {
 public:
  // What a bucket enforces now.
  enum class Kind { kNone, kAllowAll, kDenyAll, kTokenBucket };
  struct View {
    Kind kind = Kind::kNone;
    uint32_t max_tokens = 0;
    uint32_t tokens_per_fill = 0;
    double tokens = 0;
    int64_t expires_ms = 0;
  };

  RlqsEmulator(std::shared_ptr<grpc::Channel> channel,
               RlqsEmulatorOptions options)
      : options_(std::move(options)),
        stub_(rlqs_pb::RateLimitQuotaService::NewStub(std::move(channel))) {
    timer_ = std::thread([this] { timer_loop(); });
  }
  ~RlqsEmulator() {
    std::vector<std::shared_ptr<Stream>> streams;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      streams = all_streams_;
    }
    cv_.notify_all();
    timer_.join();
    for (auto& s : streams) s->ctx.TryCancel();
    for (auto& s : streams) s->reader.join();
  }
  RlqsEmulator(const RlqsEmulator&) = delete;
  RlqsEmulator& operator=(const RlqsEmulator&) = delete;

  // One request of bucket `id` now: whether the bucket lets it through.
  bool request(const RlqsId& id) {
    std::optional<rlqs_pb::RateLimitQuotaUsageReports> first;
    bool allowed = false;
    {
      std::lock_guard lock(mu_);
      const int64_t now = steady_ms();
      auto [it, added] = buckets_.try_emplace(key(id));
      Bucket& b = it->second;
      if (added) {
        for (const auto& [k, v] : id) (*b.id.mutable_bucket())[k] = v;
        b.last_report_ms = now;
      }
      allowed = decide(b, now);
      (allowed ? b.allowed : b.denied) += 1;
      if (allowed) b.admitted_ms.push_back(now);
      if (added) {
        first.emplace();
        first->set_domain(options_.domain);
        add_usage(*first, b, now);
      }
    }
    if (first.has_value()) send(*first);
    return allowed;
  }

  // From now on, streams open on `channel` (another server of the fleet,
  // as a load balancer would send a client whose server went away); the
  // stream open now is cancelled.
  void move_to(std::shared_ptr<grpc::Channel> channel) {
    {
      std::lock_guard lock(mu_);
      stub_ = rlqs_pb::RateLimitQuotaService::NewStub(std::move(channel));
    }
    break_stream();
  }

  // Cancels the stream (as a connection loss would).
  void break_stream() {
    std::shared_ptr<Stream> s;
    {
      std::lock_guard lock(mu_);
      s = std::exchange(current_, nullptr);
    }
    if (s != nullptr) s->ctx.TryCancel();
  }

  std::optional<View> bucket(const RlqsId& id) {
    std::lock_guard lock(mu_);
    auto it = buckets_.find(key(id));
    if (it == buckets_.end()) return std::nullopt;
    const int64_t now = steady_ms();
    expire(it->second, now);
    View v;
    v.kind = it->second.kind;
    v.expires_ms = it->second.expires_ms;
    if (it->second.tb.has_value()) {
      refill(*it->second.tb, now);
      v.max_tokens = it->second.tb->proto.max_tokens();
      v.tokens_per_fill = it->second.tb->proto.tokens_per_fill().value();
      v.tokens = it->second.tb->tokens;
    }
    return v;
  }

  // Times (steady ms) of the requests of `id` allowed.
  std::vector<int64_t> admitted(const RlqsId& id) {
    std::lock_guard lock(mu_);
    auto it = buckets_.find(key(id));
    return it == buckets_.end() ? std::vector<int64_t>{}
                                : it->second.admitted_ms;
  }
  using Held = RlqsHeld;

  // Every token bucket `id` has held, in order (abandoned ones included).
  std::vector<Held> held(const RlqsId& id) {
    std::lock_guard lock(mu_);
    std::vector<Held> out;
    if (auto a = abandoned_held_.find(key(id)); a != abandoned_held_.end()) {
      out = a->second;
    }
    auto it = buckets_.find(key(id));
    if (it == buckets_.end()) return out;
    out.insert(out.end(), it->second.held.begin(), it->second.held.end());
    if (it->second.tb.has_value()) {
      out.push_back({it->second.tb->installed_ms, it->second.expires_ms,
                     it->second.tb->proto.max_tokens()});
    }
    return out;
  }

  // Bucket actions applied (ignored ones not counted).
  int64_t actions() {
    std::lock_guard lock(mu_);
    return actions_;
  }
  // Streams opened so far.
  int64_t streams_opened() {
    std::lock_guard lock(mu_);
    return static_cast<int64_t>(all_streams_.size());
  }
  // The status the last stream ended with; nullopt while none has.
  std::optional<grpc::Status> last_status() {
    std::lock_guard lock(mu_);
    return last_status_;
  }

  // Waits until a stream has ended or `timeout_ms` passed; the status it
  // ended with.
  std::optional<grpc::Status> wait_for_end(int64_t timeout_ms) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                 [&] { return last_status_.has_value(); });
    return last_status_;
  }

  // Waits until `pred` (called under the emulator's lock, so it must not
  // call the emulator) holds or `timeout_ms` passed; re-checked whenever
  // a response is applied or a stream ends, and every 10 ms.
  bool wait_until(const std::function<bool()>& pred, int64_t timeout_ms) {
    std::unique_lock lock(mu_);
    const int64_t end = steady_ms() + timeout_ms;
    while (!pred()) {
      if (steady_ms() >= end) return false;
      cv_.wait_for(lock, std::chrono::milliseconds(10));
    }
    return true;
  }
  // `wait_until` on one bucket's view.
  bool wait_for_bucket(const RlqsId& id,
                       const std::function<bool(const View&)>& pred,
                       int64_t timeout_ms) {
    const int64_t end = steady_ms() + timeout_ms;
    while (true) {
      std::optional<View> v = bucket(id);
      if (v.has_value() && pred(*v)) return true;
      if (steady_ms() >= end) return false;
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(10));
    }
  }

 private:
  struct TokenBucket {
    ::envoy::type::v3::TokenBucket proto;
    double tokens = 0;
    double rate_per_ms = 0;
    int64_t at_ms = 0;
    int64_t installed_ms = 0;
  };
  struct Bucket {
    rlqs_pb::BucketId id;
    int64_t allowed = 0, denied = 0;
    int64_t last_report_ms = 0;
    Kind kind = Kind::kNone;
    std::optional<TokenBucket> tb;
    int64_t expires_ms = 0;
    std::vector<int64_t> admitted_ms;
    std::vector<Held> held;  // the token buckets it held before `tb`
  };
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<
        rlqs_pb::RateLimitQuotaUsageReports, rlqs_pb::RateLimitQuotaResponse>>
        rw;
    std::mutex write_mu;
    bool dead = false;  // guarded by write_mu
    std::thread reader;
  };

  static std::string key(const RlqsId& id) {
    std::string k;
    for (const auto& [a, b] : id) {
      k += std::to_string(a.size()) + ":" + a + std::to_string(b.size()) + ":" +
           b;
    }
    return k;
  }
  static std::string key(const rlqs_pb::BucketId& id) {
    RlqsId map;
    for (const auto& [k, v] : id.bucket()) map.emplace(k, v);
    return key(map);
  }

  static void refill(TokenBucket& tb, int64_t now) {
    if (now > tb.at_ms) {
      tb.tokens = std::min<double>(
          tb.proto.max_tokens(), tb.tokens + (now - tb.at_ms) * tb.rate_per_ms);
      tb.at_ms = now;
    }
  }
  // Envoy's expiry timer, applied lazily.
  static void expire(Bucket& b, int64_t now) {
    if (b.kind != Kind::kNone && now >= b.expires_ms) {
      b.kind = Kind::kNone;
      drop_token_bucket(b, b.expires_ms);
    }
  }
  // Ends `b`'s token bucket (if any) at `at_ms`, in its history.
  static void drop_token_bucket(Bucket& b, int64_t at_ms) {
    if (!b.tb.has_value()) return;
    b.held.push_back({b.tb->installed_ms, std::min(at_ms, b.expires_ms),
                      b.tb->proto.max_tokens()});
    b.tb.reset();
  }
  bool decide(Bucket& b, int64_t now) {
    expire(b, now);
    switch (b.kind) {
      case Kind::kNone:
        return !options_.deny_without_assignment;
      case Kind::kAllowAll:
        return true;
      case Kind::kDenyAll:
        return false;
      case Kind::kTokenBucket:
        refill(*b.tb, now);
        if (b.tb->tokens < 1) return false;
        b.tb->tokens -= 1;
        return true;
    }
    return false;
  }

  void apply(const rlqs_pb::RateLimitQuotaResponse& resp) {
    std::lock_guard lock(mu_);
    const int64_t now = steady_ms();
    for (const auto& a : resp.bucket_action()) {
      auto it = buckets_.find(key(a.bucket_id()));
      if (it == buckets_.end()) continue;  // never reported: ignored
      ++actions_;
      if (a.has_abandon_action()) {
        drop_token_bucket(it->second, now);
        std::vector<Held>& kept = abandoned_held_[it->first];
        kept.insert(kept.end(), it->second.held.begin(), it->second.held.end());
        buckets_.erase(it);
        continue;
      }
      if (!a.has_quota_assignment_action()) continue;
      Bucket& b = it->second;
      expire(b, now);
      const auto& qa = a.quota_assignment_action();
      const auto& strategy = qa.rate_limit_strategy();
      if (strategy.has_token_bucket()) {
        const auto& tb = strategy.token_bucket();
        const bool same =
            b.tb.has_value() && b.tb->proto.max_tokens() == tb.max_tokens() &&
            b.tb->proto.tokens_per_fill().value() ==
                tb.tokens_per_fill().value() &&
            b.tb->proto.fill_interval().nanos() == tb.fill_interval().nanos();
        if (!same) {
          TokenBucket next;
          next.proto = tb;
          next.installed_ms = now;
          const int64_t fill_s = tb.fill_interval().seconds();
          next.rate_per_ms =
              fill_s > 0 ? tb.tokens_per_fill().value() / (fill_s * 1000.0)
                         : 1e18;
          next.at_ms = now;
          if (b.tb.has_value()) {
            refill(*b.tb, now);
            next.tokens = b.tb->proto.max_tokens() == 0
                              ? 0
                              : tb.max_tokens() *
                                    (b.tb->tokens / b.tb->proto.max_tokens());
          } else {
            next.tokens = tb.max_tokens();
          }
          drop_token_bucket(b, now);
          b.tb = next;
        }
        b.kind = Kind::kTokenBucket;
      } else if (strategy.has_blanket_rule()) {
        drop_token_bucket(b, now);
        b.kind = strategy.blanket_rule() ==
                         ::envoy::type::v3::RateLimitStrategy::ALLOW_ALL
                     ? Kind::kAllowAll
                     : Kind::kDenyAll;
      } else {
        continue;  // requests_per_time_unit or none: skipped
      }
      b.expires_ms = now + qa.assignment_time_to_live().seconds() * 1000;
    }
    cv_.notify_all();
  }

  // Adds `b`'s usage since its last report and starts the next period.
  static void add_usage(rlqs_pb::RateLimitQuotaUsageReports& r, Bucket& b,
                        int64_t now) {
    auto* u = r.add_bucket_quota_usages();
    *u->mutable_bucket_id() = b.id;
    u->mutable_time_elapsed()->set_seconds((now - b.last_report_ms) / 1000);
    u->set_num_requests_allowed(static_cast<uint64_t>(b.allowed));
    u->set_num_requests_denied(static_cast<uint64_t>(b.denied));
    b.allowed = b.denied = 0;
    b.last_report_ms = now;
  }

  // Sends `r` on the stream, opening one if there is none; a failed write
  // loses the report (as Envoy's does).
  void send(const rlqs_pb::RateLimitQuotaUsageReports& r) {
    std::shared_ptr<Stream> s;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      if (current_ == nullptr) {
        current_ = std::make_shared<Stream>();
        current_->rw = stub_->StreamRateLimitQuotas(&current_->ctx);
        all_streams_.push_back(current_);
        Stream* raw = current_.get();
        current_->reader = std::thread([this, raw] { read_loop(*raw); });
      }
      s = current_;
    }
    std::lock_guard write(s->write_mu);
    if (!s->dead) s->rw->Write(r);
  }

  void read_loop(Stream& s) {
    rlqs_pb::RateLimitQuotaResponse resp;
    while (s.rw->Read(&resp)) apply(resp);
    grpc::Status status;
    {
      std::lock_guard write(s.write_mu);
      s.dead = true;
      status = s.rw->Finish();
    }
    std::lock_guard lock(mu_);
    if (current_.get() == &s) current_ = nullptr;
    last_status_ = status;
    cv_.notify_all();
  }

  void timer_loop() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, std::chrono::milliseconds(options_.report_period_ms),
                   [&] { return stopping_; });
      if (stopping_ || buckets_.empty()) continue;
      rlqs_pb::RateLimitQuotaUsageReports r;
      r.set_domain(options_.domain);
      const int64_t now = steady_ms();
      for (auto& [k, b] : buckets_) add_usage(r, b, now);
      lock.unlock();
      send(r);
      lock.lock();
    }
  }

  const RlqsEmulatorOptions options_;
  std::mutex mu_;
  std::unique_ptr<rlqs_pb::RateLimitQuotaService::Stub> stub_;  // mu_
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, Bucket> buckets_;
  std::shared_ptr<Stream> current_;
  std::vector<std::shared_ptr<Stream>> all_streams_;
  std::optional<grpc::Status> last_status_;
  // What abandoned buckets held, by bucket key (for `held`).
  std::map<std::string, std::vector<Held>> abandoned_held_;
  int64_t actions_ = 0;
  std::thread timer_;
};

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SERVER_RLQS_EMULATOR_H_
