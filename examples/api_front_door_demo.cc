// An API front door on ThrottleKit's embedded in-memory default.
//
// Three tenants on three plans call three endpoints through 12 simulated
// seconds of traffic, with a 10x burst from 4 s to 6 s. Every request passes
// two limits, combined with `combine()` (the binding one decides):
//
//   plan limit (per tenant)        acme: GCRA 10/s, burst 20
//                                  globex: token bucket 50, refills 25/s
//                                  initech: sliding window 200 / 10 s
//   endpoint limit (per tenant)    GET /search: fixed window 30 / s
//                                  POST /upload: exact sliding log 5 / 10 s
//                                  POST /v1/chat: token budget 40,000
//                                  LLM tokens / min (cost = tokens)
//
// The clock is a ManualClock, so the run is instant and reproducible. It
// prints a per-second timeline, the first denial of each kind with the HTTP
// headers a server would send, and a summary.
//
// Usage: api_front_door_demo [--seed N]

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "throttlekit/observe/rate_limit_headers.h"
#include "throttlekit/throttlekit.h"

namespace tk = throttlekit;

namespace {

constexpr int64_t kStartMs = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr int64_t kRunMs = 12'000;
constexpr int64_t kTickMs = 10;

using Clock = tk::ClockRef<tk::ManualClock>;

// Any limiter, behind one interface, so the demo can mix strategies.
class Limit {
 public:
  virtual ~Limit() = default;
  virtual tk::Decision check(const std::string& key, double cost) = 0;
  virtual int64_t window_ms() const = 0;
  virtual const char* describe() const = 0;
};

template <tk::Strategy S>
class LimitOf final : public Limit {
 public:
  LimitOf(const typename S::Options& options, const tk::ManualClock& clock,
          const char* description)
      : limiter_(make(options, clock)), description_(description) {}
  tk::Decision check(const std::string& key, double cost) override {
    absl::StatusOr<tk::Decision> d = limiter_.check(key, cost);
    if (!d.ok()) {
      std::fprintf(stderr, "check failed: %s\n", d.status().ToString().c_str());
      std::exit(1);
    }
    return *d;
  }
  int64_t window_ms() const override {
    return limiter_.strategy().policy_window_ms();
  }
  const char* describe() const override { return description_; }

