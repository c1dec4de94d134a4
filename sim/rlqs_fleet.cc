// sim/rlqs_fleet.cc: the quota door's fleet scenario (see the header and
// docs/simulation.md): the run that puts the servers (sim/rlqs_server.h),
// the clients (sim/rlqs_client.h) and the store in one loop, carries the
// streams between clients and servers, draws the workload and the faults,
// and gathers what the checks (sim/rlqs_checks.h) judge.

#include "sim/rlqs_fleet.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/event_loop.h"
#include "sim/random.h"
#include "sim/rlqs_checks.h"
#include "sim/rlqs_client.h"
#include "sim/rlqs_server.h"
#include "sim/rlqs_stream.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "sim/world.h"

namespace throttlekit::sim {
namespace {

using rlqs_internal::Bucket;
using rlqs_internal::Checks;
using rlqs_internal::Client;
using rlqs_internal::Report;
using rlqs_internal::Response;
using rlqs_internal::ServedBudget;
using rlqs_internal::Server;
using rlqs_internal::ServerHost;
using rlqs_internal::Stream;

// How long a server takes to notice a broken stream, at most.
constexpr int64_t kMaxNoticeUs = 500'000;

std::vector<int64_t> budget_limits(const RlqsFleetConfig& c) {
  std::vector<int64_t> limits;
  for (int b = 0; b < c.budgets; ++b) {
    limits.push_back(rlqs_budget_limit(c, b));
  }
  return limits;
}

// A crashed incarnation's budget: its assignments count until they expire.
struct Dead {
  const NodeClock* clock;
  int budget;
  std::unique_ptr<ServedBudget> served;
};

class Run : private World, private ServerHost {
 public:
  Run(uint64_t seed, const RlqsFleetConfig& c, bool keep_trace)
      : World(seed, c.network, c.servers, 50'000, keep_trace),
        config_(c),
        end_us_(c.duration_ms * 1000),
        checks_(budget_limits(c), c.fill_interval_s, rlqs_commit_ms(c)) {
    ServerHost& host = *this;  // a private base: converted here
    for (int s = 0; s < c.servers; ++s) {
      int64_t drift_ppm = 0;
      int64_t offset_us = 0;
      if (c.drift_ppm != 0) {
        drift_ppm = static_cast<int64_t>((rng_.uniform() * 2 - 1) *
                                         static_cast<double>(c.drift_ppm));
        offset_us = static_cast<int64_t>(rng_.uniform() * 50'000);
      }
      servers_.push_back(std::make_unique<Server>(
          s, config_, loop_,
          std::make_unique<NodeClock>(loop_, offset_us, drift_ppm), drift_ppm,
          std::make_shared<SimCoordinator>(fabric_, s), host));
      servers_.back()->start();
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
    const int64_t lease_us = rlqs_internal::lease_ttl_ms(config_) * 1000;
    schedule_faults(config_.servers, end_us_, config_.partitions, 3 * lease_us,
                    config_.crashes, 2 * lease_us,
                    [this](int s, int64_t down) { crash(s, down); });
    loop_.run_until(end_us_);
    SimResult r = finish();
    checks_.windows(r);
    return r;
  }

 private:
  Server& server(int s) { return *servers_[static_cast<size_t>(s)]; }
  Bucket& bucket(int c, int b) {
    return clients_[static_cast<size_t>(c)].buckets[static_cast<size_t>(b)];
  }

  // ---- what the servers ask of the fleet (ServerHost) ----

  bool ended() const override { return loop_.now_us() >= end_us_; }
  SimResult& result() override { return result_; }
  void trace_line(std::string line) override { trace(std::move(line)); }
  uint64_t next_serial() override { return ++serials_; }

  // The commitments of every server to budget `b`, crashed incarnations'
  // included (a crashed one forgotten once nothing of it counts).
  void assigned(int b, int by) override {
    int64_t sum = 0;
    for (const std::unique_ptr<Server>& sv : servers_) sum += sv->committed(b);
    std::erase_if(dead_, [&](const Dead& d) {
      if (d.budget != b) return false;
      const int64_t c = d.served->budget.committed(d.clock->now_ms());
      sum += c;
      return c == 0;  // nothing more of it counts, ever
    });
    checks_.commitments(b, sum, by, loop_.now_us(), result_);
  }

  // A response down stream `id`: lost (drawn, or the stream broken by its
  // arrival), or applied by its client, whose buckets held are then
  // checked.
  void respond(int64_t id, Response response) override {
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
      clients_[static_cast<size_t>(s.client)].act(response, loop_.now_us());
      for (const auto& [b, a] : response) check_held(b, s.client);
    });
  }

  // ---- faults ----

  void crash(int s, int64_t down_us) {
    Server& sv = server(s);
    if (!sv.up() || ended()) return;
    ++result_.crashes;
    trace(absl::StrCat(loop_.now_us(), " ", sv.node(), " crash"));
    const int inc = sv.incarnation();
    for (auto& [b, served] : sv.crash()) {
      dead_.push_back({&sv.clock(), b, std::move(served)});
    }
    for (size_t id = 0; id < streams_.size(); ++id) {
      const Stream& st = streams_[id];
      if (st.server == s && st.incarnation == inc && !st.dead) {
        break_stream(static_cast<int64_t>(id));
      }
    }
    loop_.after(down_us, [this, s] {
      if (ended()) return;
      server(s).start();
      trace(absl::StrCat(loop_.now_us(), " ", server(s).node(), " restart"));
    });
  }

  // The token buckets the clients hold for budget `b` (each expired first).
  void check_held(int b, int by) {
    int64_t sum = 0;
    for (Client& cl : clients_) {
      Bucket& k = cl.buckets[static_cast<size_t>(b)];
      k.expire(loop_.now_us());
      if (k.kind == Bucket::Kind::kTokenBucket) sum += k.max_tokens;
    }
    checks_.held(b, sum, by, loop_.now_us(), result_);
  }

  // ---- the network between clients and servers ----

  int64_t stream_delay() {
    return static_cast<int64_t>(rng_.uniform() *
                                static_cast<double>(config_.stream_delay_us));
  }

  // Client `c` sends `report`, on its open stream or a new one to a server
  // up (lost when none is).
  void send_report(int c, Report report) {
    Client& cl = clients_[static_cast<size_t>(c)];
    if (cl.stream < 0) {
      const int s = pick_server(cl.last_server);
      if (s < 0) return;  // no server up: the report is lost
      cl.stream = static_cast<int64_t>(streams_.size());
      cl.last_server = s;
      streams_.push_back(Stream{c, s, server(s).incarnation()});
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

  // A report reaches the server its stream was opened on; if that
  // incarnation is gone, the stream breaks.
  void on_report(int64_t id, const Report& report) {
    const Stream st = streams_[static_cast<size_t>(id)];
    Server& sv = server(st.server);
    if (!sv.up() || sv.incarnation() != st.incarnation) {
      break_stream(id);
      return;
    }
    sv.on_report(id, report);
  }

  // A load balancer's choice: a server up, another than `last` if one is.
  int pick_server(int last) {
    std::vector<int> up;
    for (int s = 0; s < config_.servers; ++s) {
      if (server(s).up() && s != last) up.push_back(s);
    }
    if (up.empty()) return last >= 0 && server(last).up() ? last : -1;
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
                [this, s, inc, id] { server(s).close_stream(inc, id); });
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

  // ---- the workload: requests and report timers ----

  // A request of client `c` on budget `b`'s bucket.
  void arrive(int c, int b) {
    const int64_t now = loop_.now_us();
    ++result_.requests;
    Bucket& k = bucket(c, b);
    const rlqs_internal::Answer answer =
        k.request(now, config_.allow_without_assignment);
    if (answer.allowed) {
      ++result_.admitted;
      checks_.admitted(b, now);
    }
    if (answer.first) send_report(c, {k.take_usage(b, now)});
  }

  // Envoy's report timer: every period, the usage of every bucket made.
  void report_tick(int c) {
    if (ended()) return;
    loop_.after(config_.report_period_ms * 1000, [this, c] { report_tick(c); });
    Report report = clients_[static_cast<size_t>(c)].report(loop_.now_us());
    if (!report.empty()) send_report(c, std::move(report));
  }

  void next_arrival(int c, int b) {
    const Bucket& k = bucket(c, b);
    if (k.per_sec <= 0 || !k.on) return;
    const int64_t at = loop_.now_us() + arrival_gap_us(k.per_sec);
    if (at >= end_us_) return;
    loop_.at(at, [this, c, b, process = k.arrivals] {
      if (bucket(c, b).arrivals != process) return;  // the demand shifted
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
          Bucket& k = bucket(ci, bi);
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
      const double total = multiple * static_cast<double>(checks_.limit(b)) /
                           static_cast<double>(config_.fill_interval_s);
      for (int c = 0; c < config_.clients; ++c) {
        Bucket& k = bucket(c, b);
        k.per_sec = sum > 0 ? total * weights[static_cast<size_t>(c)] / sum : 0;
        ++k.arrivals;
        next_arrival(c, b);
      }
    }
    trace(absl::StrCat(loop_.now_us(), " demand ", exact(multiple)));
  }

  const RlqsFleetConfig config_;
  const int64_t end_us_;
  Checks checks_;
  // The servers, each at a fixed address (its timers hold it).
  std::vector<std::unique_ptr<Server>> servers_;
  uint64_t serials_ = 0;  // the budgets made so far
  std::vector<Dead> dead_;
  std::vector<Client> clients_;
  std::vector<Stream> streams_;  // by id
};

}  // namespace

SimResult run_rlqs_fleet(uint64_t seed, const RlqsFleetConfig& config,
                         bool keep_trace) {
  return Run(seed, config, keep_trace).run();
}

}  // namespace throttlekit::sim
