// sim/rlqs_server.cc: a server of the rlqs fleet (see the header).

#include "sim/rlqs_server.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "heartbeat_share.h"

namespace throttlekit::sim::rlqs_internal {
namespace {

using server::QuotaBudget;
using server::QuotaSend;

// The heartbeat step's range of inflight, local_limit and demand
// (heartbeat_share.cc clamps to it).
constexpr int64_t kMaxSlots = int64_t{1} << 30;

int64_t slots(int64_t v) { return std::clamp<int64_t>(v, 0, kMaxSlots); }

}  // namespace

int64_t lease_ttl_ms(const RlqsFleetConfig& config) {
  return rlqs_commit_ms(config) +
         std::max<int64_t>(3 * config.heartbeat_ms,
                           server::kMinBeatToleranceMs) +
         config.fence_margin_ms;
}

Server::Server(int index, const RlqsFleetConfig& config, EventLoop& loop,
               std::unique_ptr<NodeClock> clock, int64_t drift_ppm,
               std::shared_ptr<SimCoordinator> store, ServerHost& host)
    : index_(index),
      config_(config),
      loop_(loop),
      host_(host),
      clock_(std::move(clock)),
      drift_ppm_(drift_ppm),
      store_(std::move(store)),
      commit_ms_(rlqs_commit_ms(config)),
      options_{
          .lease_ttl_ms = lease_ttl_ms(config),
          .aggregate = HeartbeatAggregate::kMin,
          .handoff = config.handoff,
          .demand_proportional = true,
      } {
  for (int b = 0; b < config.budgets; ++b) {
    keys_.push_back(absl::StrCat("throttlekit-rlqs:4:edge2:b", b));
  }
}

void Server::start() {
  node_ = absl::StrCat("s", index_, "#", incarnation_);
  up_ = true;
  seq_ = 0;
  budgets_.clear();
  budgets_.resize(static_cast<size_t>(config_.budgets));
  streams_.clear();
  pusher_due_ms_ = kNever;
  wake();  // the pusher's first look
}

std::vector<std::pair<int, std::unique_ptr<ServedBudget>>> Server::crash() {
  std::vector<std::pair<int, std::unique_ptr<ServedBudget>>> lost;
  for (int b = 0; b < config_.budgets; ++b) {
    std::unique_ptr<ServedBudget>& slot = budgets_[static_cast<size_t>(b)];
    if (slot != nullptr) lost.emplace_back(b, std::move(slot));
  }
  up_ = false;
  ++incarnation_;
  return lost;
}

int64_t Server::committed(int b) const {
  const ServedBudget* bd =
      up_ ? budgets_[static_cast<size_t>(b)].get() : nullptr;
  return bd != nullptr ? bd->budget.committed(clock_->now_ms()) : 0;
}

// The true delay until the server's clock reads `ms` (at least 1 us: a
// timer that finds the clock short of it looks again).
int64_t Server::until(int64_t ms) const {
  const int64_t d = (ms - kSimEpochMs) * 1000 - clock_->now_ns() / 1000;
  return std::max<int64_t>(0, d) * 1'000'000 / (1'000'000 + drift_ppm_) + 1;
}

// Budget `b` if it is still the one numbered `serial` (not dropped, the
// server not crashed since); else null.
ServedBudget* Server::find(int b, uint64_t serial) {
  ServedBudget* bd = budgets_[static_cast<size_t>(b)].get();
  return bd != nullptr && bd->serial == serial ? bd : nullptr;
}

// What the budget's share reads at `now_ms` (ShareLease::at; without
// self-fencing, the share applied whatever the lease).
std::optional<int64_t> Server::share_at(const ServedBudget& bd,
                                        int64_t now_ms) const {
  if (config_.self_fencing) return bd.lease.at(now_ms);
  if (!bd.lease.granted) return std::nullopt;
  return bd.lease.share;
}

ServedBudget& Server::budget_of(int b) {
  std::unique_ptr<ServedBudget>& slot = budgets_[static_cast<size_t>(b)];
  if (slot == nullptr) {
    // The door's create_budget (also after an idle one was dropped), and
    // HeartbeatShare::track: its first beat at once, after this report's
    // assignment.
    absl::StatusOr<QuotaBudget> created =
        QuotaBudget::create({.fill_interval_s = config_.fill_interval_s,
                             .ttl_s = config_.ttl_s,
                             .delivery_slack_ms = rlqs_slack_ms(config_)});
    if (!created.ok()) fail_setup(created.status());
    slot = std::make_unique<ServedBudget>(*std::move(created),
                                          host_.next_serial());
    slot->lease.commit_ms = commit_ms_;
    slot->lease.lease_ttl_ms = options_.lease_ttl_ms;
    slot->lease.margin_ms = config_.fence_margin_ms;
    const uint64_t serial = slot->serial;
    loop_.after(0, [this, b, serial] { beat(b, serial); });
  }
  return *slot;
}

// HeartbeatShare::beat and its completion. A dropped budget's slot beats
// no more (its usage is gone); a beat of it in flight lands nowhere.
void Server::beat(int b, uint64_t serial) {
  ServedBudget* bd = find(b, serial);
  if (bd == nullptr || host_.ended()) return;
  const int64_t now = clock_->now_ms();
  if (bd->in_flight) {
    bd->overdue = true;  // sent when the one in flight completes
    return;
  }
  if (bd->next_beat_ms > now) {
    loop_.after(until(bd->next_beat_ms),
                [this, b, serial] { beat(b, serial); });
    return;
  }
  bd->next_beat_ms = now + config_.heartbeat_ms;
  bd->in_flight = true;
  // The snapshot: the applied generation, then the commitments.
  const int64_t applied = bd->lease.generation;
  const int64_t committed = bd->budget.committed(now);
  const HeartbeatReport report{
      .node_id = node_,
      .seq = ++seq_,
      .applied_gen = applied,
      .inflight = slots(config_.ttl_accounting ? committed : bd->lease.share),
      .local_limit = slots(rlqs_budget_limit(config_, b)),
      .demand = slots(bd->budget.demand())};
  store_->heartbeat_async(
      keys_[static_cast<size_t>(b)], report, options_, 0,
      [this, b, serial, sent_ms = now](absl::StatusOr<HeartbeatGrant> g) {
        granted(b, serial, sent_ms, std::move(g));
      });
  loop_.after(until(bd->next_beat_ms), [this, b, serial] { beat(b, serial); });
}

void Server::granted(int b, uint64_t serial, int64_t sent_ms,
                     absl::StatusOr<HeartbeatGrant> g) {
  ServedBudget* bd = find(b, serial);
  if (bd == nullptr) return;  // dropped, or the server died meanwhile
  bd->in_flight = false;
  bool moved = false;
  if (g.ok() && !g->stale) {
    ++host_.result().rlqs.beats;
    bd->lease.apply(*g, sent_ms);
    moved = share_at(*bd, clock_->now_ms()) != bd->served;
    host_.trace_line(absl::StrCat(loop_.now_us(), " ", node_, " b", b,
                                  " share ", g->share, " gen ", g->generation));
  } else {
    ++host_.result().rlqs.failed_beats;
  }
  if (moved) {
    // `changed`: the pusher assigns the budget at once.
    bd->share_moved = true;
    wake();
  }
  if (bd->overdue) {
    bd->overdue = false;
    loop_.after(1000, [this, b, serial] { beat(b, serial); });
  }
}

// The door's assign_locked: what it sends goes into `out`.
void Server::assign(int b, int64_t now, Pushes& out) {
  ServedBudget& bd = *budgets_[static_cast<size_t>(b)];
  const std::optional<int64_t> share = share_at(bd, now);
  bd.served = share;
  bd.waiting = !share.has_value();
  if (bd.waiting) return;
  SimResult::Rlqs& tally = host_.result().rlqs;
  // The door's: a fenced share holds the clients (QuotaBudget::hold).
  const bool fenced = config_.self_fencing && bd.lease.fenced(now);
  if (fenced) ++tally.fenced_assigns;
  absl::StatusOr<std::vector<QuotaSend>> sends =
      fenced ? bd.budget.hold(now) : bd.budget.assign(*share, now);
  if (!sends.ok()) fail_setup(sends.status());
  for (const QuotaSend& send : *sends) {
    const auto it = bd.targets.find(send.client_id);
    if (it == bd.targets.end()) continue;
    out[it->second].emplace_back(b, send.assignment);
    ++tally.assignments;
    host_.trace_line(absl::StrCat(loop_.now_us(), " ", node_, " b", b, " ",
                                  send.client_id, " <- ",
                                  send.assignment.tokens));
  }
  host_.assigned(b, index_);
}

void Server::push(Pushes& pushes) {
  for (auto& [stream, response] : pushes) {
    host_.respond(stream, std::move(response));
  }
}

// Wakes the pusher: it looks at once (the door's wake).
void Server::wake() {
  const uint64_t look = ++look_;
  const int inc = incarnation_;
  loop_.after(0, [this, inc, look] { pusher_look(inc, look); });
}

// One pass of the door's pusher loop: each budget whose share moved, or
// that is due, is assigned; one then idle (nobody reports it, nothing it
// sent counts) is dropped; the pusher looks again when the next budget is
// due, within a second. (The door keeps its budgets in a queue by due
// time; assigning those due at each look is the same.)
void Server::pusher_look(int inc, uint64_t look) {
  if (!up_ || incarnation_ != inc || look_ != look) return;
  const int64_t now = clock_->now_ms();
  int64_t next = kNever;
  std::vector<int> idle;
  Pushes pushes;
  for (int b = 0; b < config_.budgets; ++b) {
    ServedBudget* bd = budgets_[static_cast<size_t>(b)].get();
    if (bd == nullptr) continue;
    const bool moved = std::exchange(bd->share_moved, false);
    if (moved || (!bd->waiting && bd->budget.next_due_ms() <= now)) {
      assign(b, now, pushes);
      if (bd->budget.idle(now)) idle.push_back(b);
    }
    if (!bd->waiting) next = std::min(next, bd->budget.next_due_ms());
  }
  push(pushes);
  for (const int b : idle) {
    std::unique_ptr<ServedBudget>& slot = budgets_[static_cast<size_t>(b)];
    if (slot == nullptr || !slot->budget.idle(now)) continue;
    ++host_.result().rlqs.budgets_dropped;
    host_.trace_line(
        absl::StrCat(loop_.now_us(), " ", node_, " b", b, " dropped"));
    slot.reset();
  }
  pusher_due_ms_ = next;
  if (host_.ended()) return;  // the run is over: the loop drains
  const int64_t wait_ms =
      next == kNever ? 1000 : std::clamp<int64_t>(next - now, 1, 1000);
  loop_.after(until(now + wait_ms),
              [this, inc, look] { pusher_look(inc, look); });
}

void Server::on_report(int64_t id, const Report& report) {
  const int64_t now = clock_->now_ms();
  OpenStream& open = streams_[id];
  std::vector<int> touched;
  Pushes pushes;
  for (const Usage& u : report) {
    std::string client = absl::StrCat(id, "/b", u.budget);
    if (idle_for(open, u.budget, u.allowed + u.denied > 0, now)) {
      abandon(open, u.budget, client, now);
      pushes[id].emplace_back(u.budget, std::nullopt);
      continue;
    }
    ServedBudget& bd = budget_of(u.budget);
    bd.targets[client] = id;
    (void)bd.budget.report(client, u.allowed, u.denied, u.elapsed_ms, now);
    const std::pair<int, std::string> entry(u.budget, std::move(client));
    if (std::find(open.clients.begin(), open.clients.end(), entry) ==
        open.clients.end()) {
      open.clients.push_back(entry);
    }
    if (std::find(touched.begin(), touched.end(), u.budget) == touched.end()) {
      touched.push_back(u.budget);
    }
  }
  int64_t due = kNever;
  for (const int b : touched) {
    assign(b, now, pushes);
    const ServedBudget& bd = *budgets_[static_cast<size_t>(b)];
    if (!bd.waiting) due = std::min(due, bd.budget.next_due_ms());
  }
  push(pushes);
  // Only when something is due before the pusher means to look.
  if (due < pusher_due_ms_) wake();
}

// QuotaStream::idle_for: whether bucket `b` has been reported with no
// requests for abandonIdle (then it is forgotten here).
bool Server::idle_for(OpenStream& open, int b, bool used, int64_t now) const {
  if (used || config_.abandon_idle_ms <= 0) {
    open.idle_since.erase(b);
    return false;
  }
  const auto it = open.idle_since.try_emplace(b, now).first;
  if (now - it->second < config_.abandon_idle_ms) return false;
  open.idle_since.erase(it);
  return true;
}

// The door's abandon: the bucket's client is abandoned in its budget
// (forgotten, its records retired: what it was sent counts until it
// expires, and if it returns it starts from nothing), and the budget
// queued for the pusher (woken if that is before it means to look).
void Server::abandon(OpenStream& open, int b, const std::string& client,
                     int64_t now) {
  ++host_.result().rlqs.abandoned;
  host_.trace_line(
      absl::StrCat(loop_.now_us(), " s", index_, " abandons ", client));
  const std::pair<int, std::string> entry(b, client);
  const auto it = std::find(open.clients.begin(), open.clients.end(), entry);
  if (it == open.clients.end()) return;
  open.clients.erase(it);
  ServedBudget* bd = budgets_[static_cast<size_t>(b)].get();
  if (bd == nullptr) return;
  bd->budget.abandon(client, now);
  bd->targets.erase(client);
  if (!bd->waiting && bd->budget.next_due_ms() < pusher_due_ms_) wake();
}

void Server::close_stream(int inc, int64_t id) {
  if (!up_ || incarnation_ != inc) return;
  const auto it = streams_.find(id);
  if (it == streams_.end()) return;
  const std::vector<std::pair<int, std::string>> clients =
      std::move(it->second.clients);
  streams_.erase(it);
  const int64_t now = clock_->now_ms();
  for (const auto& [b, client] : clients) {
    ServedBudget* bd = budgets_[static_cast<size_t>(b)].get();
    if (bd == nullptr) continue;
    bd->budget.forget(client, now);
    bd->targets.erase(client);
  }
  wake();
}

}  // namespace throttlekit::sim::rlqs_internal
