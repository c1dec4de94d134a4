// RedisCoordinator: hiredis connections, each served by one I/O thread that
// pipelines everything queued on it (see the header and docs/redis.md).

#include "throttlekit/redis/redis_coordinator.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "throttlekit_redis_scripts.h"

namespace throttlekit {
namespace {

// The scripts, in `AnyStrategy` order, then the lease scripts.
enum Script : int {
  kGcraScript = 0,
  kTokenBucketScript,
  kFixedWindowScript,
  kSlidingWindowScript,
  kSlidingLogScript,
  kQuotaScript,
  kTokenBudgetScript,
  kLeaseScript,
  kGiveBackScript,
  kScriptCount,
};
static_assert(std::variant_size_v<AnyStrategy> == kLeaseScript);

const std::array<std::string, kScriptCount>& script_texts() {
  using namespace redis_scripts;  // NOLINT: generated constants
  static const auto* texts = [] {
    auto* t = new std::array<std::string, kScriptCount>;
    const std::string_view bodies[kScriptCount] = {
        kGcraLua,          kTokenBucketLua, kFixedWindowLua,
        kSlidingWindowLua, kSlidingLogLua,  kQuotaLua,
        kTokenBudgetLua,   kLeaseLua,       kGiveBackLua};
    for (int i = 0; i < kScriptCount; ++i) {
      (*t)[i] = absl::StrCat(
          absl::string_view(kPreludeLua.data(), kPreludeLua.size()),
          absl::string_view(bodies[i].data(), bodies[i].size()));
    }
    return t;
  }();
  return *texts;
}

std::string fmt_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string fmt_int(int64_t v) { return std::to_string(v); }

timeval to_timeval(absl::Duration d) { return absl::ToTimeval(d); }

// One request: a script call (`script >= 0`: argv = key, args...) or a
// plain command (`script < 0`: argv is the command). The caller waits on
// `done`; the I/O thread fills `reply` or `status` before notifying.
struct Request {
  int script = -1;
  std::vector<std::string> argv;
  absl::Time deadline;
  std::atomic<bool> abandoned{false};
  absl::Notification done;
  absl::Status status;
  std::vector<int64_t> reply;  // integers (strings parsed as integers)
};

}  // namespace

class RedisCoordinator::Impl {
 public:
  explicit Impl(const RedisCoordinatorOptions& options) : options_(options) {
    for (int i = 0; i < options.connections; ++i) {
      connections_.push_back(std::make_unique<Connection>(this));
    }
    for (auto& c : connections_) c->start();
  }

  ~Impl() {
    for (auto& c : connections_) c->stop();
  }

  // Queues `r` on a connection and waits for its reply or its deadline.
  absl::Status call(const std::shared_ptr<Request>& r) {
    r->deadline = absl::Now() + options_.command_timeout;
    const size_t i =
        next_.fetch_add(1, std::memory_order_relaxed) % connections_.size();
    if (!connections_[i]->enqueue(r)) {
      return absl::UnavailableError("redis: coordinator is shutting down");
    }
    if (!r->done.WaitForNotificationWithDeadline(r->deadline)) {
      r->abandoned.store(true, std::memory_order_relaxed);
      timeouts_.fetch_add(1, std::memory_order_relaxed);
      return absl::DeadlineExceededError(
          absl::StrCat("redis: no reply from ", options_.host, ":",
                       options_.port, " within the command timeout (",
                       absl::FormatDuration(options_.command_timeout), ")"));
    }
    return r->status;
  }

  RedisCoordinator::Stats stats() const {
    RedisCoordinator::Stats s;
    s.requests = requests_.load(std::memory_order_relaxed);
    s.batches = batches_.load(std::memory_order_relaxed);
    s.connects = connects_.load(std::memory_order_relaxed);
    s.noscript = noscript_.load(std::memory_order_relaxed);
    s.timeouts = timeouts_.load(std::memory_order_relaxed);
    s.failures = failures_.load(std::memory_order_relaxed);
    return s;
  }

  const RedisCoordinatorOptions& options() const { return options_; }

 private:
  class Connection {
   public:
    explicit Connection(Impl* owner) : owner_(owner) {}
    ~Connection() { drop(); }

    void start() {
      thread_ = std::thread([this] { run(); });
    }

