#include "tools/qdp_command.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tierflow::tools {

Status RunQdpCommand(const QdpConfig& config, bool json, std::ostream& out) {
  Result<QdpReport> r = RunQdp(config);
  if (!r.ok()) return r.status();
  const QdpReport& rep = *r;
  if (json) {
    nlohmann::json doc;
    doc["configs"] = nlohmann::json::array();
    for (const QdpConfigResult& c : rep.configs) {
      doc["configs"].push_back({{"name", c.name},
                                {"time_ms_median", c.time_ms_median},
                                {"times_ms", c.times_ms},
                                {"speedup", c.speedup},
                                {"hit_rate", c.hit_rate},
                                {"hits", c.hits},
                                {"late_hits", c.late_hits},
                                {"misses", c.misses},
                                {"failed_fills", c.failed_fills},
                                {"sum", c.sum},
                                {"scan_a_ms", c.pipelines.scan_a_ms},
                                {"scan_b_ms", c.pipelines.scan_b_ms},
                                {"aggregate_ms", c.pipelines.aggregate_ms},
                                {"bytes_from_storage", c.bytes_from_storage},
                                {"bytes_to_fast_tier", c.bytes_to_fast_tier},
                                {"cache_peak_bytes", c.cache_peak_bytes},
                                {"resident_pages_at_start", c.resident_pages_at_start}});
    }
    doc["expected_sum"] = rep.expected_sum;
    doc["rows"] = rep.rows;
    doc["chunk_rows"] = rep.chunk_rows;
    doc["threads"] = rep.threads;
    doc["storage_gbps"] = rep.storage_gbps;
    doc["storage_floor_ms"] = rep.storage_floor_ms;
    doc["fast_tier_peak_bytes"] = rep.fast_tier_peak_bytes;
    doc["cache_capacity_bytes"] = rep.cache_capacity_bytes;
    doc["slow_tier"] = "storage (column files, read cold)";
    doc["fast_tier"] = "DRAM";
    out << doc.dump(2) << "\n";
    return Status::Ok();
  }
  out << fmt::format(
      "tierflow qdp  SELECT SUM(b) FROM t WHERE a < x   {} rows, chunks of {} rows, {} threads, "
      "median of {} after {} warm-up\n"
      "slow tier: storage (column files, cold every iteration); fast tier: DRAM; cache {} MiB\n\n"
      "  {:<22} {:>10} {:>8} {:>9} {:>16} {:>9} {:>9} {:>9} {:>12} {:>12}\n",
      rep.rows, rep.chunk_rows, rep.threads, config.iterations, config.warmup,
      rep.cache_capacity_bytes >> 20, "configuration", "time ms", "speedup", "hit rate",
      "hit/late/miss", "SCAN_a", "SCAN_b", "AGGREG.", "from storage", "to DRAM");
  for (const QdpConfigResult& c : rep.configs) {
    out << fmt::format("  {:<22} {:>10.1f} {:>7.2f}x {:>8.0f}% {:>16} {:>9.1f} {:>9.1f} {:>9.1f} {:>9} MiB {:>8} MiB\n",
                       c.name, c.time_ms_median, c.speedup, c.hit_rate * 100,
                       fmt::format("{}/{}/{}", c.hits, c.late_hits, c.misses), c.pipelines.scan_a_ms,
                       c.pipelines.scan_b_ms, c.pipelines.aggregate_ms, c.bytes_from_storage >> 20,
                       c.bytes_to_fast_tier >> 20);
  }
  out << fmt::format(
      "\nsum {} (every configuration; checked)   storage {:.2f} GB/s (large direct reads): floor "
      "for b = {:.1f} ms   fast-tier peak {} MiB of {} MiB\n",
      rep.expected_sum, rep.storage_gbps, rep.storage_floor_ms, rep.fast_tier_peak_bytes >> 20,
      rep.cache_capacity_bytes >> 20);
  return Status::Ok();
}

}  // namespace tierflow::tools
