#include "suites/harness/core/flag_hint.h"

#include <algorithm>
#include <cstdint>

namespace dlb {

int64_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: three rows of the table are enough for the swap.
  const size_t n = b.size();
  std::vector<int64_t> two(n + 1), one(n + 1), row(n + 1);
  for (size_t j = 0; j <= n; ++j) one[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= n; ++j) {
      const int64_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({one[j] + 1, row[j - 1] + 1, one[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        row[j] = std::min(row[j], two[j - 2] + 1);
      }
    }
    std::swap(two, one);
    std::swap(one, row);
  }
  return one[n];
}

std::optional<std::string> nearest_flag(std::string_view given,
                                        const std::vector<std::string>& known) {
  if (given.size() < 3 || given.substr(0, 2) != "--") return std::nullopt;
  const std::string_view name = given.substr(2);
  return nearest_name(name.substr(0, name.find('=')), known);
}

std::optional<std::string> nearest_name(std::string_view name,
                                        const std::vector<std::string>& known) {
  if (name.empty() || std::find(known.begin(), known.end(), name) != known.end()) {
    return std::nullopt;
  }
  std::optional<std::string> best;
  int64_t best_distance = 3;
  for (const std::string& k : known) {
    const int64_t d = edit_distance(name, k);
    if (d < best_distance && 2 * d < static_cast<int64_t>(k.size())) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace dlb
