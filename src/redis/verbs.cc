// RedisCoordinator's verbs: each one hook (coordinator.h) that fills a
// request (a script call or a command) and parses its reply, run through
// `Impl::dispatch` on the calling thread or queued (coordinator_impl.h).

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator_impl.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {

using namespace redis_internal;  // NOLINT: this backend's own internals

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

// A reply that only acknowledges (DEL's count, PING's PONG).
absl::StatusOr<Acknowledged> to_acknowledged(const Request&) {
  return Acknowledged{};
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

namespace {

// One strategy step's request; the blocking and the asynchronous check send
// the same one and read its reply with `to_decision`.
void fill_check(Request& r, const AnyStrategy& strategy, std::string_view key,
                int64_t now_ms, double cost, int64_t ttl_slack_ms) {
  r.script = static_cast<int>(strategy.index());
  r.argv.reserve(12);
  r.argv.emplace_back(key);
  r.argv.insert(r.argv.end(), {fmt_int(now_ms), fmt_double(cost), "c",
                               fmt_int(ttl_slack_ms)});
  append_options(strategy, r.argv);
}

}  // namespace

void RedisCoordinator::do_check(const AnyStrategy& strategy,
                                std::string_view key, int64_t now_ms,
                                double cost, VerbCompletion<Decision>&& done) {
  impl_->dispatch(&to_decision, std::move(done), [&](Request& r) {
    fill_check(r, strategy, key, now_ms, cost, impl_->options().ttl_slack_ms);
  });
}

namespace {

// kInvalidArgument naming the problem with a fused call's arguments.
absl::Status validate_fused(std::string_view rate_key,
                            std::string_view cost_key, int64_t now_ms,
                            double units) {
  if (absl::Status s = validate_key(rate_key); !s.ok()) return s;
  if (absl::Status s = validate_key(cost_key); !s.ok()) return s;
  if (absl::Status s = validate_cost(units); !s.ok()) return s;
  if (now_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis: fused_check: now_ms must be >= 0; got ", now_ms));
  }
  return absl::OkStatus();
}

// ARGV of the fused script; entries 6, 8 and 9 (the GCRA limit and burst,
// the bucket's capacity) are what `to_fused` reads back.
void fill_fused(Request& r, const Gcra& rate, const TokenBucket& cost,
                std::string_view rate_key, std::string_view cost_key,
                int64_t now_ms, double units, int64_t ttl_slack_ms) {
  r.script = kFusedScript;
  r.keys = 2;
  const Gcra::Options& g = rate.options();
  const TokenBucket::Options& b = cost.options();
  r.argv = {std::string(rate_key),
            std::string(cost_key),
            fmt_int(now_ms),
            fmt_double(units),
            "c",
            fmt_int(ttl_slack_ms),
            fmt_int(g.limit),
            fmt_int(g.period_ms),
            fmt_int(g.burst),
            fmt_int(b.capacity),
            fmt_double(b.refill_per_sec)};
}

// The fused script's 13 integers as both axes' decisions; each axis's limit
// is the one its ARGV carried.
absl::StatusOr<RedisCoordinator::FusedDecision> to_fused(const Request& r) {
  const std::vector<int64_t>& v = r.reply;
  if (v.size() != 13) {
    return absl::InternalError(
        absl::StrCat("redis: the fused script replied with ", v.size(),
                     " values; expected 13"));
  }
  int64_t limit = 0, burst = 0, capacity = 0;
  if (r.argv.size() != 11 || !absl::SimpleAtoi(r.argv[6], &limit) ||
      !absl::SimpleAtoi(r.argv[8], &burst) ||
      !absl::SimpleAtoi(r.argv[9], &capacity)) {
    return absl::InternalError("redis: a fused request lost its options");
  }
  RedisCoordinator::FusedDecision f;
  f.combined = Decision{v[0] != 0, v[1], v[2], v[3], v[4]};
  f.rate = Decision{v[5] != 0, burst == 0 ? limit : burst, v[6], v[7], v[8]};
  if (v[9] >= 0) f.cost = Decision{v[9] != 0, capacity, v[10], v[11], v[12]};
  return f;
}

}  // namespace

absl::StatusOr<RedisCoordinator::FusedDecision> RedisCoordinator::fused_check(
    const Gcra& rate, const TokenBucket& cost, std::string_view rate_key,
    std::string_view cost_key, int64_t now_ms, double units) {
  if (absl::Status s = validate_fused(rate_key, cost_key, now_ms, units);
      !s.ok()) {
    return s;
  }
  return impl_->run(&to_fused, [&](Request& r) {
    fill_fused(r, rate, cost, rate_key, cost_key, now_ms, units,
               impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::fused_check_async(const Gcra& rate,
                                         const TokenBucket& cost,
                                         std::string_view rate_key,
                                         std::string_view cost_key,
                                         int64_t now_ms, double units,
                                         Completion<FusedDecision> on_done) {
  if (absl::Status s = validate_fused(rate_key, cost_key, now_ms, units);
      !s.ok()) {
    std::move(on_done)(std::move(s));
    return;
  }
  impl_->run_async(&to_fused, std::move(on_done), [&](Request& r) {
    fill_fused(r, rate, cost, rate_key, cost_key, now_ms, units,
               impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::do_peek(const AnyStrategy& strategy,
                               std::string_view key, int64_t now_ms,
                               VerbCompletion<Decision>&& done) {
  impl_->dispatch(&to_decision, std::move(done), [&](Request& r) {
    r.script = static_cast<int>(strategy.index());
    r.argv.reserve(12);
    r.argv.emplace_back(key);
    r.argv.insert(r.argv.end(), {fmt_int(now_ms), "1", "p",
                                 fmt_int(impl_->options().ttl_slack_ms)});
    append_options(strategy, r.argv);
  });
}

namespace {

double parse_double(const std::string& s) {
  return std::strtod(s.c_str(), nullptr);
}

int64_t parse_int(const std::string& s) {
  return std::strtoll(s.c_str(), nullptr, 10);
}

// A hash reply's value of `field`, or null.
const std::string* field_of(const std::vector<std::string>& pairs,
                            std::string_view field) {
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    if (pairs[i] == field) return &pairs[i + 1];
  }
  return nullptr;
}

// A state of two hash fields, `a` and `b`, each read with `parse` (its
// default, the cold state, when either field is missing).
template <class State, class ParseA, class ParseB>
State state_of_two(const std::vector<std::string>& pairs, std::string_view a,
                   std::string_view b, ParseA parse_a, ParseB parse_b) {
  const std::string* x = field_of(pairs, a);
  const std::string* y = field_of(pairs, b);
  if (x == nullptr || y == nullptr) return State{};
  return State{parse_a(*x), parse_b(*y)};
}

// The strategy's state from the raw reply of state.lua (`raw` excludes
// `now`), in the key layout of docs/redis.md.
template <class S>
typename S::State state_from(const S& s, const std::vector<std::string>& raw) {
  using State = typename S::State;
  State st{};
  if (raw.empty()) return st;
  if constexpr (std::is_same_v<S, Gcra>) {
    st.tat = parse_double(raw[0]);
  } else if constexpr (std::is_same_v<S, TokenBucket>) {
    st = state_of_two<State>(raw, "t", "l", parse_double, parse_double);
  } else if constexpr (std::is_same_v<S, FixedWindow>) {
    st = state_of_two<State>(raw, "s", "c", parse_double, parse_double);
  } else if constexpr (std::is_same_v<S, Quota>) {
    st = state_of_two<State>(raw, "s", "c", parse_int, parse_double);
  } else if constexpr (std::is_same_v<S, TokenBudget>) {
    st = state_of_two<State>(raw, "s", "w", parse_int, parse_int);
  } else if constexpr (std::is_same_v<S, SlidingWindow>) {
    // field -> "<tick>:<count>"
    std::vector<SlidingWindow::Slot> slots;
    for (size_t i = 0; i + 1 < raw.size(); i += 2) {
      const std::string& v = raw[i + 1];
      const size_t colon = v.find(':');
      if (colon == std::string::npos) continue;
      slots.push_back(SlidingWindow::Slot{parse_int(v.substr(0, colon)),
                                          parse_double(v.substr(colon + 1))});
    }
    st = s.state_from_slots(slots);
  } else {
    static_assert(std::is_same_v<S, SlidingLog>);
    // member/score pairs, ascending by score: one member per unit.
    std::vector<SlidingLog::Run> runs;
    for (size_t i = 0; i + 1 < raw.size(); i += 2) {
      const int64_t at = static_cast<int64_t>(parse_double(raw[i + 1]));
      if (!runs.empty() && runs.back().at_ms == at) {
        ++runs.back().count;
      } else {
        runs.push_back(SlidingLog::Run{at, 1});
      }
    }
    st = SlidingLog::State::from_runs(runs);
  }
  return st;
}

// The Redis type a strategy's key has: 's' string, 'h' hash, 'z' zset.
const char* layout_of(const AnyStrategy& strategy) {
  if (std::holds_alternative<Gcra>(strategy)) return "s";
  if (std::holds_alternative<SlidingLog>(strategy)) return "z";
  return "h";
}

}  // namespace

namespace {

absl::StatusOr<Forecast> forecast_now(RedisCoordinator::Impl& impl,
                                      const AnyStrategy& strategy,
                                      std::string_view key, int64_t now_ms,
                                      double cost) {
  auto r = std::make_shared<Request>();
  r->script = kStateScript;
  r->argv = {std::string(key), fmt_int(now_ms), layout_of(strategy)};
  if (absl::Status s = impl.call(r); !s.ok()) return s;
  if (r->reply.empty()) {
    return absl::InternalError("redis: the state script replied badly");
  }
  const int64_t now = r->reply[0];
  return std::visit(
      [&](const auto& s) -> Forecast {
        return s.forecast(state_from(s, r->text), now, cost);
      },
      strategy);
}

}  // namespace

// Only ever waited for (no asynchronous forecast): runs on the calling
// thread, and reads the key's state back into the C++ strategy.
void RedisCoordinator::do_forecast(const AnyStrategy& strategy,
                                   std::string_view key, int64_t now_ms,
                                   double cost,
                                   VerbCompletion<Forecast>&& done) {
  std::move(done)(forecast_now(*impl_, strategy, key, now_ms, cost));
}

void RedisCoordinator::do_reset(const AnyStrategy&, std::string_view key,
                                VerbCompletion<Acknowledged>&& done) {
  impl_->dispatch(&to_acknowledged, std::move(done), [&](Request& r) {
    r.argv = {"DEL", std::string(key)};
  });
}

namespace {

void fill_lease(Request& r, const LeaseBudget& budget, std::string_view key,
                int64_t want, int64_t ttl_slack_ms) {
  r.script = kLeaseScript;
  r.argv = {std::string(key), fmt_int(want), fmt_int(budget.limit()),
            fmt_int(budget.window_ms()), fmt_int(ttl_slack_ms)};
}

absl::StatusOr<LeaseGrant> to_grant(const Request& r) {
  if (r.reply.size() != 5) {
    return absl::InternalError(
        absl::StrCat("redis: a lease script replied with ", r.reply.size(),
                     " values; expected 5"));
  }
  return LeaseGrant{r.reply[0], r.reply[1], r.reply[2], r.reply[3], r.reply[4]};
}

void fill_give_back(Request& r, const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t credits,
                    std::string_view token) {
  r.script = kGiveBackScript;
  r.argv = {std::string(key), fmt_int(window_start_ms), fmt_int(credits),
            std::string(token), fmt_int(budget.window_ms())};
}

absl::StatusOr<int64_t> to_count(const Request& r) {
  if (r.reply.size() != 1) {
    return absl::InternalError(absl::StrCat("redis: a script replied with ",
                                            r.reply.size(),
                                            " values; expected 1"));
  }
  return r.reply[0];
}

}  // namespace

void RedisCoordinator::do_lease(const LeaseBudget& budget, std::string_view key,
                                int64_t want,
                                VerbCompletion<LeaseGrant>&& done) {
  impl_->dispatch(&to_grant, std::move(done), [&](Request& r) {
    fill_lease(r, budget, key, want, impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::do_give_back(const LeaseBudget& budget,
                                    std::string_view key,
                                    int64_t window_start_ms, int64_t credits,
                                    std::string_view token,
                                    VerbCompletion<int64_t>&& done) {
  impl_->dispatch(&to_count, std::move(done), [&](Request& r) {
    fill_give_back(r, budget, key, window_start_ms, credits, token);
  });
}

namespace {

void fill_lease_windowed(Request& r, const LeaseBudget& budget,
                         std::string_view key, int64_t want, int64_t now_ms,
                         int64_t ttl_slack_ms) {
  r.script = kFedLeaseScript;
  r.argv = {std::string(key),
            fmt_int(now_ms),
            fmt_int(want),
            fmt_int(budget.limit()),
            fmt_int(budget.window_ms()),
            fmt_int(ttl_slack_ms)};
}

void fill_reconcile(Request& r, const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t leftover,
                    std::string_view token, int64_t now_ms) {
  r.script = kFedReconcileScript;
  r.argv = {std::string(key),           fmt_int(now_ms),
            fmt_int(window_start_ms),   fmt_int(leftover),
            std::string(token),         fmt_int(budget.limit()),
            fmt_int(budget.window_ms())};
}

// One escrow.lua call: op and its three arguments.
void fill_escrow(Request& r, std::string_view key, int64_t now_ms,
                 const char* op, int64_t a, int64_t b, int64_t c,
                 int64_t slack) {
  r.script = kEscrowScript;
  r.argv = {std::string(key), fmt_int(now_ms), op, fmt_int(a), fmt_int(b),
            fmt_int(c),       fmt_int(slack)};
}

}  // namespace

void RedisCoordinator::do_lease_windowed(const LeaseBudget& budget,
                                         std::string_view key, int64_t want,
                                         int64_t now_ms,
                                         VerbCompletion<LeaseGrant>&& done) {
  impl_->dispatch(&to_grant, std::move(done), [&](Request& r) {
    fill_lease_windowed(r, budget, key, want, now_ms,
                        impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::do_reconcile(const LeaseBudget& budget,
                                    std::string_view key,
                                    int64_t window_start_ms, int64_t leftover,
                                    std::string_view token, int64_t now_ms,
                                    VerbCompletion<int64_t>&& done) {
  impl_->dispatch(&to_count, std::move(done), [&](Request& r) {
    fill_reconcile(r, budget, key, window_start_ms, leftover, token, now_ms);
  });
}

void RedisCoordinator::do_escrow_take(std::string_view key, int64_t want,
                                      int64_t now_ms,
                                      VerbCompletion<LeaseGrant>&& done) {
  impl_->dispatch(&to_grant, std::move(done), [&](Request& r) {
    fill_escrow(r, key, now_ms, "t", want, 0, 0, impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::do_escrow_refill(std::string_view key, int64_t granted,
                                        int64_t window_start_ms,
                                        int64_t expires_at_ms, int64_t now_ms,
                                        VerbCompletion<int64_t>&& done) {
  impl_->dispatch(&to_count, std::move(done), [&](Request& r) {
    fill_escrow(r, key, now_ms, "r", granted, window_start_ms, expires_at_ms,
                impl_->options().ttl_slack_ms);
  });
}

void RedisCoordinator::do_escrow_release(std::string_view key,
                                         int64_t window_start_ms,
                                         int64_t now_ms,
                                         VerbCompletion<int64_t>&& done) {
  impl_->dispatch(&to_count, std::move(done), [&](Request& r) {
    fill_escrow(r, key, now_ms, "x", window_start_ms, 0, 0,
                impl_->options().ttl_slack_ms);
  });
}

absl::Status RedisCoordinator::do_wait_ready(absl::Time deadline) {
  for (;;) {
    const Impl::Readiness r = impl_->readiness();
    if (r.ready) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      if (!r.error.ok()) return r.error;
      return absl::DeadlineExceededError(absl::StrCat(
          "redis: not ready by the deadline: waiting for ", r.waiting_for));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

void RedisCoordinator::do_ping(VerbCompletion<Acknowledged>&& done) {
  impl_->dispatch(&to_acknowledged, std::move(done),
                  [](Request& r) { r.argv = {"PING"}; });
}

namespace {

// TIME's reply (seconds, microseconds) as epoch ms.
absl::StatusOr<int64_t> to_now_ms(const Request& r) {
  if (r.reply.size() != 2) {
    return absl::InternalError("redis: TIME replied badly");
  }
  return r.reply[0] * 1000 + r.reply[1] / 1000;
}

}  // namespace

void RedisCoordinator::do_now_ms(VerbCompletion<int64_t>&& done) {
  impl_->dispatch(&to_now_ms, std::move(done),
                  [](Request& r) { r.argv = {"TIME"}; });
}

namespace {

void fill_heartbeat(Request& r, std::string_view key,
                    const HeartbeatReport& report,
                    const HeartbeatOptions& options, int64_t now_ms,
                    int64_t ttl_slack_ms) {
  r.script = kHeartbeatScript;
  r.argv = {std::string(key),
            fmt_int(now_ms),
            std::string(report.node_id),
            fmt_int(report.seq),
            fmt_int(report.applied_gen),
            fmt_int(report.inflight),
            fmt_int(report.local_limit),
            fmt_int(report.demand),
            fmt_int(options.lease_ttl_ms),
            options.aggregate == HeartbeatAggregate::kMin ? "m" : "l",
            options.handoff ? "1" : "0",
            options.demand_proportional ? "1" : "0",
            fmt_int(ttl_slack_ms)};
}

absl::StatusOr<HeartbeatGrant> to_heartbeat_grant(const Request& r) {
  const std::vector<int64_t>& v = r.reply;
  if (v.size() != 7) {
    return absl::InternalError(
        absl::StrCat("redis: the heartbeat script replied with ", v.size(),
                     " values; expected 7"));
  }
  return HeartbeatGrant{.share = v[0],
                        .generation = v[1],
                        .global_limit = v[2],
                        .live_nodes = v[3],
                        .lease_expires_at_ms = v[4],
                        .stale = v[5] != 0};
}

}  // namespace

void RedisCoordinator::do_heartbeat(std::string_view key,
                                    const HeartbeatReport& report,
                                    const HeartbeatOptions& options,
                                    int64_t now_ms,
                                    VerbCompletion<HeartbeatGrant>&& done) {
  impl_->dispatch(&to_heartbeat_grant, std::move(done), [&](Request& r) {
    fill_heartbeat(r, key, report, options, now_ms,
                   impl_->options().ttl_slack_ms);
  });
}

namespace {

// `key`'s node table, read on the calling thread.
absl::StatusOr<std::vector<HeartbeatNode>> heartbeat_nodes_now(
    RedisCoordinator::Impl& impl, std::string_view key) {
  auto r = std::make_shared<Request>();
  r->script = kStateScript;
  r->argv = {std::string(key), "0", "h"};
  if (absl::Status s = impl.call(r); !s.ok()) return s;
  // r->text: the field/value pairs (heartbeat.lua's layout); `now`, an
  // integer, is only in r->reply.
  std::vector<HeartbeatNode> nodes;
  for (size_t i = 0; i + 1 < r->text.size(); i += 2) {
    const std::string& field = r->text[i];
    if (field.compare(0, 2, "n:") != 0) {
      return absl::FailedPreconditionError(
          "redis: the key holds another layout; asked for heartbeat_nodes");
    }
    HeartbeatNode n{.id = field.substr(2)};
    int64_t* const slots[] = {&n.local_limit, &n.inflight,    &n.expires_at_ms,
                              &n.share,       &n.seq,         &n.demand,
                              &n.generation,  &n.acked_share, &n.max_unacked};
    const char* p = r->text[i + 1].c_str();
    for (int64_t* slot : slots) {
      char* end = nullptr;
      *slot = std::strtoll(p, &end, 10);
      if (end == p) {
        return absl::InternalError(absl::StrCat(
            "redis: a heartbeat row is malformed: ", r->text[i + 1]));
      }
      p = end;
    }
    nodes.push_back(std::move(n));
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const HeartbeatNode& a, const HeartbeatNode& b) {
              return a.id < b.id;
            });
  return nodes;
}

}  // namespace

// Only ever waited for (no asynchronous form): runs on the calling thread.
void RedisCoordinator::do_heartbeat_nodes(
    std::string_view key, VerbCompletion<std::vector<HeartbeatNode>>&& done) {
  std::move(done)(heartbeat_nodes_now(*impl_, key));
}

absl::StatusOr<std::vector<int64_t>> RedisCoordinator::region_pool_step(
    std::vector<std::string> argv) {
  auto r = std::make_shared<Request>();
  r->script = kRegionPoolScript;
  r->argv = std::move(argv);
  if (absl::Status s = impl_->call(r); !s.ok()) return s;
  return std::move(r->reply);
}

namespace {
absl::StatusOr<std::vector<int64_t>> to_ints(const Request& r) {
  return r.reply;
}
}  // namespace

void RedisCoordinator::region_pool_step_async(
    std::vector<std::string> argv, Completion<std::vector<int64_t>> on_done) {
  impl_->run_async(&to_ints, std::move(on_done), [&](Request& r) {
    r.script = kRegionPoolScript;
    r.argv = std::move(argv);
  });
}

absl::StatusOr<std::vector<std::string>> RedisCoordinator::hash_fields(
    std::string_view key) {
  auto r = std::make_shared<Request>();
  r->script = kStateScript;
  r->argv = {std::string(key), "0", "h"};
  if (absl::Status s = impl_->call(r); !s.ok()) return s;
  // r->text: the pairs (`now`, an integer, is only in r->reply).
  return std::move(r->text);
}

}  // namespace throttlekit