    void stop() {
      {
        absl::MutexLock lock(&mu_);
        stopping_ = true;
      }
      if (thread_.joinable()) thread_.join();
      absl::MutexLock lock(&mu_);
      for (auto& r : queue_) {
        finish(*r, absl::UnavailableError("redis: coordinator destroyed"));
      }
      queue_.clear();
    }

    bool enqueue(std::shared_ptr<Request> r) {
      absl::MutexLock lock(&mu_);
      if (stopping_) return false;
      queue_.push_back(std::move(r));
      return true;
    }

   private:
    void run() {
      std::vector<std::shared_ptr<Request>> batch;
      for (;;) {
        batch.clear();
        {
          absl::MutexLock lock(&mu_);
          mu_.Await(absl::Condition(
              +[](Connection* c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                return c->stopping_ || !c->queue_.empty();
              },
              this));
          if (stopping_) return;
          const size_t n =
              std::min(queue_.size(),
                       static_cast<size_t>(owner_->options_.max_pipeline));
          for (size_t i = 0; i < n; ++i) {
            batch.push_back(std::move(queue_.front()));
            queue_.pop_front();
          }
        }
        serve(batch);
      }
    }

    // Sends the live requests of `batch` in one pipelined write and reads
    // their replies in order.
    void serve(std::vector<std::shared_ptr<Request>>& batch) {
      std::vector<std::shared_ptr<Request>> live;
      const absl::Time now = absl::Now();
      for (auto& r : batch) {
        if (r->abandoned.load(std::memory_order_relaxed) || r->deadline < now) {
          continue;  // its caller has given up: do not spend it
        }
        live.push_back(std::move(r));
      }
      if (live.empty()) return;
      if (ctx_ == nullptr) {
        if (absl::Status s = connect(); !s.ok()) {
          for (auto& r : live) fail(*r, s);
          return;
        }
      }
      for (auto& r : live) append(*r, /*evalsha=*/true);
      owner_->batches_.fetch_add(1, std::memory_order_relaxed);
      std::vector<std::shared_ptr<Request>> retry;
      for (size_t i = 0; i < live.size(); ++i) {
        redisReply* reply = nullptr;
        if (redisGetReply(ctx_, reinterpret_cast<void**>(&reply)) != REDIS_OK) {
          const absl::Status s = io_error();
          for (size_t j = i; j < live.size(); ++j) fail(*live[j], s);
          drop();
          return;
        }
        if (reply->type == REDIS_REPLY_ERROR &&
            std::strncmp(reply->str, "NOSCRIPT", 8) == 0) {
          owner_->noscript_.fetch_add(1, std::memory_order_relaxed);
          retry.push_back(live[i]);
        } else {
          complete(*live[i], reply);
        }
        freeReplyObject(reply);
      }
      if (retry.empty()) return;
      for (auto& r : retry) append(*r, /*evalsha=*/false);
      for (size_t i = 0; i < retry.size(); ++i) {
        redisReply* reply = nullptr;
        if (redisGetReply(ctx_, reinterpret_cast<void**>(&reply)) != REDIS_OK) {
          const absl::Status s = io_error();
          for (size_t j = i; j < retry.size(); ++j) fail(*retry[j], s);
          drop();
          return;
        }
        complete(*retry[i], reply);
        freeReplyObject(reply);
      }
    }

    void append(const Request& r, bool evalsha) {
      std::vector<const char*> argv;
      std::vector<size_t> lens;
      argv.reserve(r.argv.size() + 3);
      lens.reserve(r.argv.size() + 3);
      const auto push = [&](const std::string& s) {
        argv.push_back(s.data());
        lens.push_back(s.size());
      };
      static const std::string kEvalSha = "EVALSHA";
      static const std::string kEval = "EVAL";
      static const std::string kOne = "1";
      if (r.script >= 0) {
        const bool use_sha = evalsha && !shas_[r.script].empty();
        push(use_sha ? kEvalSha : kEval);
        push(use_sha ? shas_[r.script] : script_texts()[r.script]);
        push(kOne);
      }
      for (const std::string& a : r.argv) push(a);
      redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(),
                             lens.data());
    }

