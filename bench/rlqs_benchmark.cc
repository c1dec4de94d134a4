// The quota door processing reports (docs/rlqs.md, "Benchmark"; issue 50:
// bucket reports handled per second per core, with assignments computed, on
// 1 and 32 streams).
//
// Every report here changes its buckets' demand (it alternates between 40
// and 60 requests a second), so each bucket reported gets an assignment
// computed by its budget's `assign` AND sent: the reporting stream receives
// exactly one bucket action per usage (the limits are above the total
// demand, so no other client's assignment moves). Two budget shapes:
// `shared`, one budget every bucket of every stream spends (a `shared: true`
// rule: 32 streams of 10 buckets are 320 clients of one water filling), and
// `own`, a per-id rule whose every bucket id (each stream's own) has a budget
// of its own.
//
// - In process (`BM_QuotaDoor_Report`): QuotaDoor::report of a message of k
//   usages, the streams taking turns on one thread (so the time is per
//   core), through writers that complete each write at once. Beside it in
//   the same run: the allocation core alone (`BM_QuotaBudget_ReportAssign`:
//   QuotaBudget::report of the same usages and one assign, no door), and the
//   door's path without a budget (`BM_QuotaDoor_ReportBlanket`: buckets of an
//   `allow: true` rule, validated, matched and counted, nothing sent).
// - Over gRPC on loopback (`BM_RlqsStream_Reports`): a throttlekit-server
//   in process, N streams (one channel and connection each, as N Envoys),
//   each keeping at most `window` reports unanswered. A report counts as
//   handled when its stream has received the k bucket actions it produced,
//   so every one counted was matched, assigned and answered by the door. The
//   floor in the same run (`BM_RlqsEcho_Reports`): the same reactor and
//   outbox (quota_stream.h) on a gRPC server of its own, answering each
//   report with one action per usage without the door. `cpu_per_s` is the
//   process's CPU seconds per second (client and server together, so
//   `per_cpu_s`, bucket reports per CPU second, understates the server's
//   rate per core).
//
//     cmake --build --preset release --target rlqs_benchmark
//     build/release/bench/rlqs_benchmark

#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "config.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "policies.h"
#include "quota_budget.h"
#include "quota_door.h"
#include "quota_stream.h"
#include "server.h"

namespace {

namespace rlqs_pb = ::envoy::service::rate_limit_quota::v3;
using Action = rlqs_pb::RateLimitQuotaResponse::BucketAction;
using throttlekit::server::QuotaBudget;
using throttlekit::server::QuotaBudgetOptions;
using throttlekit::server::QuotaDoor;
using throttlekit::server::QuotaStream;
using throttlekit::server::QuotaStreamWriter;
using throttlekit::server::Server;

// Budgets far above the load: shared among every stream (1 000 000 a
// second against at most 320 clients of 75), one per bucket id (1000
// against 75), and buckets with no budget at all. One domain per run over
// gRPC (`bench-<run>`), so that no run meets the clients an earlier one
// left counting in a budget (a closed stream's records count for ttl +
// slack, 7 s).
constexpr int kDomains = 64;

std::string bench_yaml() {
  std::string yaml = "version: 1\nrlqs:\n  domains:\n";
  for (int d = 0; d < kDomains; ++d) {
    absl::StrAppend(&yaml, "    - domain: bench-", d, R"(
      buckets:
        - match: {name: shared}
          limit: {requests: 1000000, per: 1s}
          shared: true
        - match: {name: own}
          limit: {requests: 1000, per: 1s}
        - match: {name: open}
          allow: true
)");
  }
  return yaml;
}

enum Shape : int64_t { kShared = 0, kOwn = 1, kOpen = 2 };

const char* shape_name(int64_t shape) {
  return shape == kShared ? "shared" : shape == kOwn ? "own" : "open";
}

// Stream `s`'s two messages (demand 40 and 60 requests over a second) of
// `k` usages under `shape`, in domain `bench-<domain>`.
std::vector<rlqs_pb::RateLimitQuotaUsageReports> stream_messages(int64_t shape,
                                                                 int s, int k,
                                                                 int domain) {
  std::vector<rlqs_pb::RateLimitQuotaUsageReports> out(2);
  for (int m = 0; m < 2; ++m) {
    out[m].set_domain(absl::StrCat("bench-", domain));
    for (int b = 0; b < k; ++b) {
      auto* u = out[m].add_bucket_quota_usages();
      auto& id = *u->mutable_bucket_id()->mutable_bucket();
      id["name"] = shape_name(shape);
      id["stream"] = absl::StrCat("s", s);
      id["bucket"] = absl::StrCat("b", b);
      u->mutable_time_elapsed()->set_seconds(1);
      u->set_num_requests_allowed(m == 0 ? 40 : 60);
    }
  }
  return out;
}

throttlekit::server::ServerConfig bench_config() {
  auto config = throttlekit::server::parse_config(bench_yaml(), "bench.yaml");
  if (!config.ok()) std::abort();
  return *std::move(config);
}

// A stream's writer whose writes complete at once.
class InstantWriter final : public QuotaStreamWriter {
 public:
  void start_write(const rlqs_pb::RateLimitQuotaResponse* r) override {
    actions.fetch_add(r->bucket_action_size(), std::memory_order_relaxed);
    stream->on_write_done(true);
  }
  void finish(const grpc::Status&) override {}

