// src/server/quota_door.cc: the quota door's budgets, streams and pusher
// (quota_door.h).

#include "quota_door.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl_view.h"

namespace throttlekit::server {
namespace {

using Action = rlqs_pb::RateLimitQuotaResponse::BucketAction;
constexpr int64_t kMaxCount = int64_t{1} << 40;
constexpr int64_t kMaxElapsedS = 86'400;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

Action assignment_action(const rlqs_pb::BucketId& id, int64_t ttl_s) {
  Action a;
  *a.mutable_bucket_id() = id;
  a.mutable_quota_assignment_action()
      ->mutable_assignment_time_to_live()
      ->set_seconds(ttl_s);
  return a;
}

Action blanket_action(const rlqs_pb::BucketId& id, RlqsBlanket rule,
                      int64_t ttl_s) {
  Action a = assignment_action(id, ttl_s);
  a.mutable_quota_assignment_action()
      ->mutable_rate_limit_strategy()
      ->set_blanket_rule(rule == RlqsBlanket::kAllowAll
                             ? ::envoy::type::v3::RateLimitStrategy::ALLOW_ALL
                             : ::envoy::type::v3::RateLimitStrategy::DENY_ALL);
  return a;
}

Action abandon_action(const rlqs_pb::BucketId& id) {
  Action a;
  *a.mutable_bucket_id() = id;
  a.mutable_abandon_action();
  return a;
}

Action quota_action(const rlqs_pb::BucketId& id, const QuotaAssignment& q) {
  if (q.deny_all()) return blanket_action(id, RlqsBlanket::kDenyAll, q.ttl_s);
  Action a = assignment_action(id, q.ttl_s);
  auto* tb = a.mutable_quota_assignment_action()
                 ->mutable_rate_limit_strategy()
                 ->mutable_token_bucket();
  tb->set_max_tokens(static_cast<uint32_t>(q.tokens));
  tb->mutable_tokens_per_fill()->set_value(static_cast<uint32_t>(q.tokens));
  tb->mutable_fill_interval()->set_seconds(q.fill_interval_s);
  return a;
}

// The first problem of `message` on a stream whose domain is `domain`
// (empty before its first message), naming the field; OK if none.
absl::Status validate(const rlqs_pb::RateLimitQuotaUsageReports& message,
                      const std::string& domain) {
  const char* const where = "StreamRateLimitQuotas: ";
  if (domain.empty() && message.domain().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "domain: empty in the stream's first message"));
  }
  if (!domain.empty() && !message.domain().empty() &&
      message.domain() != domain) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "domain: \"", sv(message.domain()),
                     "\" differs from the stream's \"", domain,
                     "\" (one domain per stream)"));
  }
  for (int i = 0; i < message.bucket_quota_usages_size(); ++i) {
    const auto& u = message.bucket_quota_usages(i);
    const std::string field = absl::StrCat("bucket_quota_usages[", i, "].");
    if (u.bucket_id().bucket().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, field, "bucket_id: empty"));
    }
    const std::pair<const char*, uint64_t> counts[] = {
        {"num_requests_allowed", u.num_requests_allowed()},
        {"num_requests_denied", u.num_requests_denied()}};
    for (const auto& [name, count] : counts) {
      if (count > static_cast<uint64_t>(kMaxCount)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, field, name, ": ", count, " is over 2^40"));
      }
    }
    const auto& t = u.time_elapsed();
    if (t.seconds() < 0 || t.nanos() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, field, "time_elapsed: negative"));
    }
    if (t.seconds() > kMaxElapsedS ||
        (t.seconds() == kMaxElapsedS && t.nanos() > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, field, "time_elapsed: ", t.seconds(), " s is over a day"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

QuotaDoor::QuotaDoor(RlqsConfig config, ServerClock clock,
                     std::unique_ptr<ShareSource> shares)
    : clock_(clock),
      shares_(shares != nullptr ? std::move(shares)
                                : std::make_unique<FixedShare>()),
      fleet_heartbeat_ms_(config.fleet_heartbeat_ms),
      served_(make_served(std::move(config), nullptr)) {
  pusher_ = std::thread([this] { pusher_loop(); });
}

std::shared_ptr<const QuotaDoor::Served> QuotaDoor::make_served(
    RlqsConfig next, const Served* was) {
  auto served = std::make_shared<Served>();
  served->config = std::move(next);
  for (const RlqsDomain& d : served->config.domains) {
    const RlqsDomain* old =
        was != nullptr ? was->config.find(d.domain) : nullptr;
    const size_t old_di =
        old != nullptr ? static_cast<size_t>(old - was->config.domains.data())
                       : 0;
    auto& rules = served->counters.emplace_back();
    // One per rule, and the last for the unmatched buckets.
    for (size_t i = 0; i <= d.buckets.size(); ++i) {
      std::shared_ptr<Counters> carried;
      if (old != nullptr) {
        const auto& counters = was->counters[old_di];
        if (i == d.buckets.size()) {
          carried = counters.back();
        } else {
          for (size_t j = 0; j < old->buckets.size(); ++j) {
            if (old->buckets[j].identity == d.buckets[i].identity) {
              carried = counters[j];
            }
          }
        }
      }
      rules.push_back(carried != nullptr ? std::move(carried)
                                         : std::make_shared<Counters>());
    }
  }
  return served;
}

std::shared_ptr<const QuotaDoor::Served> QuotaDoor::served() {
  MutexLock lock(mu_);
  return served_;
}

size_t QuotaDoor::domains() { return served()->config.domains.size(); }

absl::Status QuotaDoor::check_reload(const RlqsConfig& next) {
  // A block with no domains (the door off) has nothing to beat for.
  if (!next.domains.empty() && next.fleet_heartbeat_ms != fleet_heartbeat_ms_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rlqs.fleetHeartbeat: ", next.fleet_heartbeat_ms,
        " ms differs from the ", fleet_heartbeat_ms_,
        " ms in force; it takes effect at a restart (the leases of the "
        "budgets served depend on it)"));
  }
  return absl::OkStatus();
}

