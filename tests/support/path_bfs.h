// tests/support/path_bfs.h
//
// Provides `path_bfs`, the breadth-first search of the BFS twins that drive
// production objects (tests/model/*_bfs_test.cc): from `init`, every action
// 0 .. actions-1 of every reached state is applied by `step(path, state,
// action)`, where `path` is the action sequence that first reached `state`
// (a twin replays it on fresh objects, as production state cannot be
// copied), until no new state appears. Returns the state graph: each
// reached state with the set of its successors.
//
// Around it, the twins' common scaffolding: `admission_bfs` (the graph and
// the most admitted in any state), `replay_step<Twin>(args...)` (the step
// that rebuilds a production twin along the path), `expect_same_graph`
// (production's transitions equal the spec's) and `checked_twin_graph`
// (the two searches side by side, expected equal).

#ifndef THROTTLEKIT_TESTS_SUPPORT_PATH_BFS_H_
#define THROTTLEKIT_TESTS_SUPPORT_PATH_BFS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace throttlekit::testing {

template <class State>
using StateGraph = std::map<State, std::set<State>>;

template <class State, class Step>
StateGraph<State> path_bfs(const State& init, int actions, Step step) {
  StateGraph<State> graph;
  std::map<State, std::vector<int>> path{{init, {}}};
  std::deque<State> queue{init};
  while (!queue.empty()) {
    const State s = queue.front();
    queue.pop_front();
    std::set<State>& out = graph[s];
    for (int a = 0; a < actions; ++a) {
      const State t = step(path[s], s, a);
      out.insert(t);
      if (path.count(t) == 0) {
        std::vector<int> p = path[s];
        p.push_back(a);
        path.emplace(t, std::move(p));
        queue.push_back(t);
      }
    }
  }
  return graph;
}

// A reached-state graph and the largest value the admitted count (one
// component of the state) took in it.
template <class State>
struct BfsGraph {
  StateGraph<State> next;
  int64_t max_admitted = 0;
};

// `path_bfs(init, actions, step)`, with the largest `s[admitted_at]` over
// the states reached.
template <class State, class Step>
BfsGraph<State> admission_bfs(const State& init, int actions,
                              size_t admitted_at, Step step) {
  BfsGraph<State> g;
  g.next = path_bfs(init, actions, step);
  for (const auto& [s, next] : g.next) {
    g.max_admitted = std::max(g.max_admitted, s[admitted_at]);
  }
  return g;
}

// The `step` of a production twin for `path_bfs`: builds a fresh
// `Twin(args...)` (with `apply(action)` and `observe()`), replays `path` on
// it, expects it to observe `state` ("replay diverged" otherwise), applies
// `action` and returns what it then observes. `args` must outlive the
// search.
template <class Twin, class... Args>
auto replay_step(const Args&... args) {
  return
      [&args...](const std::vector<int>& path, const auto& state, int action) {
        Twin twin(args...);
        for (int b : path) twin.apply(b);
        EXPECT_EQ(twin.observe(), state) << "replay diverged";
        twin.apply(action);
        return twin.observe();
      };
}

// Expects the production twin's graph to equal the spec's, edge for edge;
// on a difference, names the first state whose successors differ.
template <class State>
void expect_same_graph(const StateGraph<State>& production,
                       const StateGraph<State>& spec) {
  EXPECT_EQ(production.size(), spec.size());
  EXPECT_TRUE(production == spec)
      << "the production limiters' transitions differ from the spec's";
  for (const auto& [s, next] : production) {
    auto it = spec.find(s);
    if (it != spec.end() && it->second == next) continue;
    ADD_FAILURE() << "successors differ from " << ::testing::PrintToString(s)
                  << ": production " << ::testing::PrintToString(next)
                  << ", spec "
                  << (it == spec.end() ? std::string("(unreachable)")
                                       : ::testing::PrintToString(it->second));
    break;
  }
}

// The production twin's graph (`admission_bfs` with
// `replay_step<Twin>(args...)`) beside the spec's (`spec_step(state,
// action)` from the same `init`): expected equal edge for edge, with the
// same most admitted. Returns production's.
template <class Twin, class State, class SpecStep, class... Args>
BfsGraph<State> checked_twin_graph(const State& init, int actions,
                                   size_t admitted_at, SpecStep spec_step,
                                   const Args&... args) {
  const BfsGraph<State> spec =
      admission_bfs(init, actions, admitted_at,
                    [&](const std::vector<int>&, const State& s, int a) {
                      return spec_step(s, a);
                    });
  BfsGraph<State> prod =
      admission_bfs(init, actions, admitted_at, replay_step<Twin>(args...));
  expect_same_graph(prod.next, spec.next);
  EXPECT_EQ(prod.max_admitted, spec.max_admitted);
  return prod;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_PATH_BFS_H_
