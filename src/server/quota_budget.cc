// src/server/quota_budget.cc: the quota door's allocation core
// (quota_budget.h).

#include "quota_budget.h"

#include <algorithm>
#include <utility>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl_view.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/water_filling.h"

namespace throttlekit::server {
namespace {

// The largest count one report may carry for a bucket.
constexpr int64_t kMaxReportedCount = int64_t{1} << 40;
// The longest time one report may cover.
constexpr int64_t kMaxElapsedMs = 86'400'000;
// The largest share: the wire's uint32 max_tokens.
constexpr int64_t kMaxShare = 4'294'967'295;

}  // namespace

int64_t QuotaBudget::Records::at(int64_t now_ms) const {
  for (const Record& r : list) {
    if (r.expires_ms > now_ms) return r.tokens;
  }
  return 0;
}

void QuotaBudget::Records::add(Record r) {
  // A record no later-expiring one at least as large dominates stays; those
  // it dominates go.
  for (const Record& o : list) {
    if (o.tokens >= r.tokens && o.expires_ms >= r.expires_ms) return;
  }
  std::erase_if(list, [&](const Record& o) {
    return r.tokens >= o.tokens && r.expires_ms >= o.expires_ms;
  });
  list.insert(std::upper_bound(list.begin(), list.end(), r,
                               [](const Record& a, const Record& b) {
                                 return a.expires_ms < b.expires_ms;
                               }),
              r);
}

void QuotaBudget::Records::drop_expired(int64_t now_ms) {
  std::erase_if(list, [&](const Record& r) { return r.expires_ms <= now_ms; });
}

absl::StatusOr<QuotaBudget> QuotaBudget::create(
    const QuotaBudgetOptions& options) {
  if (options.fill_interval_s < 1 || options.fill_interval_s > 86'400) {
    return absl::InvalidArgumentError(
        absl::StrCat("QuotaBudget: fill_interval_s must be in [1, 86400]; got ",
                     options.fill_interval_s));
  }
  if (options.ttl_s < 1 || options.ttl_s > 3'600) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QuotaBudget: ttl_s must be in [1, 3600]; got ", options.ttl_s));
  }
  if (options.delivery_slack_ms < 0 ||
      options.delivery_slack_ms > options.ttl_s * 500) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QuotaBudget: delivery_slack_ms must be in [0, ttl_s * 1000 / 2 = ",
        options.ttl_s * 500,
        "] (a refresh sent at half the TTL must arrive "
        "before the TTL ends); got ",
        options.delivery_slack_ms));
  }
  return QuotaBudget(options);
}

int64_t QuotaBudget::demand_per_fill(int64_t allowed, int64_t denied,
                                     int64_t elapsed_ms,
                                     int64_t fill_interval_s) {
  // (allowed + denied) * F_ms * 5 / (max(elapsed, 1 s) * 4), rounded up:
  // up to 2^41 * 2^27 * 5, beyond int64.
  const absl::uint128 num = absl::uint128(static_cast<uint64_t>(allowed) +
                                          static_cast<uint64_t>(denied)) *
                            static_cast<uint64_t>(fill_interval_s) * 1000 * 5;
  const absl::uint128 den = absl::uint128(
      static_cast<uint64_t>(std::max<int64_t>(elapsed_ms, 1000)) * 4);
  const absl::uint128 tokens = (num + den - 1) / den;
  if (tokens > static_cast<uint64_t>(kMaxSafeInteger)) return kMaxSafeInteger;
  return std::max<int64_t>(1, static_cast<int64_t>(absl::Uint128Low64(tokens)));
}

absl::Status QuotaBudget::report(std::string_view client_id, int64_t allowed,
                                 int64_t denied, int64_t elapsed_ms,
                                 int64_t now_ms) {
  const auto count = [](std::string_view field, int64_t v) -> absl::Status {
    if (v < 0 || v > kMaxReportedCount) {
      return absl::InvalidArgumentError(
          absl::StrCat("QuotaBudget::report: ", sv(field),
                       " must be in [0, 2^40]; got ", v));
    }
    return absl::OkStatus();
  };
  if (client_id.empty()) {
    return absl::InvalidArgumentError(
        "QuotaBudget::report: client_id must not be empty");
  }
  if (absl::Status s = count("allowed", allowed); !s.ok()) return s;
  if (absl::Status s = count("denied", denied); !s.ok()) return s;
  if (elapsed_ms < 0 || elapsed_ms > kMaxElapsedMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("QuotaBudget::report: elapsed_ms must be in [0, "
                     "86400000] (a day); got ",
                     elapsed_ms));
  }
  auto it = clients_.find(client_id);
  if (it == clients_.end()) {
    it = clients_.emplace(std::string(client_id), Client{}).first;
  }
  it->second.active = true;
  it->second.demand =
      demand_per_fill(allowed, denied, elapsed_ms, options_.fill_interval_s);
  next_due_ms_ = std::min(next_due_ms_, now_ms);
  return absl::OkStatus();
}