absl::Status QuotaDoor::reload(RlqsConfig next) {
  MutexLock reload_lock(reload_mu_);
  if (absl::Status s = check_reload(next); !s.ok()) {
    reload_errors_.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  // The budgets kept whose rule's requests changed, with the new value.
  std::vector<std::pair<std::shared_ptr<Budget>, int64_t>> changed;
  {
    MutexLock lock(mu_);
    if (stopped_) {
      return absl::UnavailableError("rlqs reload: the door is stopped");
    }
    served_ = make_served(std::move(next), served_.get());
    for (const auto& [name, b] : budgets_) {
      const RlqsDomain* d = served_->config.find(name.first);
      if (d == nullptr) continue;
      for (const RlqsBucketRule& r : d->buckets) {
        if (r.identity == b->identity && r.limit.has_value()) {
          changed.emplace_back(b, r.limit->requests);
        }
      }
    }
  }
  for (auto& [b, requests] : changed) {
    {
      MutexLock lock(b->mu);
      if (b->limit == requests) continue;
      b->limit = requests;
    }
    // Assigned again at once, as when its share moves.
    b->share_moved.store(true, std::memory_order_release);
    {
      MutexLock lock(mu_);
      queue_locked(b, std::numeric_limits<int64_t>::min());
      wake_ = true;
    }
    cv_.notify_one();
  }
  reloads_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

QuotaDoor::~QuotaDoor() { stop(); }

std::shared_ptr<QuotaStream> QuotaDoor::open(QuotaStreamWriter* writer) {
  MutexLock lock(mu_);
  if (stopped_) return nullptr;
  auto stream = std::make_shared<QuotaStream>(next_id_++, writer);
  streams_[stream->id()].stream = stream;
  streams_total_.fetch_add(1, std::memory_order_relaxed);
  return stream;
}

absl::Status QuotaDoor::report(
    QuotaStream& stream, const rlqs_pb::RateLimitQuotaUsageReports& message) {
  reports_.fetch_add(1, std::memory_order_relaxed);
  const auto bad = [&](absl::Status s) {
    bad_reports_.fetch_add(1, std::memory_order_relaxed);
    return s;
  };
  if (absl::Status s = validate(message, stream.domain()); !s.ok()) {
    return bad(std::move(s));
  }
  const std::string& name =
      stream.domain().empty() ? message.domain() : stream.domain();
  std::shared_ptr<QuotaStream> self;
  std::shared_ptr<const Served> served;
  {
    MutexLock lock(mu_);
    if (stopped_) {
      return absl::UnavailableError(
          "StreamRateLimitQuotas: the server is shutting down");
    }
    auto it = streams_.find(stream.id());
    if (it == streams_.end()) {
      return absl::InternalError("StreamRateLimitQuotas: stream not open");
    }
    self = it->second.stream;
    served = served_;
  }
  const RlqsConfig& config = served->config;
  if (config.domains.empty()) {
    return bad(absl::NotFoundError(
        absl::StrCat("StreamRateLimitQuotas: unknown domain \"", name,
                     "\" (this server has no rlqs domains configured)")));
  }
  const RlqsDomain* domain = config.find(name);
  if (domain == nullptr &&
      config.unknown_domain == RlqsUnknownDomain::kNotFound) {
    return bad(absl::NotFoundError(
        absl::StrCat("StreamRateLimitQuotas: unknown domain \"", name, "\"")));
  }
  const int64_t now = clock_.now_ms();
  if (stream.domain().empty()) stream.domain() = message.domain();

  Pushes pushes;
  std::vector<std::shared_ptr<Budget>> touched;
  // Budgets a bucket of this message left (after a reload): queued, not
  // assigned here.
  std::vector<std::shared_ptr<Budget>> left;
  std::vector<int64_t> left_due;
  int64_t blanket_due = kNever;
  const size_t di = domain != nullptr
                        ? static_cast<size_t>(domain - config.domains.data())
                        : 0;
  for (const auto& u : message.bucket_quota_usages()) {
    RlqsBucketId id;
    for (const auto& [k, v] : u.bucket_id().bucket()) id.emplace(k, v);
    // The bucket id's own key (collision-free, key order).
    const std::string bucket_key = rlqs_bucket_key(id);
    const std::string client = absl::StrCat(stream.id(), "/", bucket_key);
    const auto allowed = static_cast<int64_t>(u.num_requests_allowed());
    const auto denied = static_cast<int64_t>(u.num_requests_denied());
    std::optional<RlqsRuleMatch> match;
    if (domain != nullptr) match = match_rlqs_bucket(*domain, id);
    const RlqsBucketRule* rule =
        match.has_value() ? &domain->buckets[match->rule] : nullptr;
    if (domain != nullptr) {
      Counters& c =
          *served->counters[di][match.has_value() ? match->rule
                                                  : domain->buckets.size()];
      c.allowed.fetch_add(allowed, std::memory_order_relaxed);
      c.denied.fetch_add(denied, std::memory_order_relaxed);
    }
    if (stream.idle_for(bucket_key, allowed + denied > 0, now,
                        config.abandon_idle_ms)) {
      abandon(stream, bucket_key, now);
      pushes[self].push_back(abandon_action(u.bucket_id()));
      abandoned_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (rule == nullptr || !rule->limit.has_value()) {
      // A budget's bucket until a reload: it leaves the budget.
      if (std::shared_ptr<Budget> was = leave_budget(stream.id(), client);
          was != nullptr) {
        left_due.push_back(forget_in(*was, client, now));
        left.push_back(std::move(was));
      }
      const RlqsBlanket blanket = rule != nullptr     ? rule->blanket
                                  : domain != nullptr ? domain->unmatched
                                                      : RlqsBlanket::kAllowAll;
      const int64_t ttl_s = rule != nullptr     ? rule->assignment_ttl_s
                            : domain != nullptr ? domain->assignment_ttl_s
                                                : kDefaultRlqsAssignmentTtlS;
      Action a = blanket_action(u.bucket_id(), blanket, ttl_s);
      if (stream.set_blanket(bucket_key, a, ttl_s * 1000, now)) {
        pushes[self].push_back(std::move(a));
        blanket_due = std::min(blanket_due, now + ttl_s * 1000 / 2);
      }
      continue;
    }
    // A blanket bucket until a reload: no more blanket refreshes.
    stream.forget_blanket(bucket_key);
    std::shared_ptr<Budget> budget;
    while (true) {
      std::shared_ptr<Budget> was;
      absl::StatusOr<std::shared_ptr<Budget>> found =
          budget_for(*served, *domain, *match, stream.id(), client, &was);
      if (!found.ok()) {
        // What this message reported so far is left to the pusher.
        std::vector<int64_t> due;
        for (const std::shared_ptr<Budget>& t : touched) {
          MutexLock lock(t->mu);
          due.push_back(due_locked(*t));
        }
        queue(touched, due, blanket_due, stream.id());
        queue(left, left_due, kNever, stream.id());
        return found.status();
      }
      budget = *std::move(found);
      if (was != nullptr) {
        // Moved by a reload. Envoy keeps a token bucket whose fill interval
        // alone changed (at its old rate): a DENY_ALL first, so the new
        // budget's bucket starts afresh (and is paid as a new client's).
        left_due.push_back(forget_in(*was, client, now));
        if (was->fill_interval_s != budget->fill_interval_s) {
          std::vector<Action> deny;
          deny.push_back(blanket_action(u.bucket_id(), RlqsBlanket::kDenyAll,
                                        rule->assignment_ttl_s));
          assignments_.fetch_add(
              static_cast<int64_t>(self->push(std::move(deny))),
              std::memory_order_relaxed);
        }
        left.push_back(std::move(was));
      }
      Budget& b = *budget;
      MutexLock lock(b.mu);
      if (b.dropped) continue;  // dropped while idle, just now: a new one
      // A client id names its stream and bucket id: its target never
      // changes (and the bucket id, a protobuf map, is copied once).
      if (b.targets.find(client) == b.targets.end()) {
        b.targets.emplace(client, Target{self, u.bucket_id()});
      }
      b.budget
          .report(client, allowed, denied,
                  u.time_elapsed().seconds() * 1000 +
                      u.time_elapsed().nanos() / 1'000'000,
                  now)
          .IgnoreError();  // validated above
      break;
    }
    if (std::find(touched.begin(), touched.end(), budget) == touched.end()) {
      touched.push_back(std::move(budget));
    }
  }
  // Each budget the message reported is assigned once, after all of its
  // usages: several buckets of one shared budget (and a bucket repeated)
  // get one assignment each from the whole message's demands.
  std::vector<int64_t> due;
  due.reserve(touched.size());
  for (const std::shared_ptr<Budget>& budget : touched) {
    Budget& b = *budget;
    MutexLock lock(b.mu);
    assign_locked(b, now, pushes);
    due.push_back(due_locked(b));
  }
  push(pushes);
  queue(touched, due, blanket_due, stream.id());
  queue(left, left_due, kNever, stream.id());
  return absl::OkStatus();
}

void QuotaDoor::queue(const std::vector<std::shared_ptr<Budget>>& budgets,
                      const std::vector<int64_t>& due_ms,
                      int64_t blanket_due_ms, int64_t stream_id) {
  bool wake = false;
  {
    MutexLock lock(mu_);
    for (size_t i = 0; i < budgets.size(); ++i) {
      wake = queue_locked(budgets[i], due_ms[i]) || wake;
    }
    if (blanket_due_ms != kNever) {
      auto it = streams_.find(stream_id);
      if (it != streams_.end()) {
        wake = queue_blankets_locked(it, blanket_due_ms) || wake;
      }
    }
  }
  // Only when something is due before the pusher means to look.
  if (wake) cv_.notify_one();
}

bool QuotaDoor::queue_locked(const std::shared_ptr<Budget>& b, int64_t due_ms,
                             bool wake) {
  if (due_ms == kNever || b->queued_ms <= due_ms) return false;
  if (b->queued_ms != kNever) due_.erase({b->queued_ms, b});
  due_.emplace(due_ms, b);
  b->queued_ms = due_ms;
  if (!wake || due_ms >= pusher_due_ms_) return false;
  wake_ = true;
  return true;
}

bool QuotaDoor::queue_blankets_locked(std::map<int64_t, Open>::iterator it,
                                      int64_t due_ms, bool wake) {
  Open& o = it->second;
  if (due_ms == kNever || o.blanket_queued_ms <= due_ms) return false;
  if (o.blanket_queued_ms != kNever) {
    blanket_due_.erase({o.blanket_queued_ms, it->first});
  }
  blanket_due_.emplace(due_ms, it->first);
  o.blanket_queued_ms = due_ms;
  if (!wake || due_ms >= pusher_due_ms_) return false;
  wake_ = true;
  return true;
}

absl::StatusOr<std::shared_ptr<QuotaDoor::Budget>> QuotaDoor::create_budget(
    const RlqsDomain& domain, const RlqsBucketRule& r, const std::string& key,
    int64_t requests) {
  const int64_t ttl_ms = r.assignment_ttl_s * 1000;
  const QuotaBudgetOptions options{
      .fill_interval_s = r.limit->fill_interval_s,
      .ttl_s = r.assignment_ttl_s,
      .delivery_slack_ms = std::min<int64_t>(1000, ttl_ms / 4)};
  absl::StatusOr<QuotaBudget> created = QuotaBudget::create(options);
  if (!created.ok()) return created.status();
  auto budget =
      std::make_shared<Budget>(*std::move(created), domain.domain, key,
                               r.identity, r.limit->fill_interval_s, requests);
  std::weak_ptr<Budget> weak = budget;
  budget->share = shares_->track(QuotaBudgetRef{
      .domain = domain.domain,
      .budget_key = key,
      .limit = *r.limit,
      .commit_ms = ttl_ms + options.delivery_slack_ms,
      .usage = [weak](int64_t now_ms) -> std::optional<QuotaUsage> {
        std::shared_ptr<Budget> b = weak.lock();
        if (b == nullptr) return std::nullopt;
        MutexLock lock(b->mu);
        return QuotaUsage{.committed = b->budget.committed(now_ms),
                          .demand = b->budget.demand(),
                          .limit = b->limit};
      },
      .changed =
          [this, weak] {
            std::shared_ptr<Budget> b = weak.lock();
            if (b == nullptr) return;
            b->share_moved.store(true, std::memory_order_release);
            {
              MutexLock lock(mu_);
              // First in the queue, whatever it waits for.
              queue_locked(b, std::numeric_limits<int64_t>::min());
              wake_ = true;
            }
            cv_.notify_one();
          }});
  return budget;
}

absl::StatusOr<std::shared_ptr<QuotaDoor::Budget>> QuotaDoor::budget_for(
    const Served& served, const RlqsDomain& domain, const RlqsRuleMatch& match,
    int64_t stream_id, const std::string& client,
    std::shared_ptr<Budget>* left) {
  MutexLock lock(mu_);
  std::shared_ptr<Budget>& slot = budgets_[{domain.domain, match.budget_key}];
  if (slot == nullptr) {
    const RlqsBucketRule& rule = domain.buckets[match.rule];
    // The requests of the block in force, which a reload since `served`
    // was read may have changed (the budget would miss the change).
    int64_t requests = rule.limit->requests;
    if (&served != served_.get()) {
      if (const RlqsDomain* d = served_->config.find(domain.domain)) {
        for (const RlqsBucketRule& r : d->buckets) {
          if (r.identity == rule.identity) requests = r.limit->requests;
        }
      }
    }
    absl::StatusOr<std::shared_ptr<Budget>> created =
        create_budget(domain, rule, match.budget_key, requests);
    if (!created.ok()) {
      budgets_.erase({domain.domain, match.budget_key});
      return created.status();
    }
    slot = *std::move(created);
  }
  auto it = streams_.find(stream_id);
  if (it != streams_.end()) {
    std::shared_ptr<Budget>& mine = it->second.clients[client];
    if (mine != nullptr && mine != slot) *left = std::move(mine);
    mine = slot;
  }
  return slot;
}

std::shared_ptr<QuotaDoor::Budget> QuotaDoor::leave_budget(
    int64_t stream_id, const std::string& client) {
  MutexLock lock(mu_);
  auto it = streams_.find(stream_id);
  if (it == streams_.end()) return nullptr;
  auto c = it->second.clients.find(client);
  if (c == it->second.clients.end()) return nullptr;
  std::shared_ptr<Budget> was = std::move(c->second);
  it->second.clients.erase(c);
  return was;
}

int64_t QuotaDoor::forget_in(Budget& b, const std::string& client,
                             int64_t now_ms) {
  MutexLock lock(b.mu);
  b.budget.forget(client, now_ms);
  b.targets.erase(client);
  return due_locked(b);
}

void QuotaDoor::abandon(QuotaStream& stream, const std::string& bucket_key,
                        int64_t now_ms) {
  stream.forget_blanket(bucket_key);
  const std::string client = absl::StrCat(stream.id(), "/", bucket_key);
  std::shared_ptr<Budget> budget;
  {
    MutexLock lock(mu_);
    auto it = streams_.find(stream.id());
    if (it == streams_.end()) return;
    auto c = it->second.clients.find(client);
    if (c == it->second.clients.end()) return;
    budget = std::move(c->second);
    it->second.clients.erase(c);
  }
  int64_t due = kNever;
  {
    MutexLock lock(budget->mu);
    budget->budget.abandon(client, now_ms);
    budget->targets.erase(client);
    due = due_locked(*budget);
  }
  queue({budget}, {due}, kNever, stream.id());
}

void QuotaDoor::drop_idle(const std::vector<std::shared_ptr<Budget>>& idle) {
  if (idle.empty()) return;
  MutexLock lock(mu_);
  const int64_t now = clock_.now_ms();
  for (const std::shared_ptr<Budget>& b : idle) {
    auto it = budgets_.find({b->domain, b->key});
    if (it == budgets_.end() || it->second != b) continue;
    MutexLock budget_lock(b->mu);
    if (!b->budget.idle(now)) continue;
    b->dropped = true;
    budgets_.erase(it);
    if (b->queued_ms != kNever) {
      due_.erase({b->queued_ms, b});
      b->queued_ms = kNever;
    }
  }
}

void QuotaDoor::assign_locked(Budget& b, int64_t now_ms, Pushes& out) {
  const std::optional<int64_t> share = b.share->at(now_ms, b.limit);
  b.waiting = !share.has_value();
  if (b.waiting) return;  // assigned when the share moves
  // Fenced: nothing committed, the clients lowered as their refreshes come
  // due (a beat answered in between lifts it; the next assign raises).
  absl::StatusOr<std::vector<QuotaSend>> sends =
      *share == 0 && b.share->fenced(now_ms) ? b.budget.hold(now_ms)
                                             : b.budget.assign(*share, now_ms);
  if (!sends.ok()) return;  // a share out of range: nothing sent
  for (const QuotaSend& s : *sends) {
    auto it = b.targets.find(s.client_id);
    if (it == b.targets.end()) continue;
    std::shared_ptr<QuotaStream> stream = it->second.stream.lock();
    if (stream == nullptr) continue;
    out[stream].push_back(quota_action(it->second.bucket_id, s.assignment));
  }
}

void QuotaDoor::push(Pushes& pushes) {
  for (auto& [stream, actions] : pushes) {
    assignments_.fetch_add(
        static_cast<int64_t>(stream->push(std::move(actions))),
        std::memory_order_relaxed);
  }
}

void QuotaDoor::close(QuotaStream& stream) {
  Open open;
  {
    MutexLock lock(mu_);
    auto it = streams_.find(stream.id());
    if (it == streams_.end()) return;
    open = std::move(it->second);
    streams_.erase(it);
    if (open.blanket_queued_ms != kNever) {
      blanket_due_.erase({open.blanket_queued_ms, stream.id()});
    }
  }
  const int64_t now = clock_.now_ms();
  std::vector<std::shared_ptr<Budget>> forgotten;
  std::vector<int64_t> due;
  for (auto& [client, budget] : open.clients) {
    MutexLock lock(budget->mu);
    budget->budget.forget(client, now);
    budget->targets.erase(client);
    forgotten.push_back(budget);
    due.push_back(due_locked(*budget));
  }
  // After the forgets, so the pusher's next look sees them: each budget is
  // due now (unless it waits for a share).
  queue(forgotten, due, kNever, stream.id());
}

void QuotaDoor::pusher_loop() {
  MutexLock lock(mu_);
  while (!stopped_) {
    wake_ = false;
    pusher_due_ms_ = kNever;  // a report while it looks wakes it again
    const int64_t now = clock_.now_ms();
    // What is due: taken off the queues, queued again below.
    std::vector<std::shared_ptr<Budget>> budgets;
    while (!due_.empty() && due_.begin()->first <= now) {
      auto node = due_.extract(due_.begin());
      node.value().second->queued_ms = kNever;
      budgets.push_back(std::move(node.value().second));
    }
    std::vector<std::shared_ptr<QuotaStream>> streams;
    std::vector<int64_t> ids;
    while (!blanket_due_.empty() && blanket_due_.begin()->first <= now) {
      const int64_t id = blanket_due_.begin()->second;
      blanket_due_.erase(blanket_due_.begin());
      auto it = streams_.find(id);
      if (it == streams_.end()) continue;
      it->second.blanket_queued_ms = kNever;
      streams.push_back(it->second.stream);
      ids.push_back(id);
    }
    lock.unlock();

    Pushes pushes;
    std::vector<int64_t> due(budgets.size(), kNever);
    std::vector<std::shared_ptr<Budget>> idle;
    for (size_t i = 0; i < budgets.size(); ++i) {
      Budget& b = *budgets[i];
      const bool moved = b.share_moved.exchange(false);
      MutexLock budget_lock(b.mu);
      if (moved || (!b.waiting && b.budget.next_due_ms() <= now)) {
        assign_locked(b, now, pushes);
        if (b.budget.idle(now)) idle.push_back(budgets[i]);
      }
      if (!b.waiting) due[i] = b.budget.next_due_ms();
    }
    push(pushes);
    drop_idle(idle);
    idle.clear();
    std::vector<int64_t> blanket_due(streams.size(), kNever);
    for (size_t i = 0; i < streams.size(); ++i) {
      int64_t sent = 0;
      blanket_due[i] = streams[i]->refresh_blankets(now, &sent);
      assignments_.fetch_add(sent, std::memory_order_relaxed);
    }
    streams.clear();  // not under mu_: a closed stream's last owner

    lock.lock();
    // Each at its own next time, or earlier if a report queued it
    // meanwhile; the pusher reads the queues' fronts below, so these need
    // not wake it.
    for (size_t i = 0; i < budgets.size(); ++i) {
      queue_locked(budgets[i], due[i], /*wake=*/false);
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = streams_.find(ids[i]);
      if (it != streams_.end()) {
        queue_blankets_locked(it, blanket_due[i], /*wake=*/false);
      }
    }
    budgets.clear();  // budgets_ owns them
    if (stopped_ || wake_) continue;
    int64_t next = kNever;
    if (!due_.empty()) next = due_.begin()->first;
    if (!blanket_due_.empty()) {
      next = std::min(next, blanket_due_.begin()->first);
    }
    if (next <= clock_.now_ms()) continue;
    pusher_due_ms_ = next;
    const int64_t wait_ms = wait_ms_until(clock_, next, 1000);
    NativeWait native(mu_);
    cv_.wait_for(
        native.lock(), std::chrono::milliseconds(wait_ms),
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopped_ || wake_; });
  }
}

void QuotaDoor::stop() {
  std::vector<std::shared_ptr<QuotaStream>> streams;
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    for (const auto& [id, o] : streams_) streams.push_back(o.stream);
  }
  cv_.notify_one();
  if (pusher_.joinable()) pusher_.join();
  shares_->stop();
  for (const auto& s : streams) {
    s->finish(
        grpc::Status(grpc::StatusCode::UNAVAILABLE,
                     "StreamRateLimitQuotas: the server is shutting down"));
  }
}

size_t QuotaDoor::streams_open() {
  MutexLock lock(mu_);
  return streams_.size();
}

size_t QuotaDoor::budgets() {
  MutexLock lock(mu_);
  return budgets_.size();
}

}  // namespace throttlekit::server
