// tests/support/path_bfs.h
//
// Provides `path_bfs`, the breadth-first search of the BFS twins that drive
// production objects (tests/model/*_bfs_test.cc): from `init`, every action
// 0 .. actions-1 of every reached state is applied by `step(path, state,
// action)`, where `path` is the action sequence that first reached `state`
// (a twin replays it on fresh objects, as production state cannot be
// copied), until no new state appears. Returns the state graph: each
// reached state with the set of its successors.

#ifndef THROTTLEKIT_TESTS_SUPPORT_PATH_BFS_H_
#define THROTTLEKIT_TESTS_SUPPORT_PATH_BFS_H_

#include <deque>
#include <map>
#include <set>
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

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_PATH_BFS_H_