void QuotaBudget::forget(std::string_view client_id, int64_t now_ms) {
  const auto it = clients_.find(client_id);
  if (it == clients_.end() || !it->second.active) return;
  it->second.active = false;
  it->second.capped = false;
  next_due_ms_ = std::min(next_due_ms_, now_ms);
}

void QuotaBudget::abandon(std::string_view client_id, int64_t now_ms) {
  const auto it = clients_.find(client_id);
  if (it == clients_.end()) return;
  retire(it->second);
  it->second.active = false;
  it->second.capped = false;
  next_due_ms_ = std::min(next_due_ms_, now_ms);
}

void QuotaBudget::retire(Client& c) {
  if (!c.records.list.empty()) retired_.push_back(std::move(c.records));
  c.records = Records{};
  c.last.reset();
}

QuotaSend QuotaBudget::send(const std::string& id, Client& c, int64_t tokens,
                            int64_t now_ms) {
  c.records.add({.tokens = tokens,
                 .expires_ms = now_ms + ttl_ms() + options_.delivery_slack_ms});
  c.last = Sent{.tokens = tokens, .sent_ms = now_ms};
  return QuotaSend{.client_id = id,
                   .assignment = {.tokens = tokens,
                                  .fill_interval_s = options_.fill_interval_s,
                                  .ttl_s = options_.ttl_s}};
}

void QuotaBudget::expire(int64_t now_ms) {
  // What has expired goes; a forgotten client goes with its last record.
  for (auto it = clients_.begin(); it != clients_.end();) {
    it->second.records.drop_expired(now_ms);
    if (!it->second.active && it->second.records.list.empty()) {
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
  for (Records& r : retired_) r.drop_expired(now_ms);
  std::erase_if(retired_, [](const Records& r) { return r.list.empty(); });

  // An assignment whose refresh could arrive after the client's TTL ran
  // out may have lapsed there, and the client's next token bucket would
  // start full: retire its records and start it afresh.
  for (auto& [id, c] : clients_) {
    if (c.last.has_value() && lapsed(*c.last, now_ms)) {
      if (c.last->tokens > 0) {
        retire(c);
      } else {
        c.last.reset();
      }
    }
  }
}

void QuotaBudget::schedule() {
  // Due next: the earliest refresh and, for a capped raise, the earliest
  // expiry that lowers a commitment.
  next_due_ms_ = std::numeric_limits<int64_t>::max();
  bool any_active = false;
  bool any_capped = false;
  for (const auto& [id, c] : clients_) {
    if (!c.active) continue;
    any_active = true;
    if (c.last.has_value()) {
      next_due_ms_ = std::min(next_due_ms_, c.last->sent_ms + ttl_ms() / 2);
    }
    any_capped = any_capped || c.capped;
  }
  if (!any_active) {
    // Nobody reports: due when the last record expires, so the owner sees
    // the budget idle (and may drop it).
    int64_t last = 0;
    const auto latest = [&](const Records& r) {
      for (const Record& x : r.list) last = std::max(last, x.expires_ms);
    };
    for (const auto& [id, c] : clients_) latest(c.records);
    for (const Records& r : retired_) latest(r);
    if (last > 0) next_due_ms_ = last;
  }
  if (any_capped) {
    const auto front = [&](const Records& r) {
      if (!r.list.empty() && r.list.front().tokens > 0) {
        next_due_ms_ = std::min(next_due_ms_, r.list.front().expires_ms);
      }
    };
    for (const auto& [id, c] : clients_) front(c.records);
    for (const Records& r : retired_) front(r);
  }
}

std::vector<QuotaSend> QuotaBudget::in_id_order(
    std::vector<std::pair<const std::string*, QuotaSend>> out) {
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return *a.first < *b.first;
  });
  std::vector<QuotaSend> sends;
  sends.reserve(out.size());
  for (auto& [id, s] : out) sends.push_back(std::move(s));
  return sends;
}

std::vector<QuotaSend> QuotaBudget::hold(int64_t now_ms) {
  expire(now_ms);
  std::vector<std::pair<const std::string*, QuotaSend>> out;
  for (auto& [id, c] : clients_) {
    if (!c.active) continue;
    c.capped = false;
    // In force and not yet due for a refresh: kept.
    if (c.last.has_value() && now_ms < c.last->sent_ms + ttl_ms() / 2) {
      continue;
    }
    // Due (or new, or lapsed): DENY_ALL, which commits nothing.
    if (c.last.has_value() && c.last->tokens > 0) retire(c);
    out.emplace_back(&id, send(id, c, 0, now_ms));
  }
  schedule();
  return in_id_order(std::move(out));
}