    // Connects, authenticates, selects the database and loads the scripts.
    absl::Status connect() {
      const RedisCoordinatorOptions& o = owner_->options_;
      ctx_ = redisConnectWithTimeout(o.host.c_str(), o.port,
                                     to_timeval(o.connect_timeout));
      if (ctx_ == nullptr || ctx_->err != 0) {
        const std::string why =
            ctx_ == nullptr ? "out of memory" : std::string(ctx_->errstr);
        drop();
        return absl::UnavailableError(absl::StrCat(
            "redis: cannot connect to ", o.host, ":", o.port, ": ", why));
      }
      redisSetTimeout(ctx_, to_timeval(o.connect_timeout));
      if (!o.password.empty()) {
        std::vector<std::string> auth = {"AUTH"};
        if (!o.username.empty()) auth.push_back(o.username);
        auth.push_back(o.password);
        if (absl::Status s = simple(auth, nullptr); !s.ok()) return s;
      }
      if (o.database != 0) {
        if (absl::Status s = simple({"SELECT", fmt_int(o.database)}, nullptr);
            !s.ok()) {
          return s;
        }
      }
      for (int i = 0; i < kScriptCount; ++i) {
        std::string sha;
        if (absl::Status s =
                simple({"SCRIPT", "LOAD", script_texts()[i]}, &sha);
            !s.ok()) {
          return s;
        }
        shas_[i] = std::move(sha);
      }
      redisSetTimeout(ctx_, to_timeval(o.command_timeout));
      owner_->connects_.fetch_add(1, std::memory_order_relaxed);
      return absl::OkStatus();
    }