  QuotaStream* stream = nullptr;
  std::atomic<int64_t> actions{0};  // written by the pusher too
};

// A door in process on the real clock and its streams, each with an
// InstantWriter; closes them when it goes.
struct LocalDoor {
  LocalDoor() : door(bench_config().rlqs, throttlekit::server::ServerClock{}) {}
  ~LocalDoor() {
    for (const auto& s : opened) {
      s->detach();
      door.close(*s);
    }
  }
  QuotaStream& open() {
    writers.push_back(std::make_unique<InstantWriter>());
    opened.push_back(door.open(writers.back().get()));
    writers.back()->stream = opened.back().get();
    opened.back()->start();
    return *opened.back();
  }
  // The actions written to every stream so far.
  int64_t actions() const {
    int64_t sum = 0;
    for (const auto& w : writers) sum += w->actions.load();
    return sum;
  }

  std::vector<std::unique_ptr<InstantWriter>> writers;  // outlive the door
  QuotaDoor door;
  std::vector<std::shared_ptr<QuotaStream>> opened;
};

// QuotaDoor::report of k usages (arg 1) on S streams (arg 0) taking turns,
// shape arg 2; one iteration is one message.
void BM_QuotaDoor_Report(benchmark::State& state) {
  const int streams = static_cast<int>(state.range(0));
  const int k = static_cast<int>(state.range(1));
  const int64_t shape = state.range(2);
  LocalDoor local;
  std::vector<std::vector<rlqs_pb::RateLimitQuotaUsageReports>> messages;
  for (int s = 0; s < streams; ++s) {
    local.open();
    messages.push_back(stream_messages(shape, s, k, 0));
  }
  int64_t n = 0;
  for (auto _ : state) {
    const auto s = static_cast<size_t>(n % streams);
    const auto m = static_cast<size_t>((n / streams) % 2);
    if (!local.door.report(*local.opened[s], messages[s][m]).ok()) {
      state.SkipWithError("report refused");
      break;
    }
    ++n;
  }
  state.SetItemsProcessed(state.iterations() * k);
  state.counters["actions_per_usage"] =
      static_cast<double>(local.actions()) /
      static_cast<double>(std::max<int64_t>(1, state.iterations() * k));
  state.counters["budgets"] = static_cast<double>(local.door.budgets());
}

// The allocation core alone: the same usages' QuotaBudget::report and one
// assign per message, on the budgets the door would hold (shape arg 2), no
// door, no protobuf, no stream.
void BM_QuotaBudget_ReportAssign(benchmark::State& state) {
  const int streams = static_cast<int>(state.range(0));
  const int k = static_cast<int>(state.range(1));
  const bool shared = state.range(2) == kShared;
  const QuotaBudgetOptions options{
      .fill_interval_s = 1, .ttl_s = 6, .delivery_slack_ms = 1000};
  // Shared: one budget; own: one per (stream, bucket).
  std::vector<QuotaBudget> budgets;
  for (int i = 0; i < (shared ? 1 : streams * k); ++i) {
    budgets.push_back(*QuotaBudget::create(options));
  }
  std::vector<std::vector<std::string>> clients(static_cast<size_t>(streams));
  for (int s = 0; s < streams; ++s) {
    for (int b = 0; b < k; ++b) {
      clients[s].push_back(absl::StrCat(s + 1, "/bucket-", b));
    }
  }
  const int64_t share = shared ? 1'000'000 : 1000;
  int64_t n = 0;
  int64_t sent = 0;
  for (auto _ : state) {
    const auto s = static_cast<size_t>(n % streams);
    const int64_t allowed = (n / streams) % 2 == 0 ? 40 : 60;
    const int64_t now = throttlekit::SystemClock{}.now_ms();
    for (int b = 0; b < k; ++b) {
      QuotaBudget& budget = budgets[shared ? 0 : s * k + b];
      budget.report(clients[s][b], allowed, 0, 1000, now).IgnoreError();
      if (!shared)
        sent += static_cast<int64_t>(budget.assign(share, now)->size());
    }
    if (shared)
      sent += static_cast<int64_t>(budgets[0].assign(share, now)->size());
    ++n;
  }
  state.SetItemsProcessed(state.iterations() * k);
  state.counters["actions_per_usage"] =
      static_cast<double>(sent) /
      static_cast<double>(std::max<int64_t>(1, state.iterations() * k));
}

// The door's path without a budget: k buckets of an `allow: true` rule
// (validated, matched, counted; their blanket already recorded, so nothing
// is sent), on S streams taking turns.
void BM_QuotaDoor_ReportBlanket(benchmark::State& state) {
  const int streams = static_cast<int>(state.range(0));
  const int k = static_cast<int>(state.range(1));
  LocalDoor local;
  std::vector<rlqs_pb::RateLimitQuotaUsageReports> messages;
  for (int s = 0; s < streams; ++s) {
    local.open();
    messages.push_back(stream_messages(kOpen, s, k, 0)[0]);
  }
  int64_t n = 0;
  for (auto _ : state) {
    const auto s = static_cast<size_t>(n % streams);
    if (!local.door.report(*local.opened[s], messages[s]).ok()) {
      state.SkipWithError("report refused");
      break;
    }
    ++n;
  }
  state.SetItemsProcessed(state.iterations() * k);
}

double cpu_seconds();

// The pusher alone: B budgets of one client each (arg 1 = 0: per-id
// buckets of one stream) or B streams of one blanket bucket each (arg 1 =
// 1), reported once over 3 s so that their refreshes (every ttl/2 = 3 s)
// fall due spread evenly, one every 3000/B ms. Measured over the next 3 s,
// with no report: the process's CPU seconds per second (the pusher's, the
// only thread at work) and the refreshes it pushed per second. A pusher
// that scans every budget or stream at each look pays O(B) per wake.
void BM_QuotaDoor_PusherRefreshes(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool blankets = state.range(1) == 1;
  for (auto _ : state) {
    LocalDoor local;
    if (!blankets) local.open();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      std::this_thread::sleep_until(
          start + std::chrono::microseconds(int64_t{3'000'000} * i / n));
      QuotaStream& s = blankets ? local.open() : *local.opened.back();
      const auto m = stream_messages(blankets ? kOpen : kOwn, i, 1, 0);
      if (!local.door.report(s, m[0]).ok()) {
        state.SkipWithError("report refused");
        return;
      }
    }
    const int64_t a0 = local.actions();
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(3));
    const int64_t a1 = local.actions();
    const double c1 = cpu_seconds();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    state.SetIterationTime(wall);
    state.counters["pusher_cpu_per_s"] = (c1 - c0) / wall;
    state.counters["refreshes_per_s"] = static_cast<double>(a1 - a0) / wall;
  }
}