 private:
  static tk::RateLimiter<S, Clock> make(const typename S::Options& options,
                                        const tk::ManualClock& clock) {
    auto limiter = tk::RateLimiter<S, Clock>::create(options, {}, Clock(clock));
    if (!limiter.ok()) {
      std::fprintf(stderr, "bad configuration: %s\n",
                   limiter.status().ToString().c_str());
      std::exit(1);
    }
    return *std::move(limiter);
  }
  tk::RateLimiter<S, Clock> limiter_;
  const char* description_;
};

struct Tenant {
  std::string name;
  double base_rps;  // requests per second outside the burst
  std::unique_ptr<Limit> plan;
};

struct Endpoint {
  std::string name;
  double share;  // fraction of a tenant's requests
  std::unique_ptr<Limit> limit;
};

struct Tally {
  int sent = 0;
  int admitted = 0;
  int denied_by_plan = 0;
  int denied_by_endpoint = 0;
  int64_t max_retry_ms = 0;
};

std::string bar(int n, int scale) {
  return std::string(static_cast<size_t>((n + scale - 1) / scale), '#');
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t seed = 42;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--seed") == 0) {
      seed = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    }
  }
  tk::ManualClock clock(kStartMs);

  std::vector<Tenant> tenants;
  tenants.push_back({"acme", 14,
                     std::make_unique<LimitOf<tk::Gcra>>(
                         tk::Gcra::Options{10, 1000, 20}, clock,
                         "free plan: GCRA 10/s, burst 20")});
  tenants.push_back({"globex", 30,
                     std::make_unique<LimitOf<tk::TokenBucket>>(
                         tk::TokenBucket::Options{50, 25}, clock,
                         "pro plan: token bucket 50, refill 25/s")});
  tenants.push_back({"initech", 18,
                     std::make_unique<LimitOf<tk::SlidingWindow>>(
                         tk::SlidingWindow::Options{200, 10'000, 10}, clock,
                         "enterprise: sliding window 200 / 10 s")});

  std::vector<Endpoint> endpoints;
  endpoints.push_back(
      {"GET /search", 0.70,
       std::make_unique<LimitOf<tk::FixedWindow>>(
           tk::FixedWindow::Options{30, 1000}, clock, "fixed window 30 / s")});
  endpoints.push_back({"POST /upload", 0.10,
                       std::make_unique<LimitOf<tk::SlidingLog>>(
                           tk::SlidingLog::Options{5, 10'000}, clock,
                           "exact sliding log 5 / 10 s")});
  endpoints.push_back({"POST /v1/chat", 0.20,
                       std::make_unique<LimitOf<tk::TokenBudget>>(
                           tk::TokenBudget::Options{40'000, 60'000}, clock,
                           "token budget 40k LLM tokens / min")});

  std::printf("ThrottleKit API front door demo (simulated %lld s, seed %u)\n\n",
              static_cast<long long>(kRunMs / 1000), seed);
  for (const Tenant& t : tenants) {
    std::printf("  tenant %-8s %-42s ~%2.0f req/s, 10x from 4 s to 6 s\n",
                t.name.c_str(), t.plan->describe(), t.base_rps);
  }
  for (const Endpoint& e : endpoints) {
    std::printf("  endpoint %-14s %-34s (%2.0f%% of calls)\n", e.name.c_str(),
                e.limit->describe(), e.share * 100);
  }

  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::uniform_int_distribution<int> chat_tokens(300, 3000);

  std::map<std::string, Tally> by_pair;  // tenant + endpoint
  std::vector<std::vector<Tally>> per_second(tenants.size());
  std::map<std::string, bool> shown;  // first denial printed
  std::vector<std::string> samples;

  for (int64_t t = 0; t < kRunMs; t += kTickMs) {
    clock.set_ms(kStartMs + t);
    const bool burst = t >= 4000 && t < 6000;
    for (size_t ti = 0; ti < tenants.size(); ++ti) {
      Tenant& tenant = tenants[ti];
      auto& seconds = per_second[ti];
      if (seconds.size() <= static_cast<size_t>(t / 1000))
        seconds.emplace_back();
      const double rps = tenant.base_rps * (burst ? 10 : 1);
      // Poisson arrivals within the tick.
      std::poisson_distribution<int> arrivals(rps * kTickMs / 1000.0);
      for (int n = arrivals(rng); n > 0; --n) {
        const double pick = uniform(rng);
        size_t ei = pick < endpoints[0].share                        ? 0
                    : pick < endpoints[0].share + endpoints[1].share ? 1
                                                                     : 2;
        Endpoint& ep = endpoints[ei];
        const double cost = ei == 2 ? chat_tokens(rng) : 1;
        // Each axis answers; the combined decision is what the server uses.
        const tk::Decision plan = tenant.plan->check(tenant.name, 1);
        const tk::Decision endpoint =
            plan.allowed ? ep.limit->check(tenant.name + " " + ep.name, cost)
                         : tk::kAllowFull;  // not evaluated after a denial
        const tk::Decision d = tk::combine(plan, endpoint);
        const bool endpoint_bound =
            tk::binding_axis({.rate = plan, .cost = endpoint}) ==
            tk::Axis::kCost;

        Tally& pair = by_pair[tenant.name + "  " + ep.name];
        Tally& sec = seconds.back();
        ++pair.sent;
        ++sec.sent;
        if (d.allowed) {
          ++pair.admitted;
          ++sec.admitted;
          continue;
        }
        (endpoint_bound ? pair.denied_by_endpoint : pair.denied_by_plan)++;
        (endpoint_bound ? sec.denied_by_endpoint : sec.denied_by_plan)++;
        pair.max_retry_ms = std::max(pair.max_retry_ms, d.retry_after_ms);
        const std::string kind =
            tenant.name + (plan.allowed ? " " + ep.name : " plan");
        if (!shown[kind]) {
          shown[kind] = true;
          const int64_t window =
              plan.allowed ? ep.limit->window_ms() : tenant.plan->window_ms();
          char line[160];
          std::snprintf(line, sizeof line,
                        "t=%5.2fs  %-8s %-14s -> 429, bound by the %s limit",
                        t / 1000.0, tenant.name.c_str(), ep.name.c_str(),
                        plan.allowed ? "endpoint" : "plan");
          std::string sample = line;
          // The headers describe the policy that bound (the denied axis),
          // not the min/max mix of both.
          const tk::Decision& binding = plan.allowed ? endpoint : plan;
          tk::rate_limit_headers(binding, clock.now_ms(), window)
              .for_each([&](const char* name, const std::string& value) {
                sample += "\n             " + std::string(name) + ": " + value;
              });
          samples.push_back(sample);
        }
      }
    }
  }

  std::printf("\nTimeline (per second: # = 5 admitted, x = 5 denied)\n");
  for (size_t ti = 0; ti < tenants.size(); ++ti) {
    std::printf("\n  %s\n", tenants[ti].name.c_str());
    for (size_t s = 0; s < per_second[ti].size(); ++s) {
      const Tally& sec = per_second[ti][s];
      const int denied = sec.denied_by_plan + sec.denied_by_endpoint;
      std::string denied_bar(static_cast<size_t>((denied + 4) / 5), 'x');
      std::printf("   %2zus %4d sent %4d ok %4d denied  %s%s\n", s, sec.sent,
                  sec.admitted, denied, bar(sec.admitted, 5).c_str(),
                  denied_bar.c_str());
    }
  }

  std::printf("\nFirst denial of each kind, with the response headers\n\n");
  for (const std::string& s : samples) std::printf("  %s\n\n", s.c_str());

  std::printf("Summary\n\n  %-24s %6s %8s %10s %12s %10s\n", "tenant  endpoint",
              "sent", "admitted", "plan-429", "endpoint-429", "max retry");
  for (const auto& [pair, tally] : by_pair) {
    std::printf("  %-24s %6d %8d %10d %12d %8.2f s\n", pair.c_str(), tally.sent,
                tally.admitted, tally.denied_by_plan, tally.denied_by_endpoint,
                tally.max_retry_ms / 1000.0);
  }
  std::printf(
      "\nNote: the plan limit is charged before the endpoint limit is asked,\n"
      "so a request the endpoint denies still spent plan credit. Unified\n"
      "admission (one admit(), one lease) removes that; see docs.\n");
  return 0;
}
