// libFuzzer target: a results.jsonl as `dlbench --suite=S --resume` reads it: the bytes after the
// last newline set aside (a torn write), then every line checked as the reports check it. Any
// bytes are read or refused with a dlb::Error; the records read must hold what the harness reads
// back of them (the summary, the skipped points, scaling efficiency) with the types it reads.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "suites/harness/core/results.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz: a record accepted without %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = dlb::fuzz::as_text(data, size);
  text = text.substr(0, text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1);
  dlb::fuzz::run_reader([&] {
    std::vector<nlohmann::json> records = dlb::parse_results(text, "input");
    for (const nlohmann::json& r : records) {
      require(r["point"]["index"].is_number_integer() && r["point"]["id"].is_string(), "a point");
      require(r["suite_config"].is_object() && r["status"].is_string(), "its config and status");
      require(r["config"]["ranks"].is_number_integer(), "its ranks");
      require(r["status"] != "ok" || r["metrics"]["throughput_img_s"].is_number(),
              "its throughput");
    }
    dlb::ok_point_ids(records);
    for (nlohmann::json& r : records) dlb::add_scaling_efficiency(r, records);
  });
  return 0;
}