// ---- Over gRPC ----

// The floor: RateLimitQuotaService answering each report with one action
// per usage (its bucket id, a fixed token bucket), through the door's own
// reactor structure and outbox (rlqs_service.h, quota_stream.h), no door.
class EchoService final
    : public rlqs_pb::RateLimitQuotaService::CallbackService {
 public:
  grpc::ServerBidiReactor<rlqs_pb::RateLimitQuotaUsageReports,
                          rlqs_pb::RateLimitQuotaResponse>*
  StreamRateLimitQuotas(grpc::CallbackServerContext*) override {
    return new Reactor(next_id_.fetch_add(1));
  }

 private:
  class Reactor final
      : public grpc::ServerBidiReactor<rlqs_pb::RateLimitQuotaUsageReports,
                                       rlqs_pb::RateLimitQuotaResponse>,
        public QuotaStreamWriter {
   public:
    explicit Reactor(int64_t id)
        : stream_(std::make_shared<QuotaStream>(id, this)) {
      StartRead(&in_);
      stream_->start();
    }
    void OnReadDone(bool ok) override {
      if (!ok) {
        stream_->finish(grpc::Status::OK);
        return;
      }
      std::vector<Action> actions;
      actions.reserve(static_cast<size_t>(in_.bucket_quota_usages_size()));
      for (const auto& u : in_.bucket_quota_usages()) {
        Action& a = actions.emplace_back();
        *a.mutable_bucket_id() = u.bucket_id();
        auto* q = a.mutable_quota_assignment_action();
        q->mutable_assignment_time_to_live()->set_seconds(6);
        auto* tb = q->mutable_rate_limit_strategy()->mutable_token_bucket();
        tb->set_max_tokens(50);
        tb->mutable_tokens_per_fill()->set_value(50);
        tb->mutable_fill_interval()->set_seconds(1);
      }
      stream_->push(std::move(actions));
      StartRead(&in_);
    }
    void OnWriteDone(bool ok) override { stream_->on_write_done(ok); }
    void OnDone() override {
      stream_->detach();
      delete this;
    }
    void start_write(const rlqs_pb::RateLimitQuotaResponse* r) override {
      StartWrite(r);
    }
    void finish(const grpc::Status& status) override { Finish(status); }

   private:
    const std::shared_ptr<QuotaStream> stream_;
    rlqs_pb::RateLimitQuotaUsageReports in_;
  };

  std::atomic<int64_t> next_id_{1};
};