    // Runs one command during connect; drops the connection on failure.
    absl::Status simple(const std::vector<std::string>& cmd, std::string* out) {
      std::vector<const char*> argv;
      std::vector<size_t> lens;
      for (const std::string& s : cmd) {
        argv.push_back(s.data());
        lens.push_back(s.size());
      }
      auto* reply = static_cast<redisReply*>(redisCommandArgv(
          ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
      if (reply == nullptr) {
        absl::Status s = io_error();
        drop();
        return s;
      }
      absl::Status s = absl::OkStatus();
      if (reply->type == REDIS_REPLY_ERROR) {
        s = absl::UnavailableError(
            absl::StrCat("redis: ", cmd[0], " failed: ", reply->str));
      } else if (out != nullptr && reply->type == REDIS_REPLY_STRING) {
        out->assign(reply->str, reply->len);
      }
      freeReplyObject(reply);
      if (!s.ok()) drop();
      return s;
    }

    absl::Status io_error() const {
      const int err = errno;
      const RedisCoordinatorOptions& o = owner_->options_;
      if (ctx_ != nullptr && ctx_->err == REDIS_ERR_IO &&
          (err == EAGAIN || err == EWOULDBLOCK ||
           std::strstr(ctx_->errstr, "temporarily unavailable") != nullptr)) {
        return absl::DeadlineExceededError(absl::StrCat(
            "redis: ", o.host, ":", o.port, " did not answer in time"));
      }
      return absl::UnavailableError(
          absl::StrCat("redis: connection to ", o.host, ":", o.port,
                       " failed: ", ctx_ != nullptr ? ctx_->errstr : "?"));
    }

    void drop() {
      if (ctx_ != nullptr) redisFree(ctx_);
      ctx_ = nullptr;
    }

    static void flatten(const redisReply* reply, std::vector<int64_t>& out) {
      switch (reply->type) {
        case REDIS_REPLY_INTEGER:
          out.push_back(reply->integer);
          break;
        case REDIS_REPLY_STRING:
        case REDIS_REPLY_STATUS:
          out.push_back(std::strtoll(reply->str, nullptr, 10));
          break;
        case REDIS_REPLY_ARRAY:
          for (size_t i = 0; i < reply->elements; ++i) {
            flatten(reply->element[i], out);
          }
          break;
        default:
          break;  // nil
      }
    }

    void complete(Request& r, const redisReply* reply) {
      owner_->requests_.fetch_add(1, std::memory_order_relaxed);
      if (reply->type == REDIS_REPLY_ERROR) {
        const std::string msg(reply->str, reply->len);
        if (msg.find("WRONGTYPE") != std::string::npos) {
          finish(r, absl::FailedPreconditionError(absl::StrCat(
                        "redis: key holds another strategy's state: ", msg)));
        } else {
          finish(r, absl::UnavailableError(absl::StrCat("redis: ", msg)));
        }
        return;
      }
      flatten(reply, r.reply);
      finish(r, absl::OkStatus());
    }

    void fail(Request& r, const absl::Status& s) {
      owner_->failures_.fetch_add(1, std::memory_order_relaxed);
      finish(r, s);
    }

    static void finish(Request& r, absl::Status s) {
      r.status = std::move(s);
      r.done.Notify();
    }

    Impl* const owner_;
    std::thread thread_;
    absl::Mutex mu_;
    std::deque<std::shared_ptr<Request>> queue_ ABSL_GUARDED_BY(mu_);
    bool stopping_ ABSL_GUARDED_BY(mu_) = false;
    // Owned by the I/O thread.
    redisContext* ctx_ = nullptr;
    std::array<std::string, kScriptCount> shas_;
  };

  const RedisCoordinatorOptions options_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::atomic<size_t> next_{0};
  std::atomic<int64_t> requests_{0}, batches_{0}, connects_{0}, noscript_{0},
      timeouts_{0}, failures_{0};
};

absl::StatusOr<std::unique_ptr<RedisCoordinator>> RedisCoordinator::create(
    const RedisCoordinatorOptions& o) {
  const auto bad = [](absl::string_view field, absl::string_view bound,
                      const auto& got) {
    return absl::InvalidArgumentError(absl::StrCat(
        "redis_coordinator.", field, " must be ", bound, "; got ", got));
  };
  if (o.host.empty()) return bad("host", "non-empty", "\"\"");
  if (o.port < 1 || o.port > 65535) return bad("port", "in [1, 65535]", o.port);
  if (o.database < 0 || o.database > 1'000'000) {
    return bad("database", "in [0, 1000000]", o.database);
  }
  if (o.connections < 1 || o.connections > 64) {
    return bad("connections", "in [1, 64]", o.connections);
  }
  if (o.max_pipeline < 1 || o.max_pipeline > 65536) {
    return bad("max_pipeline", "in [1, 65536]", o.max_pipeline);
  }
  if (o.connect_timeout <= absl::ZeroDuration() ||
      o.connect_timeout > absl::Minutes(10)) {
    return bad("connect_timeout", "in (0, 10 min]",
               absl::FormatDuration(o.connect_timeout));
  }
  if (o.command_timeout <= absl::ZeroDuration() ||
      o.command_timeout > absl::Minutes(10)) {
    return bad("command_timeout", "in (0, 10 min]",
               absl::FormatDuration(o.command_timeout));
  }
  if (o.ttl_slack_ms < 0 || o.ttl_slack_ms > kMaxSafeInteger) {
    return bad("ttl_slack_ms", "in [0, 2^53-1]", o.ttl_slack_ms);
  }
  if (!o.username.empty() && o.password.empty()) {
    return absl::InvalidArgumentError(
        "redis_coordinator.username needs a password");
  }
  return std::unique_ptr<RedisCoordinator>(
      new RedisCoordinator(std::make_unique<Impl>(o)));
}

RedisCoordinator::RedisCoordinator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RedisCoordinator::~RedisCoordinator() = default;

RedisCoordinator::Stats RedisCoordinator::stats() const {
  return impl_->stats();
}

namespace {

// The strategy's options as script arguments (ARGV[5..]).
void append_options(const AnyStrategy& strategy,
                    std::vector<std::string>& argv) {
  std::visit(
      [&](const auto& s) {
        using S = std::decay_t<decltype(s)>;
        const auto& o = s.options();
        if constexpr (std::is_same_v<S, Gcra>) {
          argv.insert(argv.end(), {fmt_int(o.limit), fmt_int(o.period_ms),
                                   fmt_int(o.burst)});
        } else if constexpr (std::is_same_v<S, TokenBucket>) {
          argv.insert(argv.end(),
                      {fmt_int(o.capacity), fmt_double(o.refill_per_sec)});
        } else if constexpr (std::is_same_v<S, FixedWindow> ||
                             std::is_same_v<S, SlidingLog>) {
          argv.insert(argv.end(), {fmt_int(o.limit), fmt_int(o.window_ms)});
        } else if constexpr (std::is_same_v<S, SlidingWindow>) {
          argv.insert(argv.end(), {fmt_int(o.limit), fmt_int(o.window_ms),
                                   fmt_int(o.buckets)});
        } else if constexpr (std::is_same_v<S, Quota>) {
          argv.insert(argv.end(),
                      {fmt_int(o.limit), fmt_int(static_cast<int>(o.period)),
                       fmt_int(o.week_starts_on), fmt_int(o.offset_minutes),
                       fmt_int(o.anchor_ms), fmt_int(o.period_ms)});
        } else {
          static_assert(std::is_same_v<S, TokenBudget>);
          argv.insert(argv.end(), {fmt_int(o.budget), fmt_int(o.window_ms)});
        }
      },
      strategy);
}

absl::StatusOr<Decision> to_decision(const Request& r) {
  if (r.reply.size() != 5) {
    return absl::InternalError(
        absl::StrCat("redis: a check script replied with ", r.reply.size(),
                     " values; expected 5"));
  }
  return Decision{r.reply[0] != 0, r.reply[1], r.reply[2], r.reply[3],
                  r.reply[4]};
}

}  // namespace

absl::StatusOr<Decision> RedisCoordinator::do_check(const AnyStrategy& strategy,
                                                    std::string_view key,
                                                    int64_t now_ms,
                                                    double cost) {
  auto r = std::make_shared<Request>();
  r->script = static_cast<int>(strategy.index());
  r->argv.reserve(12);
  r->argv.emplace_back(key);
  r->argv.insert(r->argv.end(), {fmt_int(now_ms), fmt_double(cost), "c",
                                 fmt_int(impl_->options().ttl_slack_ms)});
  append_options(strategy, r->argv);
  if (absl::Status s = impl_->call(r); !s.ok()) return s;
  return to_decision(*r);
}

absl::StatusOr<Decision> RedisCoordinator::do_peek(const AnyStrategy& strategy,
                                                   std::string_view key,
                                                   int64_t now_ms) {
  auto r = std::make_shared<Request>();
  r->script = static_cast<int>(strategy.index());
  r->argv.reserve(12);
  r->argv.emplace_back(key);
  r->argv.insert(r->argv.end(), {fmt_int(now_ms), "1", "p",
                                 fmt_int(impl_->options().ttl_slack_ms)});
  append_options(strategy, r->argv);
  if (absl::Status s = impl_->call(r); !s.ok()) return s;
  return to_decision(*r);
}

absl::Status RedisCoordinator::do_reset(const AnyStrategy&,
                                        std::string_view key) {
  auto r = std::make_shared<Request>();
  r->argv = {"DEL", std::string(key)};
  return impl_->call(r);
}

absl::StatusOr<LeaseGrant> RedisCoordinator::do_lease(const LeaseBudget& budget,
                                                      std::string_view key,
                                                      int64_t want) {
  auto r = std::make_shared<Request>();
  r->script = kLeaseScript;
  r->argv = {std::string(key), fmt_int(want), fmt_int(budget.limit()),
             fmt_int(budget.window_ms()),
             fmt_int(impl_->options().ttl_slack_ms)};
  if (absl::Status s = impl_->call(r); !s.ok()) return s;
  if (r->reply.size() != 5) {
    return absl::InternalError("redis: the lease script replied badly");
  }
  return LeaseGrant{r->reply[0], r->reply[1], r->reply[2], r->reply[3],
                    r->reply[4]};
}

absl::StatusOr<int64_t> RedisCoordinator::do_give_back(
    const LeaseBudget& budget, std::string_view key, int64_t window_start_ms,
    int64_t credits, std::string_view token) {
  auto r = std::make_shared<Request>();
  r->script = kGiveBackScript;
  r->argv = {std::string(key), fmt_int(window_start_ms), fmt_int(credits),
             std::string(token), fmt_int(budget.window_ms())};
  if (absl::Status s = impl_->call(r); !s.ok()) return s;
  if (r->reply.size() != 1) {
    return absl::InternalError("redis: the give-back script replied badly");
  }
  return r->reply[0];
}

absl::StatusOr<int64_t> RedisCoordinator::do_now_ms() {
  auto r = std::make_shared<Request>();
  r->argv = {"TIME"};
  if (absl::Status s = impl_->call(r); !s.ok()) return s;
  if (r->reply.size() != 2) {
    return absl::InternalError("redis: TIME replied badly");
  }
  return r->reply[0] * 1000 + r->reply[1] / 1000;
}

}  // namespace throttlekit
