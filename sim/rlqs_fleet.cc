// sim/rlqs_fleet.cc: the quota door's fleet scenario (see the header and
// docs/simulation.md).

#include "sim/rlqs_fleet.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "sim/event_loop.h"
#include "sim/random.h"
#include "sim/shrink.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "src/server/quota_budget.h"
#include "src/server/share_lease.h"
#include "throttlekit/coordinator/heartbeat_core.h"

namespace throttlekit::sim {
namespace {

using server::QuotaAssignment;
using server::QuotaBudget;
using server::QuotaSend;
using server::ShareLease;

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
// The heartbeat step's range of inflight, local_limit and demand
// (heartbeat_share.cc clamps to it).
constexpr int64_t kMaxSlots = int64_t{1} << 30;
// How long a server takes to notice a broken stream, at most.
constexpr int64_t kMaxNoticeUs = 500'000;

int64_t slots(int64_t v) { return std::clamp<int64_t>(v, 0, kMaxSlots); }

int64_t slack_ms(const RlqsFleetConfig& c) {
  return std::min<int64_t>(1000, c.ttl_s * 1000 / 4);
}

// One budget of one server incarnation: the production QuotaBudget and
// ShareLease, and what HeartbeatShare's slot and the door keep beside them.
struct ServedBudget {
  ServedBudget(QuotaBudget b, uint64_t serial)
      : budget(std::move(b)), serial(serial) {}
  QuotaBudget budget;
  const uint64_t serial;  // unique in the run: a dropped one is gone
  ShareLease lease;
  std::optional<int64_t> served;  // what the share last read as
  bool waiting = true;            // no share yet: nothing assigned
  bool share_moved = false;       // `changed`: the pusher assigns it
  bool in_flight = false;
  bool overdue = false;  // a beat came due while one was in flight
  int64_t next_beat_ms = 0;
  std::map<std::string, int64_t, std::less<>> targets;  // client -> stream
};

// A stream the server has read from (the door's Open and QuotaStream).
struct OpenStream {
  std::vector<std::pair<int, std::string>> clients;  // (budget, client id)
  std::map<int, int64_t> idle_since;  // buckets reported with no requests
};

struct Server {
  std::unique_ptr<NodeClock> clock;
  int64_t drift_ppm = 0;
  std::shared_ptr<SimCoordinator> store;
  int incarnation = 0;
  bool up = true;
  std::string node;  // `s<i>#<incarnation>`
  int64_t seq = 0;   // the beats' sequence, over all of the node's keys
  std::vector<std::unique_ptr<ServedBudget>> budgets;  // null: none now
  std::map<int64_t, OpenStream> streams;
  // The pusher: when it means to look next (server clock; the door's
  // pusher_due_ms_), and the look that counts.
  int64_t pusher_due_ms = kNever;
  uint64_t look = 0;
};

// A crashed incarnation's budget: its assignments count until they expire.
struct Dead {
  const NodeClock* clock;
  int budget;
  std::unique_ptr<ServedBudget> served;
};

// Envoy's bucket in one client (tests/server/rlqs_emulator.h).
struct Bucket {
  enum class Kind { kNone, kDenyAll, kTokenBucket };
  bool created = false;  // hit at least once
  int64_t allowed = 0;
  int64_t denied = 0;
  int64_t last_report_us = 0;
  Kind kind = Kind::kNone;
  int64_t max_tokens = 0;  // = tokens_per_fill
  double tokens = 0;
  double rate_per_us = 0;
  int64_t at_us = 0;
  int64_t expires_us = 0;
  double per_sec = 0;     // the requests' rate while on
  bool on = true;         // on/off demand: requests arrive while on
  uint64_t arrivals = 0;  // the arrival process that counts
};

struct Client {
  std::vector<Bucket> buckets;
  int64_t stream = -1;  // none open
  int last_server = -1;
};

struct Usage {
  int budget;
  int64_t allowed, denied, elapsed_ms;
};
using Report = std::vector<Usage>;
// A bucket action: an assignment, or nullopt for an abandon.
using Response = std::vector<std::pair<int, std::optional<QuotaAssignment>>>;

struct Stream {
  int client;
  int server;
  int incarnation;
  bool dead = false;
  int64_t up_last_us = 0;    // FIFO: the last delivery to the server
  int64_t down_last_us = 0;  // and to the client
};

class Run : private World {
 public:
  Run(uint64_t seed, const RlqsFleetConfig& c, bool keep_trace)
      : World(seed, c.network, c.servers, 50'000, keep_trace),
        config_(c),
        end_us_(c.duration_ms * 1000),
        commit_ms_(rlqs_commit_ms(c)) {
    for (int b = 0; b < c.budgets; ++b) {
      limits_.push_back(rlqs_budget_limit(c, b));
      options_.push_back(HeartbeatOptions{
          .lease_ttl_ms = lease_ttl_ms(),
          .aggregate = HeartbeatAggregate::kMin,
          .handoff = c.handoff,
          .demand_proportional = true,
      });
      keys_.push_back(absl::StrCat("throttlekit-rlqs:4:edge2:b", b));
    }
    admissions_.resize(static_cast<size_t>(c.budgets));
    servers_.resize(static_cast<size_t>(c.servers));
    for (int s = 0; s < c.servers; ++s) {
      Server& sv = servers_[static_cast<size_t>(s)];
      int64_t offset_us = 0;
      if (c.drift_ppm != 0) {
        sv.drift_ppm = static_cast<int64_t>((rng_.uniform() * 2 - 1) *
                                            static_cast<double>(c.drift_ppm));
        offset_us = static_cast<int64_t>(rng_.uniform() * 50'000);
      }
      sv.clock = std::make_unique<NodeClock>(loop_, offset_us, sv.drift_ppm);
      sv.store = std::make_shared<SimCoordinator>(fabric_, s);
      start_server(s);
    }
    clients_.resize(static_cast<size_t>(c.clients));
    for (Client& cl : clients_) {
      cl.buckets.resize(static_cast<size_t>(c.budgets));
    }
  }

  SimResult run() {
    draw_demand(config_.demand);
    for (int i = 0; i < config_.shifts; ++i) {
      const auto at =
          static_cast<int64_t>(rng_.uniform() * static_cast<double>(end_us_));
      const double multiple = config_.demand * (0.25 + 1.5 * rng_.uniform());
      loop_.at(at, [this, multiple] { draw_demand(multiple); });
    }
    for (int c = 0; c < config_.clients; ++c) {
      const auto phase = static_cast<int64_t>(
          rng_.uniform() * static_cast<double>(config_.report_period_ms) *
          1000);
      loop_.at(phase, [this, c] { report_tick(c); });
    }
    if (config_.onoff_ms > 0 && config_.onoff_together) {
      toggle(-1, 0);
    } else if (config_.onoff_ms > 0) {
      for (int c = 0; c < config_.clients; ++c) {
        for (int b = 0; b < config_.budgets; ++b) toggle(c, b);
      }
    }
    if (config_.breaks_per_min > 0) next_break();
    const int64_t lease_us = lease_ttl_ms() * 1000;
    schedule_faults(config_.servers, end_us_, config_.partitions, 3 * lease_us,
                    config_.crashes, 2 * lease_us,
                    [this](int s, int64_t down) { crash(s, down); });
    loop_.run_until(end_us_);
    SimResult r = finish();
    check_windows(r);
    return r;
  }

 private:
  int64_t lease_ttl_ms() const {
    // HeartbeatShare::lease_ttl_ms.
    return commit_ms_ + std::max<int64_t>(3 * config_.heartbeat_ms, 1000) +
           config_.fence_margin_ms;
  }
  bool ended() const { return loop_.now_us() >= end_us_; }

  // ---- servers ----

  void start_server(int s) {
    Server& sv = servers_[static_cast<size_t>(s)];
    sv.node = absl::StrCat("s", s, "#", sv.incarnation);
    sv.up = true;
    sv.seq = 0;
    sv.budgets.clear();
    sv.budgets.resize(static_cast<size_t>(config_.budgets));
    sv.streams.clear();
    sv.pusher_due_ms = kNever;
    wake(s);  // the pusher's first look
  }

  // The true delay until server `sv`'s clock reads `ms` (at least 1 us:
  // a timer that finds the clock short of it looks again).
  static int64_t until(const Server& sv, int64_t ms) {
    const int64_t d = (ms - kSimEpochMs) * 1000 - sv.clock->now_ns() / 1000;
    return std::max<int64_t>(0, d) * 1'000'000 / (1'000'000 + sv.drift_ppm) + 1;
  }

  // Server `s`'s budget `b` if it is still the one numbered `serial` (not
  // dropped, the server not crashed since); else null.
  ServedBudget* find(int s, int b, uint64_t serial) {
    Server& sv = servers_[static_cast<size_t>(s)];
    ServedBudget* bd = sv.budgets[static_cast<size_t>(b)].get();
    return bd != nullptr && bd->serial == serial ? bd : nullptr;
  }

  // What the budget's share reads at `now_ms` (ShareLease::at; without
  // self-fencing, the share applied whatever the lease).
  std::optional<int64_t> share_at(const ServedBudget& bd,
                                  int64_t now_ms) const {
    if (config_.self_fencing) return bd.lease.at(now_ms);
    if (!bd.lease.granted) return std::nullopt;
    return bd.lease.share;
  }

  ServedBudget& budget_of(int s, int b) {
    Server& sv = servers_[static_cast<size_t>(s)];
    std::unique_ptr<ServedBudget>& slot = sv.budgets[static_cast<size_t>(b)];
    if (slot == nullptr) {
      // The door's create_budget (also after an idle one was dropped), and
      // HeartbeatShare::track: its first beat at once, after this report's
      // assignment.
      absl::StatusOr<QuotaBudget> created =
          QuotaBudget::create({.fill_interval_s = config_.fill_interval_s,
                               .ttl_s = config_.ttl_s,
                               .delivery_slack_ms = slack_ms(config_)});
      if (!created.ok()) fail_setup(created.status());
      slot = std::make_unique<ServedBudget>(*std::move(created), ++serials_);
      slot->lease.commit_ms = commit_ms_;
      slot->lease.lease_ttl_ms = lease_ttl_ms();
      slot->lease.margin_ms = config_.fence_margin_ms;
      const uint64_t serial = slot->serial;
      loop_.after(0, [this, s, b, serial] { beat(s, b, serial); });
    }
    return *slot;
  }

  // HeartbeatShare::beat and its completion. A dropped budget's slot beats
  // no more (its usage is gone); a beat of it in flight lands nowhere.
  void beat(int s, int b, uint64_t serial) {
    ServedBudget* bd = find(s, b, serial);
    if (bd == nullptr || ended()) return;
    Server& sv = servers_[static_cast<size_t>(s)];
    const int64_t now = sv.clock->now_ms();
    if (bd->in_flight) {
      bd->overdue = true;  // sent when the one in flight completes
      return;
    }
    if (bd->next_beat_ms > now) {
      loop_.after(until(sv, bd->next_beat_ms),
                  [this, s, b, serial] { beat(s, b, serial); });
      return;
    }
    bd->next_beat_ms = now + config_.heartbeat_ms;
    bd->in_flight = true;
    // The snapshot: the applied generation, then the commitments.
    const int64_t applied = bd->lease.generation;
    const int64_t committed = bd->budget.committed(now);
    const HeartbeatReport report{
        .node_id = sv.node,
        .seq = ++sv.seq,
        .applied_gen = applied,
        .inflight = slots(config_.ttl_accounting ? committed : bd->lease.share),
        .local_limit = slots(limits_[static_cast<size_t>(b)]),
        .demand = slots(bd->budget.demand())};
    sv.store->heartbeat_async(
        keys_[static_cast<size_t>(b)], report, options_[static_cast<size_t>(b)],
        0,
        [this, s, b, serial, sent_ms = now](absl::StatusOr<HeartbeatGrant> g) {
          granted(s, b, serial, sent_ms, std::move(g));
        });
    loop_.after(until(sv, bd->next_beat_ms),
                [this, s, b, serial] { beat(s, b, serial); });
  }

  void granted(int s, int b, uint64_t serial, int64_t sent_ms,
               absl::StatusOr<HeartbeatGrant> g) {
    ServedBudget* bd = find(s, b, serial);
    if (bd == nullptr) return;  // dropped, or the server died meanwhile
    Server& sv = servers_[static_cast<size_t>(s)];
    bd->in_flight = false;
    bool moved = false;
    if (g.ok() && !g->stale) {
      ++result_.rlqs.beats;
      bd->lease.apply(*g, sent_ms);
      moved = share_at(*bd, sv.clock->now_ms()) != bd->served;
      trace(absl::StrCat(loop_.now_us(), " ", sv.node, " b", b, " share ",
                         g->share, " gen ", g->generation));
    } else {
      ++result_.rlqs.failed_beats;
    }
    if (moved) {
      // `changed`: the pusher assigns the budget at once.
      bd->share_moved = true;
      wake(s);
    }
    if (bd->overdue) {
      bd->overdue = false;
      loop_.after(1000, [this, s, b, serial] { beat(s, b, serial); });
    }
  }

  // What one call of the door pushes, per stream (one response each).
  using Pushes = std::map<int64_t, Response>;

  // The door's assign_locked: what it sends goes into `out`.
  void assign(int s, int b, int64_t now, Pushes& out) {
    Server& sv = servers_[static_cast<size_t>(s)];
    ServedBudget& bd = *sv.budgets[static_cast<size_t>(b)];
    const std::optional<int64_t> share = share_at(bd, now);
    bd.served = share;
    bd.waiting = !share.has_value();
    if (bd.waiting) return;
    if (*share == 0 && bd.lease.share > 0) ++result_.rlqs.fenced_assigns;
    absl::StatusOr<std::vector<QuotaSend>> sends =
        bd.budget.assign(*share, now);
    if (!sends.ok()) fail_setup(sends.status());
    for (const QuotaSend& send : *sends) {
      const auto it = bd.targets.find(send.client_id);
      if (it == bd.targets.end()) continue;
      out[it->second].emplace_back(b, send.assignment);
      ++result_.rlqs.assignments;
      trace(absl::StrCat(loop_.now_us(), " ", sv.node, " b", b, " ",
                         send.client_id, " <- ", send.assignment.tokens));
    }
    check_commitments(b, s);
  }

  void push(Pushes& pushes) {
    for (auto& [stream, response] : pushes) {
      respond(stream, std::move(response));
    }
  }

  // Wakes server `s`'s pusher: it looks at once (the door's wake).
  void wake(int s) {
    Server& sv = servers_[static_cast<size_t>(s)];
    const uint64_t look = ++sv.look;
    const int inc = sv.incarnation;
    loop_.after(0, [this, s, inc, look] { pusher_look(s, inc, look); });
  }

  // One pass of the door's pusher loop: each budget whose share moved, or
  // that is due, is assigned; one then idle (nobody reports it, nothing
  // it sent counts) is dropped; the pusher looks again when the next
  // budget is due, within a second. (The door keeps its budgets in a
  // queue by due time; assigning those due at each look is the same.)
  void pusher_look(int s, int inc, uint64_t look) {
    Server& sv = servers_[static_cast<size_t>(s)];
    if (!sv.up || sv.incarnation != inc || sv.look != look) return;
    const int64_t now = sv.clock->now_ms();
    int64_t next = kNever;
    std::vector<int> idle;
    Pushes pushes;
    for (int b = 0; b < config_.budgets; ++b) {
      ServedBudget* bd = sv.budgets[static_cast<size_t>(b)].get();
      if (bd == nullptr) continue;
      const bool moved = std::exchange(bd->share_moved, false);
      if (moved || (!bd->waiting && bd->budget.next_due_ms() <= now)) {
        assign(s, b, now, pushes);
        if (bd->budget.idle(now)) idle.push_back(b);
      }
      if (!bd->waiting) next = std::min(next, bd->budget.next_due_ms());
    }
    push(pushes);
    for (const int b : idle) {
      std::unique_ptr<ServedBudget>& slot = sv.budgets[static_cast<size_t>(b)];
      if (slot == nullptr || !slot->budget.idle(now)) continue;
      ++result_.rlqs.budgets_dropped;
      trace(absl::StrCat(loop_.now_us(), " ", sv.node, " b", b, " dropped"));
      slot.reset();
    }
    sv.pusher_due_ms = next;
    if (ended()) return;  // the run is over: the loop drains
    const int64_t wait_ms =
        next == kNever ? 1000 : std::clamp<int64_t>(next - now, 1, 1000);
    loop_.after(until(sv, now + wait_ms),
                [this, s, inc, look] { pusher_look(s, inc, look); });
  }

  // A report message on stream `id` reaches its server (the door's
  // report: each usage reported, or its bucket abandoned when reported
  // idle for abandonIdle, then each budget touched assigned once).
  void on_report(int64_t id, const Report& report) {
    const Stream st = streams_[static_cast<size_t>(id)];
    const int s = st.server;
    Server& sv = servers_[static_cast<size_t>(s)];
    if (!sv.up || sv.incarnation != st.incarnation) {
      break_stream(id);  // the server it was opened on is gone
      return;
    }
    const int64_t now = sv.clock->now_ms();
    OpenStream& open = sv.streams[id];
    std::vector<int> touched;
    Pushes pushes;
    for (const Usage& u : report) {
      std::string client = absl::StrCat(id, "/b", u.budget);
      if (idle_for(open, u.budget, u.allowed + u.denied > 0, now)) {
        abandon(s, open, u.budget, client, now);
        pushes[id].emplace_back(u.budget, std::nullopt);
        continue;
      }
      ServedBudget& bd = budget_of(s, u.budget);
      bd.targets[client] = id;
      (void)bd.budget.report(client, u.allowed, u.denied, u.elapsed_ms, now);
      const std::pair<int, std::string> entry(u.budget, std::move(client));
      if (std::find(open.clients.begin(), open.clients.end(), entry) ==
          open.clients.end()) {
        open.clients.push_back(entry);
      }
      if (std::find(touched.begin(), touched.end(), u.budget) ==
          touched.end()) {
        touched.push_back(u.budget);
      }
    }
    int64_t due = kNever;
    for (const int b : touched) {
      assign(s, b, now, pushes);
      const ServedBudget& bd = *sv.budgets[static_cast<size_t>(b)];
      if (!bd.waiting) due = std::min(due, bd.budget.next_due_ms());
    }
    push(pushes);
    // Only when something is due before the pusher means to look.
    if (due < sv.pusher_due_ms) wake(s);
  }

  // QuotaStream::idle_for: whether bucket `b` has been reported with no
  // requests for abandonIdle (then it is forgotten here).
  bool idle_for(OpenStream& open, int b, bool used, int64_t now) const {
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
  void abandon(int s, OpenStream& open, int b, const std::string& client,
               int64_t now) {
    ++result_.rlqs.abandoned;
    trace(absl::StrCat(loop_.now_us(), " s", s, " abandons ", client));
    const std::pair<int, std::string> entry(b, client);
    const auto it = std::find(open.clients.begin(), open.clients.end(), entry);
    if (it == open.clients.end()) return;
    open.clients.erase(it);
    ServedBudget* bd =
        servers_[static_cast<size_t>(s)].budgets[static_cast<size_t>(b)].get();
    if (bd == nullptr) return;
    bd->budget.abandon(client, now);
    bd->targets.erase(client);
    Server& sv = servers_[static_cast<size_t>(s)];
    if (!bd->waiting && bd->budget.next_due_ms() < sv.pusher_due_ms) wake(s);
  }

  // The door's close: the stream's clients are forgotten, then the pusher
  // woken.
  void close_stream(int s, int inc, int64_t id) {
    Server& sv = servers_[static_cast<size_t>(s)];
    if (!sv.up || sv.incarnation != inc) return;
    const auto it = sv.streams.find(id);
    if (it == sv.streams.end()) return;
    const std::vector<std::pair<int, std::string>> clients =
        std::move(it->second.clients);
    sv.streams.erase(it);
    const int64_t now = sv.clock->now_ms();
    for (const auto& [b, client] : clients) {
      ServedBudget* bd = sv.budgets[static_cast<size_t>(b)].get();
      if (bd == nullptr) continue;
      bd->budget.forget(client, now);
      bd->targets.erase(client);
    }
    wake(s);
  }

  void crash(int s, int64_t down_us) {
    Server& sv = servers_[static_cast<size_t>(s)];
    if (!sv.up || ended()) return;
    ++result_.crashes;
    trace(absl::StrCat(loop_.now_us(), " ", sv.node, " crash"));
    // Its memory is lost; what it sent still counts until it expires.
    for (int b = 0; b < config_.budgets; ++b) {
      std::unique_ptr<ServedBudget>& slot = sv.budgets[static_cast<size_t>(b)];
      if (slot != nullptr) {
        dead_.push_back({sv.clock.get(), b, std::move(slot)});
      }
    }
    sv.up = false;
    const int inc = sv.incarnation++;
    for (size_t id = 0; id < streams_.size(); ++id) {
      const Stream& st = streams_[id];
      if (st.server == s && st.incarnation == inc && !st.dead) {
        break_stream(static_cast<int64_t>(id));
      }
    }
    loop_.after(down_us, [this, s] {
      if (ended()) return;
      start_server(s);
      trace(absl::StrCat(loop_.now_us(), " ",
                         servers_[static_cast<size_t>(s)].node, " restart"));
    });
  }

  // ---- the checks ----

  // The commitments of every server to budget `b`, crashed incarnations'
  // included, each on its own clock: at most R (A3). They rise only at an
  // assignment, so checking after each is checking at every instant.
  void check_commitments(int b, int by) {
    int64_t sum = 0;
    for (const Server& sv : servers_) {
      const ServedBudget* bd =
          sv.up ? sv.budgets[static_cast<size_t>(b)].get() : nullptr;
      if (bd != nullptr) sum += bd->budget.committed(sv.clock->now_ms());
    }
    std::erase_if(dead_, [&](const Dead& d) {
      if (d.budget != b) return false;
      const int64_t c = d.served->budget.committed(d.clock->now_ms());
      sum += c;
      return c == 0;  // nothing more of it counts, ever
    });
    const int64_t limit = limits_[static_cast<size_t>(b)];
    ++result_.rlqs.commitment_checks;
    result_.rlqs.most_committed =
        std::max(result_.rlqs.most_committed, sum * 100 / limit);
    if (sum > limit) {
      ++result_.rlqs.over_committed;
      violation(absl::StrCat("budget ", b, ": the servers' commitments sum to ",
                             sum, " > R = ", limit, " at ", loop_.now_us(),
                             " us (server ", by, " assigned)"));
    }
  }

  // The token buckets the clients hold for budget `b`: at most R (each is
  // one of its server's unexpired records, by A1).
  void check_held(int b, int by) {
    int64_t sum = 0;
    for (Client& cl : clients_) {
      Bucket& k = cl.buckets[static_cast<size_t>(b)];
      expire(k, loop_.now_us());
      if (k.kind == Bucket::Kind::kTokenBucket) sum += k.max_tokens;
    }
    const int64_t limit = limits_[static_cast<size_t>(b)];
    if (sum > limit) {
      ++result_.rlqs.over_held;
      violation(absl::StrCat("budget ", b, ": the clients hold buckets of ",
                             sum, " tokens > R = ", limit, " at ",
                             loop_.now_us(), " us (client ", by, " applied)"));
    }
  }

  // The bound, over every window of length I in {F, L, 2L, 5L}.
  void check_windows(SimResult& r) {
    const int64_t f_us = config_.fill_interval_s * 1'000'000;
    const int64_t l_us = commit_ms_ * 1000;
    for (int b = 0; b < config_.budgets; ++b) {
      const std::vector<int64_t>& times = admissions_[static_cast<size_t>(b)];
      const int64_t limit = limits_[static_cast<size_t>(b)];
      for (const int64_t i_us : {f_us, l_us, 2 * l_us, 5 * l_us}) {
        // bound * F, in integers: R*I + F*(R + R*(floor(I/L) + 1)).
        const int64_t bound_f =
            limit * i_us + f_us * (limit + limit * (i_us / l_us + 1));
        int64_t most = 0;
        int64_t most_from = 0;
        size_t first = 0;
        for (size_t last = 0; last < times.size(); ++last) {
          while (times[last] - times[first] > i_us) ++first;
          const auto n = static_cast<int64_t>(last - first + 1);
          if (n > most) {
            most = n;
            most_from = times[first];
          }
        }
        if (i_us == f_us) r.worst_window = std::max(r.worst_window, most);
        r.rlqs.closest_to_bound =
            std::max(r.rlqs.closest_to_bound, static_cast<double>(most * f_us) /
                                                  static_cast<double>(bound_f));
        if (most * f_us > bound_f) {
          ++r.rlqs.over_bound;
          record_violation(
              r, absl::StrCat("budget ", b, ": ", most,
                              " admissions in a window of ", i_us / 1000,
                              " ms from ", most_from, " us > the bound ",
                              exact(static_cast<double>(bound_f) /
                                    static_cast<double>(f_us))));
        }
      }
    }
  }

  // ---- the network between clients and servers ----

  int64_t stream_delay() {
    return static_cast<int64_t>(rng_.uniform() *
                                static_cast<double>(config_.stream_delay_us));
  }

  void respond(int64_t id, Response response) {
    Stream& st = streams_[static_cast<size_t>(id)];
    if (config_.reply_loss > 0 && rng_.uniform() <= config_.reply_loss) {
      ++result_.rlqs.replies_lost;
      return;
    }
    st.down_last_us =
        std::max(st.down_last_us, loop_.now_us() + stream_delay());
    loop_.at(st.down_last_us, [this, id, response = std::move(response)] {
      const Stream& s = streams_[static_cast<size_t>(id)];
      if (s.dead) {
        ++result_.rlqs.replies_lost;
        return;
      }
      for (const auto& [b, a] : response) {
        if (a.has_value()) {
          apply(s.client, b, *a);
        } else {
          erase(s.client, b);
        }
      }
      for (const auto& [b, a] : response) check_held(b, s.client);
    });
  }

  void send_report(int c, Report report) {
    Client& cl = clients_[static_cast<size_t>(c)];
    if (cl.stream < 0) {
      const int s = pick_server(cl.last_server);
      if (s < 0) return;  // no server up: the report is lost
      cl.stream = static_cast<int64_t>(streams_.size());
      cl.last_server = s;
      streams_.push_back(
          Stream{c, s, servers_[static_cast<size_t>(s)].incarnation});
      trace(absl::StrCat(loop_.now_us(), " c", c, " opens ", cl.stream, " on s",
                         s));
    }
    const int64_t id = cl.stream;
    Stream& st = streams_[static_cast<size_t>(id)];
    st.up_last_us = std::max(st.up_last_us, loop_.now_us() + stream_delay());
    loop_.at(st.up_last_us, [this, id, report = std::move(report)] {
      if (streams_[static_cast<size_t>(id)].dead) return;
      on_report(id, report);
    });
  }

  // A load balancer's choice: a server up, another than `last` if one is.
  int pick_server(int last) {
    std::vector<int> up;
    for (int s = 0; s < config_.servers; ++s) {
      if (servers_[static_cast<size_t>(s)].up && s != last) up.push_back(s);
    }
    if (up.empty()) {
      return last >= 0 && servers_[static_cast<size_t>(last)].up ? last : -1;
    }
    return up[rng_.next() % up.size()];
  }

  // The stream breaks: nothing more is delivered on it; its client opens
  // another at its next report; its server forgets it a little later.
  void break_stream(int64_t id) {
    Stream& st = streams_[static_cast<size_t>(id)];
    if (st.dead) return;
    st.dead = true;
    ++result_.rlqs.stream_breaks;
    Client& cl = clients_[static_cast<size_t>(st.client)];
    if (cl.stream == id) cl.stream = -1;
    trace(absl::StrCat(loop_.now_us(), " stream ", id, " breaks"));
    const int s = st.server;
    const int inc = st.incarnation;
    loop_.after(static_cast<int64_t>(rng_.uniform() * kMaxNoticeUs),
                [this, s, inc, id] { close_stream(s, inc, id); });
  }

  void next_break() {
    const int64_t at =
        loop_.now_us() +
        static_cast<int64_t>(rng_.exponential(60e6 / config_.breaks_per_min));
    if (at >= end_us_) return;
    loop_.at(at, [this] {
      const auto c = static_cast<size_t>(rng_.next() % clients_.size());
      if (clients_[c].stream >= 0) break_stream(clients_[c].stream);
      next_break();
    });
  }

  // ---- clients ----

  static void refill(Bucket& k, int64_t now_us) {
    if (now_us > k.at_us) {
      k.tokens = std::min<double>(
          static_cast<double>(k.max_tokens),
          k.tokens + static_cast<double>(now_us - k.at_us) * k.rate_per_us);
      k.at_us = now_us;
    }
  }
  static void expire(Bucket& k, int64_t now_us) {
    if (k.kind != Bucket::Kind::kNone && now_us >= k.expires_us) {
      k.kind = Bucket::Kind::kNone;
    }
  }

  // One response's action on client `c`'s bucket of budget `b`.
  void apply(int c, int b, const QuotaAssignment& a) {
    Bucket& k =
        clients_[static_cast<size_t>(c)].buckets[static_cast<size_t>(b)];
    if (!k.created) return;  // an action for a bucket it does not have
    const int64_t now = loop_.now_us();
    expire(k, now);
    if (a.deny_all()) {
      k.kind = Bucket::Kind::kDenyAll;
    } else {
      // Envoy compares max_tokens, tokens_per_fill and fill_interval's
      // nanos: equal here exactly when the tokens are.
      const bool same =
          k.kind == Bucket::Kind::kTokenBucket && k.max_tokens == a.tokens;
      if (!same) {
        auto tokens = static_cast<double>(a.tokens);  // a first one: full
        if (k.kind == Bucket::Kind::kTokenBucket) {
          refill(k, now);  // a changed one keeps the fill ratio
          tokens = k.max_tokens == 0
                       ? 0
                       : static_cast<double>(a.tokens) *
                             (k.tokens / static_cast<double>(k.max_tokens));
        }
        k.max_tokens = a.tokens;
        k.tokens = tokens;
        k.rate_per_us = static_cast<double>(a.tokens) /
                        (static_cast<double>(a.fill_interval_s) * 1e6);
        k.at_us = now;
      }
      k.kind = Bucket::Kind::kTokenBucket;
    }
    k.expires_us = now + a.ttl_s * 1'000'000;
  }

  // An abandon action: the bucket and its assignment are erased; its next
  // request makes it again and reports it at once.
  void erase(int c, int b) {
    Bucket& k =
        clients_[static_cast<size_t>(c)].buckets[static_cast<size_t>(b)];
    if (!k.created) return;
    Bucket fresh;
    fresh.per_sec = k.per_sec;
    fresh.arrivals = k.arrivals;
    fresh.on = k.on;
    k = fresh;
  }

  // A request of client `c` on budget `b`'s bucket.
  void arrive(int c, int b) {
    Bucket& k =
        clients_[static_cast<size_t>(c)].buckets[static_cast<size_t>(b)];
    const int64_t now = loop_.now_us();
    ++result_.requests;
    const bool first = !k.created;
    if (first) {
      k.created = true;
      k.last_report_us = now;
    }
    expire(k, now);
    bool allowed = false;
    if (k.kind == Bucket::Kind::kTokenBucket) {
      refill(k, now);
      if (k.tokens >= 1) {
        k.tokens -= 1;
        allowed = true;
      }
    } else if (k.kind == Bucket::Kind::kNone) {
      allowed = config_.allow_without_assignment;  // DENY_ALL by A4
    }
    ++(allowed ? k.allowed : k.denied);
    if (allowed) {
      ++result_.admitted;
      admissions_[static_cast<size_t>(b)].push_back(now);
    }
    if (first) send_report(c, {usage(k, b, now)});
  }

  // `k`'s usage since its last report, starting the next period.
  static Usage usage(Bucket& k, int b, int64_t now_us) {
    const Usage u{b, k.allowed, k.denied,
                  (now_us - k.last_report_us) / 1'000'000 * 1000};
    k.allowed = k.denied = 0;
    k.last_report_us = now_us;
    return u;
  }

  void report_tick(int c) {
    if (ended()) return;
    loop_.after(config_.report_period_ms * 1000, [this, c] { report_tick(c); });
    Report report;
    for (int b = 0; b < config_.budgets; ++b) {
      Bucket& k =
          clients_[static_cast<size_t>(c)].buckets[static_cast<size_t>(b)];
      if (k.created) report.push_back(usage(k, b, loop_.now_us()));
    }
    if (!report.empty()) send_report(c, std::move(report));
  }

  void next_arrival(int c, int b) {
    const Bucket& k =
        clients_[static_cast<size_t>(c)].buckets[static_cast<size_t>(b)];
    if (k.per_sec <= 0 || !k.on) return;
    const int64_t at = loop_.now_us() + arrival_gap_us(k.per_sec);
    if (at >= end_us_) return;
    loop_.at(at, [this, c, b, process = k.arrivals] {
      if (clients_[static_cast<size_t>(c)]
              .buckets[static_cast<size_t>(b)]
              .arrivals != process) {
        return;  // the demand shifted
      }
      arrive(c, b);
      next_arrival(c, b);
    });
  }

  // On/off demand: the bucket's requests stop or start, for an
  // exponential time of mean `onoff_ms`.
  // With `onoff_together`, every bucket of the fleet at once (c = -1).
  void toggle(int c, int b) {
    const int64_t at =
        loop_.now_us() + static_cast<int64_t>(rng_.exponential(
                             static_cast<double>(config_.onoff_ms) * 1000));
    if (at >= end_us_) return;
    loop_.at(at, [this, c, b] {
      for (int ci = 0; ci < config_.clients; ++ci) {
        for (int bi = 0; bi < config_.budgets; ++bi) {
          if (c >= 0 && (ci != c || bi != b)) continue;
          Bucket& k = clients_[static_cast<size_t>(ci)]
                          .buckets[static_cast<size_t>(bi)];
          k.on = !k.on;
          ++k.arrivals;
          next_arrival(ci, bi);
        }
      }
      toggle(c, b);
    });
  }

  // The clients' demand: `multiple` times each budget's R per F, split by
  // weights (a fifth of the buckets idle).
  void draw_demand(double multiple) {
    for (int b = 0; b < config_.budgets; ++b) {
      std::vector<double> weights;
      double sum = 0;
      for (int c = 0; c < config_.clients; ++c) {
        weights.push_back(rng_.uniform() < 0.2 ? 0 : rng_.exponential(1));
        sum += weights.back();
      }
      const double total =
          multiple * static_cast<double>(limits_[static_cast<size_t>(b)]) /
          static_cast<double>(config_.fill_interval_s);
      for (int c = 0; c < config_.clients; ++c) {
        Bucket& k =
            clients_[static_cast<size_t>(c)].buckets[static_cast<size_t>(b)];
        k.per_sec = sum > 0 ? total * weights[static_cast<size_t>(c)] / sum : 0;
        ++k.arrivals;
        next_arrival(c, b);
      }
    }
    trace(absl::StrCat(loop_.now_us(), " demand ", exact(multiple)));
  }

  const RlqsFleetConfig config_;
  const int64_t end_us_;
  const int64_t commit_ms_;
  std::vector<int64_t> limits_;
  std::vector<HeartbeatOptions> options_;
  std::vector<std::string> keys_;
  std::vector<Server> servers_;
  uint64_t serials_ = 0;  // the budgets made so far
  std::vector<Dead> dead_;
  std::vector<Client> clients_;
  std::vector<Stream> streams_;                   // by id
  std::vector<std::vector<int64_t>> admissions_;  // per budget, true us
};

}  // namespace

int64_t rlqs_budget_limit(const RlqsFleetConfig& c, int b) {
  return b == 0 ? c.limit : std::max<int64_t>(1, c.limit / 3);
}

int64_t rlqs_commit_ms(const RlqsFleetConfig& c) {
  return c.ttl_s * 1000 + slack_ms(c);
}

RlqsFleetConfig swarm_rlqs_config(uint64_t seed, int servers) {
  Rng rng(seed ^ 0x51A5F1EE7ull);
  RlqsFleetConfig c;
  c.servers = servers;
  c.clients = 4 + static_cast<int>(rng.next() % 37);
  c.budgets = 1 + static_cast<int>(rng.next() % 2);
  c.limit = 5 + static_cast<int64_t>(rng.next() % 116);
  constexpr int64_t kFills[] = {1, 1, 1, 1, 1, 2, 2, 10, 60, 60};
  c.fill_interval_s = kFills[rng.next() % 10];
  // A longer fill interval, a larger budget: requests about as frequent.
  c.limit *= std::max<int64_t>(1, c.fill_interval_s / 2);
  c.ttl_s = 2 + static_cast<int64_t>(rng.next() % 5);
  c.heartbeat_ms = 100 + static_cast<int64_t>(rng.next() % 901);
  constexpr int64_t kPeriods[] = {1000, 2000, 5000};
  c.report_period_ms = kPeriods[rng.next() % 3];
  c.demand = 0.3 + rng.uniform() * 2.7;
  c.shifts = static_cast<int>(rng.next() % 4);
  c.network.median_delay_us = 100 + rng.uniform() * 2'000;
  c.network.delay_sigma = rng.uniform() < 0.3 ? 1.5 : 0.5;
  c.network.loss = rng.uniform() < 0.3 ? rng.uniform() * 0.1 : 0;
  c.drift_ppm = rng.uniform() < 0.5 ? 500 : 0;
  // A1 on the server's clock: within the slack less its drift over L and
  // 2 ms (its whole milliseconds).
  const int64_t l_ms = rlqs_commit_ms(c);
  const int64_t max_delay_us =
      slack_ms(c) * 1000 - 2000 - c.drift_ppm * l_ms / 1000;
  c.stream_delay_us =
      static_cast<int64_t>(rng.uniform() * static_cast<double>(max_delay_us));
  c.reply_loss = rng.uniform() < 0.3 ? rng.uniform() * 0.1 : 0;
  c.breaks_per_min = rng.uniform() < 0.4 ? 1 + rng.uniform() * 20 : 0;
  c.partitions = rng.uniform() < 0.4;
  c.crashes = rng.uniform() < 0.4;
  c.onoff_ms = rng.uniform() < 0.4 ? 500 + rng.next() % 4501 : 0;
  c.onoff_together = rng.uniform() < 0.5;
  // abandonIdle: the default (a minute) or 1 to 10 s.
  c.abandon_idle_ms = rng.uniform() < 0.4
                          ? 1000 * (1 + static_cast<int64_t>(rng.next() % 10))
                          : 60'000;
  // Windows of F, L, 2L and 5L inside the run.
  c.duration_ms =
      std::max({int64_t{30'000}, 6 * l_ms, c.fill_interval_s * 1000 + l_ms});
  return c;
}

std::string rlqs_replay_command(uint64_t seed, const RlqsFleetConfig& c) {
  return absl::StrCat(
      "tk_sim rlqs --seed ", seed, " --nodes ", c.servers, " --clients ",
      c.clients, " --budgets ", c.budgets, " --limit ", c.limit, " --fill-s ",
      c.fill_interval_s, " --ttl-s ", c.ttl_s, " --heartbeat-ms ",
      c.heartbeat_ms, " --report-ms ", c.report_period_ms, " --demand ",
      exact(c.demand), " --shifts ", c.shifts, " --onoff-ms ", c.onoff_ms,
      " --onoff-together ", c.onoff_together ? 1 : 0, " --abandon-idle-ms ",
      c.abandon_idle_ms, " --duration-ms ", c.duration_ms, " --delay-us ",
      exact(c.network.median_delay_us), " --sigma ",
      exact(c.network.delay_sigma), " --loss ", exact(c.network.loss),
      " --stream-delay-us ", c.stream_delay_us, " --reply-loss ",
      exact(c.reply_loss), " --breaks ", exact(c.breaks_per_min),
      " --partitions ", c.partitions ? 1 : 0, " --crashes ", c.crashes ? 1 : 0,
      " --drift-ppm ", c.drift_ppm,
      c.ttl_accounting ? "" : " --no-ttl-accounting",
      c.self_fencing ? "" : " --no-fencing", c.handoff ? "" : " --no-handoff",
      c.allow_without_assignment ? " --allow-without-assignment" : "");
}

SimResult run_rlqs_fleet(uint64_t seed, const RlqsFleetConfig& config,
                         bool keep_trace) {
  return Run(seed, config, keep_trace).run();
}

RlqsFleetConfig shrink_rlqs(uint64_t seed, RlqsFleetConfig failing,
                            int rounds) {
  using C = RlqsFleetConfig;
  const std::vector<std::function<void(C&)>> steps = {
      [](C& c) { c.partitions = false; },
      [](C& c) { c.crashes = false; },
      [](C& c) { c.breaks_per_min = 0; },
      [](C& c) { c.reply_loss = 0; },
      [](C& c) { c.network.loss = 0; },
      [](C& c) { c.network.delay_sigma = 0.5; },
      [](C& c) { c.drift_ppm = 0; },
      [](C& c) { c.shifts = 0; },
      [](C& c) { c.onoff_ms = 0; },
      [](C& c) { c.onoff_together = false; },
      [](C& c) { c.abandon_idle_ms = 0; },
      [](C& c) { c.budgets = 1; },
      [](C& c) {
        // Half the clients, the same demand.
        c.clients = std::max(1, c.clients / 2);
      },
      [](C& c) { c.servers = std::max(2, c.servers / 2); },
      [](C& c) {
        c.duration_ms = std::max(6 * rlqs_commit_ms(c), c.duration_ms / 2);
      },
  };
  return shrink_greedy(
      std::move(failing), steps,
      [seed](const C& c) { return run_rlqs_fleet(seed, c).violations > 0; },
      [seed](const C& a, const C& b) {
        return rlqs_replay_command(seed, a) == rlqs_replay_command(seed, b);
      },
      rounds);
}

}  // namespace throttlekit::sim