// The door: a throttlekit-server in process on the embedded store.
Server& door_server() {
  static Server* s = [] {
    auto policies =
        throttlekit::server::Policies::create(bench_config(), nullptr);
    return Server::start(*std::move(policies), {.listen = "127.0.0.1:0"})
        ->release();
  }();
  return *s;
}

struct EchoServer {
  EchoService service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

EchoServer& echo_server() {
  static EchoServer* e = [] {
    auto* echo = new EchoServer;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &echo->port);
    builder.RegisterService(&echo->service);
    echo->server = builder.BuildAndStart();
    return echo;
  }();
  return *e;
}

// One client stream: writes its two messages in turn, keeping at most
// `window` of them unanswered; a report is answered once the stream has
// received k actions for it. Adds the reports answered to `*answered`.
class ClientStream final
    : public grpc::ClientBidiReactor<rlqs_pb::RateLimitQuotaUsageReports,
                                     rlqs_pb::RateLimitQuotaResponse> {
 public:
  ClientStream(rlqs_pb::RateLimitQuotaService::Stub& stub,
               std::vector<rlqs_pb::RateLimitQuotaUsageReports> messages, int k,
               int64_t window, std::atomic<int64_t>* answered)
      : messages_(std::move(messages)),
        k_(k),
        window_(window),
        answered_total_(answered) {
    stub.async()->StreamRateLimitQuotas(&ctx_, this);
    StartRead(&in_);
    maybe_write();
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    int64_t delta = 0;
    {
      std::lock_guard lock(mu_);
      actions_ += in_.bucket_action_size();
      const int64_t now_answered = std::min(sent_, actions_ / k_);
      delta = now_answered - answered_;
      answered_ = now_answered;
    }
    answered_total_->fetch_add(delta, std::memory_order_relaxed);
    StartRead(&in_);
    maybe_write();
  }
  void OnWriteDone(bool ok) override {
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (!ok) stopping_ = true;
    }
    maybe_write();
  }
  void OnDone(const grpc::Status&) override {
    std::lock_guard lock(mu_);
    done_ = true;
    cv_.notify_all();
  }

  // Cancels the stream and waits for its end.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    ctx_.TryCancel();
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  void maybe_write() {
    const rlqs_pb::RateLimitQuotaUsageReports* next = nullptr;
    {
      std::lock_guard lock(mu_);
      if (writing_ || stopping_ || sent_ - answered_ >= window_) return;
      writing_ = true;
      next = &messages_[static_cast<size_t>(sent_ % 2)];
      ++sent_;
    }
    StartWrite(next);
  }

  grpc::ClientContext ctx_;
  const std::vector<rlqs_pb::RateLimitQuotaUsageReports> messages_;
  const int k_;
  const int64_t window_;
  std::atomic<int64_t>* const answered_total_;
  rlqs_pb::RateLimitQuotaResponse in_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool writing_ = false;
  bool stopping_ = false;
  bool done_ = false;
  int64_t sent_ = 0;
  int64_t actions_ = 0;
  int64_t answered_ = 0;
};

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return s(u.ru_utime) + s(u.ru_stime);
}

