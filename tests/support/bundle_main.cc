// The main of every test bundle: the test files of one area (tests/<area>/)
// compile into one executable, and each file keeps its own ctest entry,
// which runs that executable with `--tk_source=<path>` (docs/testing.md).
//
// `--tk_source=tests/strategy/gcra_test.cc` (repeatable) selects the tests
// whose definition is in a file with that path suffix (GoogleTest records
// each test's file). A `--gtest_filter` given as well narrows the selection
// further. Without `--tk_source` the bundle runs every test it holds, as
// any GoogleTest main does.
//
// Refuses to run, exit code 2, when a named file defines no test in this
// bundle (a test file that silently ran nothing would pass) or when a test
// name is defined in a selected file and in another one (it would run
// under two ctest entries, or under the wrong one).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace {

constexpr std::string_view kSourceFlag = "--tk_source=";

// GoogleTest's filter glob: '*' any run of characters, '?' one character.
bool glob_match(std::string_view pattern, std::string_view name) {
  size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool any_match(std::string_view patterns, std::string_view name) {
  while (!patterns.empty()) {
    const size_t colon = patterns.find(':');
    if (glob_match(patterns.substr(0, colon), name)) return true;
    if (colon == std::string_view::npos) break;
    patterns.remove_prefix(colon + 1);
  }
  return false;
}

// GoogleTest's filter: "POSITIVE[-NEGATIVE]", each a ':'-list of globs.
bool filter_match(std::string_view filter, std::string_view name) {
  const size_t dash = filter.find('-');
  std::string_view positive = filter.substr(0, dash);
  if (positive.empty()) positive = "*";
  if (!any_match(positive, name)) return false;
  return dash == std::string_view::npos ||
         !any_match(filter.substr(dash + 1), name);
}

bool ends_with_path(std::string_view file, std::string_view suffix) {
  if (file.size() < suffix.size()) return false;
  if (file.substr(file.size() - suffix.size()) != suffix) return false;
  return file.size() == suffix.size() ||
         file[file.size() - suffix.size() - 1] == '/';
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::vector<std::string> sources;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.substr(0, kSourceFlag.size()) == kSourceFlag) {
      sources.emplace_back(arg.substr(kSourceFlag.size()));
    } else {
      std::fprintf(stderr, "bundle_main: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (sources.empty()) return RUN_ALL_TESTS();

  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  const std::string user_filter = GTEST_FLAG_GET(filter);
  std::vector<bool> source_seen(sources.size(), false);
  // Every test name defined outside the selected files, to catch a name
  // defined in two files.
  std::vector<std::string> selected;
  std::unordered_set<std::string> elsewhere;
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const testing::TestInfo& info = *suite.GetTestInfo(t);
      std::string name = std::string(suite.name()) + "." + info.name();
      bool in_selection = false;
      for (size_t k = 0; k < sources.size(); ++k) {
        if (ends_with_path(info.file(), sources[k])) {
          source_seen[k] = true;
          in_selection = true;
        }
      }
      if (in_selection) {
        selected.push_back(std::move(name));
      } else {
        elsewhere.insert(std::move(name));
      }
    }
  }
  for (size_t k = 0; k < sources.size(); ++k) {
    if (!source_seen[k]) {
      std::fprintf(stderr,
                   "bundle_main: no test of this bundle is defined in "
                   "'%s'\n",
                   sources[k].c_str());
      return 2;
    }
  }
  std::string filter;
  for (const std::string& name : selected) {
    if (elsewhere.contains(name)) {
      std::fprintf(stderr,
                   "bundle_main: test '%s' is defined in a selected "
                   "file and in another file of this bundle\n",
                   name.c_str());
      return 2;
    }
    if (!filter_match(user_filter, name)) continue;
    if (!filter.empty()) filter += ':';
    filter += name;
  }
  // A user filter that selects none of the file's tests runs nothing (and
  // GoogleTest says so), as a plain --gtest_filter would.
  GTEST_FLAG_SET(filter, filter.empty() ? "-*" : filter);
  return RUN_ALL_TESTS();
}