absl::StatusOr<std::vector<QuotaSend>> QuotaBudget::assign(int64_t share,
                                                           int64_t now_ms) {
  if (share < 0 || share > kMaxShare) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QuotaBudget::assign: share must be in [0, 2^32-1]; got ", share));
  }
  expire(now_ms);

  // The targets: water filling over the active clients' demands.
  std::vector<Client*> active;
  std::vector<const std::string*> ids;
  std::vector<WaterClaim> claims;
  for (auto& [id, c] : clients_) {
    if (!c.active) continue;
    active.push_back(&c);
    ids.push_back(&id);
    claims.push_back({.weight = 1, .demand = c.demand});
  }
  absl::StatusOr<std::vector<int64_t>> targets = water_fill(share, claims);
  if (!targets.ok()) return targets.status();  // not reached: inputs checked
  for (size_t i = 0; i < active.size(); ++i) {
    active[i]->target = (*targets)[i];
    active[i]->capped = false;  // until a raise falls short below
  }

  int64_t total = committed(now_ms);
  std::vector<std::pair<const std::string*, QuotaSend>> out;
  std::vector<bool> sent(active.size(), false);

  // Lowerings: sent at once; the old records go on counting. A client
  // dropping its token bucket for DENY_ALL is retired (its next token
  // bucket starts full), its records still counted.
  for (size_t i = 0; i < active.size(); ++i) {
    Client& c = *active[i];
    if (!c.last.has_value() || c.target >= c.last->tokens) continue;
    if (c.target == 0) retire(c);
    out.emplace_back(ids[i], send(*ids[i], c, c.target, now_ms));
    sent[i] = true;
  }

  // Raises, to the clients holding least first (nothing before DENY_ALL
  // before a token bucket), each up to what the others' commitments leave.
  std::vector<size_t> raises;
  for (size_t i = 0; i < active.size(); ++i) {
    const Client& c = *active[i];
    if (!c.last.has_value() || c.target > c.last->tokens) raises.push_back(i);
  }
  std::stable_sort(raises.begin(), raises.end(), [&](size_t a, size_t b) {
    const auto held = [&](size_t i) {
      return active[i]->last.has_value() ? active[i]->last->tokens : -1;
    };
    return held(a) < held(b);
  });
  for (const size_t i : raises) {
    Client& c = *active[i];
    const int64_t mine = c.records.at(now_ms);
    const int64_t grant =
        std::clamp<int64_t>(share - (total - mine), 0, c.target);
    c.capped = grant < c.target;
    if (c.last.has_value() && grant <= c.last->tokens) continue;
    out.emplace_back(ids[i], send(*ids[i], c, grant, now_ms));
    sent[i] = true;
    total += std::max(mine, grant) - mine;
  }

  // Refreshes: an assignment unchanged for half its TTL is sent again.
  for (size_t i = 0; i < active.size(); ++i) {
    Client& c = *active[i];
    if (sent[i] || !c.last.has_value() ||
        now_ms < c.last->sent_ms + ttl_ms() / 2) {
      continue;
    }
    out.emplace_back(ids[i], send(*ids[i], c, c.last->tokens, now_ms));
  }

  schedule();

  return in_id_order(std::move(out));
}

int64_t QuotaBudget::committed(int64_t now_ms) const {
  int64_t sum = 0;
  for (const auto& [id, c] : clients_) sum += c.records.at(now_ms);
  for (const Records& r : retired_) sum += r.at(now_ms);
  return sum;
}

bool QuotaBudget::idle(int64_t now_ms) const {
  for (const auto& [id, c] : clients_) {
    if (c.active || c.records.at(now_ms) > 0) return false;
  }
  for (const Records& r : retired_) {
    if (r.at(now_ms) > 0) return false;
  }
  return true;
}

int64_t QuotaBudget::demand() const {
  constexpr int64_t kMax = (int64_t{1} << 53) - 1;
  int64_t sum = 0;
  for (const auto& [id, c] : clients_) {
    if (c.active) sum = std::min(kMax, sum + c.demand);
  }
  return sum;
}

int64_t QuotaBudget::committed(std::string_view client_id,
                               int64_t now_ms) const {
  const auto it = clients_.find(client_id);
  return it == clients_.end() ? 0 : it->second.records.at(now_ms);
}

std::optional<QuotaClientView> QuotaBudget::client(std::string_view client_id,
                                                   int64_t now_ms) const {
  const auto it = clients_.find(client_id);
  if (it == clients_.end()) return std::nullopt;
  const Client& c = it->second;
  QuotaClientView v{.active = c.active,
                    .demand = c.demand,
                    .target = c.target,
                    .committed = c.records.at(now_ms),
                    .capped = c.capped};
  if (c.last.has_value() && !lapsed(*c.last, now_ms)) {
    v.holding = c.last->tokens;
    v.last_sent_ms = c.last->sent_ms;
  }
  return v;
}

}  // namespace throttlekit::server