// A counter of the door's Prometheus text.
int64_t door_metric(const std::string& name) {
  std::string text;
  door_server().quota_door().append_prometheus(text);
  const std::string key = "\n" + name + " ";
  const size_t at = text.find(key);
  return at == std::string::npos ? -1
                                 : std::stoll(text.substr(at + key.size()));
}

// N streams (arg 0) of k usages (arg 1), at most `window` (arg 2) reports
// unanswered each, to `port`; `shape` arg 3. One iteration: a 0.3 s
// warm-up, then 2 s measured (manual time).
void run_streams(benchmark::State& state, int port, bool door) {
  const int streams = static_cast<int>(state.range(0));
  const int k = static_cast<int>(state.range(1));
  const int64_t window = state.range(2);
  const int64_t shape = door ? state.range(3) : kOwn;
  std::vector<std::unique_ptr<rlqs_pb::RateLimitQuotaService::Stub>> stubs;
  for (int s = 0; s < streams; ++s) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection each
    stubs.push_back(rlqs_pb::RateLimitQuotaService::NewStub(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                  grpc::InsecureChannelCredentials(), args)));
  }
  static int run = 0;
  const int domain = run++ % kDomains;  // fresh budgets
  std::atomic<int64_t> answered{0};
  int64_t measured = 0;
  int64_t reports = 0;
  for (auto _ : state) {
    std::vector<std::unique_ptr<ClientStream>> clients;
    for (int s = 0; s < streams; ++s) {
      clients.push_back(std::make_unique<ClientStream>(
          *stubs[s], stream_messages(shape, s, k, domain), k, window,
          &answered));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const int64_t r0 = door ? door_metric("throttlekit_rlqs_reports_total") : 0;
    const int64_t a0 = answered.load();
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const int64_t a1 = answered.load();
    const double c1 = cpu_seconds();
    const auto t1 = std::chrono::steady_clock::now();
    const int64_t r1 = door ? door_metric("throttlekit_rlqs_reports_total") : 0;
    const double wall = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(wall);
    measured += a1 - a0;
    reports += r1 - r0;
    state.counters["cpu_per_s"] = (c1 - c0) / wall;
    state.counters["per_cpu_s"] =
        static_cast<double>((a1 - a0) * k) / std::max(1e-9, c1 - c0);
    for (auto& c : clients) c->stop();
  }
  state.SetItemsProcessed(measured * k);
  state.counters["reports"] = static_cast<double>(measured);
  if (door) state.counters["door_reports"] = static_cast<double>(reports);
}

void BM_RlqsStream_Reports(benchmark::State& state) {
  run_streams(state, door_server().port(), true);
}

void BM_RlqsEcho_Reports(benchmark::State& state) {
  run_streams(state, echo_server().port, false);
}

BENCHMARK(BM_QuotaDoor_Report)
    ->ArgNames({"streams", "k", "shape"})
    ->ArgsProduct({{1, 32}, {1, 10}, {kShared, kOwn}});
BENCHMARK(BM_QuotaBudget_ReportAssign)
    ->ArgNames({"streams", "k", "shape"})
    ->ArgsProduct({{1, 32}, {1, 10}, {kShared, kOwn}});
BENCHMARK(BM_QuotaDoor_PusherRefreshes)
    ->ArgNames({"n", "streams"})
    ->ArgsProduct({{1000, 10000}, {0, 1}})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QuotaDoor_ReportBlanket)
    ->ArgNames({"streams", "k"})
    ->ArgsProduct({{1, 32}, {1, 10}});
// The floor beside the door for each (streams, k, window); both 1-stream
// groups before both 32-stream ones (gRPC's threads grow for 32 and stay).
void stream_args(benchmark::internal::Benchmark* b, int64_t streams,
                 bool door) {
  b->ArgNames({"streams", "k", "window", "shape"});
  for (int64_t k : {1, 10}) {
    for (int64_t window : {1, 16}) {
      b->Args({streams, k, window, kOwn});
      if (door) b->Args({streams, k, window, kShared});
    }
  }
  b->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_RlqsEcho_Reports)->Apply([](auto* b) {
  stream_args(b, 1, false);
});
BENCHMARK(BM_RlqsStream_Reports)->Apply([](auto* b) {
  stream_args(b, 1, true);
});
BENCHMARK(BM_RlqsEcho_Reports)->Apply([](auto* b) {
  stream_args(b, 32, false);
});
BENCHMARK(BM_RlqsStream_Reports)->Apply([](auto* b) {
  stream_args(b, 32, true);
});

}  // namespace

BENCHMARK_MAIN();
