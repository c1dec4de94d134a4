// sim/rlqs_server.h
//
// Provides `Server`: one throttlekit-server of the rlqs fleet
// (sim/rlqs_fleet.h; docs/simulation.md, "The rlqs fleet"), running the
// production transition code on its own clock (an offset and a drift):
//
// - per budget one `QuotaBudget` (src/server/quota_budget.h) and one
//   `ShareLease` (src/server/share_lease.h), beating to the store as
//   `HeartbeatShare` does (one beat in flight per budget, every heartbeat,
//   the first at the budget's creation; one sequence over the node's
//   keys; the report {applied generation, then committed(now), demand()};
//   handoff, demand-proportional, aggregate min, lease = `lease_ttl_ms`)
//   through its `SimCoordinator`;
// - the quota door's side (src/server/quota_door.cc): a report's usages
//   reported (or a bucket abandoned, when its stream reported it idle for
//   abandonIdle), then each budget it touched assigned once; the pusher
//   assigns a budget when it comes due or its share moves and drops a
//   budget once idle; a closed stream's clients forgotten; nothing
//   assigned before the first answered beat;
// - a new node id (`s<i>#<incarnation>`) per incarnation: a crash loses
//   the memory, `start` begins the next.
//
// What it sends and checks goes through its `ServerHost`: the fleet
// carries the responses and checks the commitments at each assignment.
//
// A piece of the rlqs fleet (namespace `rlqs_internal`), not an interface
// of the simulator.
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_RLQS_SERVER_H_
#define THROTTLEKIT_SIM_RLQS_SERVER_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/event_loop.h"
#include "sim/rlqs_fleet.h"
#include "sim/rlqs_stream.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "sim/world.h"
#include "src/server/quota_budget.h"
#include "src/server/share_lease.h"
#include "throttlekit/coordinator/heartbeat_core.h"

namespace throttlekit::sim::rlqs_internal {

// HeartbeatShare::lease_ttl_ms: L + max(3 heartbeats, 2 s) + the fence
// margin, ms.
int64_t lease_ttl_ms(const RlqsFleetConfig& config);

// One budget of one server incarnation: the production QuotaBudget and
// ShareLease, and what HeartbeatShare's slot and the door keep beside
// them.
struct ServedBudget {
  ServedBudget(server::QuotaBudget b, uint64_t serial)
      : budget(std::move(b)), serial(serial) {}
  server::QuotaBudget budget;
  const uint64_t serial;  // unique in the run: a dropped one is gone
  server::ShareLease lease;
  std::optional<int64_t> served;  // what the share last read as
  bool waiting = true;            // no share yet: nothing assigned
  bool share_moved = false;       // `changed`: the pusher assigns it
  bool in_flight = false;
  bool overdue = false;  // a beat came due while one was in flight
  int64_t next_beat_ms = 0;
  std::map<std::string, int64_t, std::less<>> targets;  // client -> stream
};

// What a server needs of the fleet it runs in.
class ServerHost {
 public:
  // Whether the run is over: no beat is sent and no look scheduled after.
  virtual bool ended() const = 0;
  // The run's figures (the server counts its beats, assignments, abandons
  // and dropped budgets in `rlqs`).
  virtual SimResult& result() = 0;
  // Adds a line to the run's trace.
  virtual void trace_line(std::string line) = 0;
  // A number for a new budget, unique in the run.
  virtual uint64_t next_serial() = 0;
  // Sends `response` down stream `id` (which may lose it).
  virtual void respond(int64_t id, Response response) = 0;
  // Server `by` has just assigned budget `b`: the commitments are checked.
  virtual void assigned(int b, int by) = 0;

 protected:
  ~ServerHost() = default;
};

class Server {
 public:
  // Server `index` of the fleet: `clock` its own (offset and drift
  // `drift_ppm`), `store` its link to the store. Down until `start`.
  Server(int index, const RlqsFleetConfig& config, EventLoop& loop,
         std::unique_ptr<NodeClock> clock, int64_t drift_ppm,
         std::shared_ptr<SimCoordinator> store, ServerHost& host);

  // Starts the next incarnation: up, empty, its pusher looking at once.
  void start();
  // The server crashes: down, its memory lost (streams, shares, beats).
  // Returns its budgets, by budget: what they sent counts until it
  // expires. Precondition: up.
  std::vector<std::pair<int, std::unique_ptr<ServedBudget>>> crash();

  // A report message on stream `id` (the door's report: each usage
  // reported, or its bucket abandoned when reported idle for abandonIdle,
  // then each budget touched assigned once). Precondition: up, and the
  // stream opened on this incarnation.
  void on_report(int64_t id, const Report& report);
  // The door's close of stream `id`, opened on incarnation `inc`: its
  // clients are forgotten, then the pusher woken. Nothing when that
  // incarnation is gone or the stream unknown.
  void close_stream(int inc, int64_t id);

  // This incarnation's commitments to budget `b` on its clock; 0 when
  // down or without the budget.
  int64_t committed(int b) const;

  bool up() const { return up_; }
  int incarnation() const { return incarnation_; }
  const std::string& node() const { return node_; }
  const NodeClock& clock() const { return *clock_; }

 private:
  // A stream the server has read from (the door's Open and QuotaStream).
  struct OpenStream {
    std::vector<std::pair<int, std::string>> clients;  // (budget, client id)
    std::map<int, int64_t> idle_since;  // buckets reported with no requests
  };
  // What one call of the door pushes, per stream (one response each).
  using Pushes = std::map<int64_t, Response>;

  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  int64_t until(int64_t ms) const;
  ServedBudget* find(int b, uint64_t serial);
  std::optional<int64_t> share_at(const ServedBudget& bd, int64_t now_ms) const;
  ServedBudget& budget_of(int b);
  void beat(int b, uint64_t serial);
  void granted(int b, uint64_t serial, int64_t sent_ms,
               absl::StatusOr<HeartbeatGrant> g);
  void assign(int b, int64_t now, Pushes& out);
  void push(Pushes& pushes);
  void wake();
  void pusher_look(int inc, uint64_t look);
  bool idle_for(OpenStream& open, int b, bool used, int64_t now) const;
  void abandon(OpenStream& open, int b, const std::string& client, int64_t now);

  const int index_;
  const RlqsFleetConfig& config_;
  EventLoop& loop_;
  ServerHost& host_;
  const std::unique_ptr<NodeClock> clock_;
  const int64_t drift_ppm_;
  const std::shared_ptr<SimCoordinator> store_;
  const int64_t commit_ms_;  // L
  const HeartbeatOptions options_;
  std::vector<std::string> keys_;  // the store's key, per budget

  int incarnation_ = 0;
  bool up_ = false;
  std::string node_;  // `s<i>#<incarnation>`
  int64_t seq_ = 0;   // the beats' sequence, over all of the node's keys
  std::vector<std::unique_ptr<ServedBudget>> budgets_;  // null: none now
  std::map<int64_t, OpenStream> streams_;
  // The pusher: when it means to look next (server clock; the door's
  // pusher_due_ms_), and the look that counts.
  int64_t pusher_due_ms_ = kNever;
  uint64_t look_ = 0;
};

}  // namespace throttlekit::sim::rlqs_internal

#endif  // THROTTLEKIT_SIM_RLQS_SERVER_H_
